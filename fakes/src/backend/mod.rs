//! The share backend: one real directory per share (and per snapshot) under a root, so that
//! a node plugin can mount the bytes an export location names; the data copies that fill a
//! snapshot, or a share or volume made from one, run outside the state lock ([`copy`]).
//!
//! A temporary root ([`TemporaryRoot`]) belongs to the [`crate::FakeCloud`], not to the
//! [`Backend`]: the backend lives in the cloud's state, which the server's thread may still
//! hold for a moment after the cloud is dropped (and forever if the process exits first),
//! whereas the cloud's own fields are dropped, and the directory removed, right away.

mod copy;

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

pub(crate) use copy::Copy;
pub use copy::CopyPause;

/// Directories under `<root>/shares/<id>` and `<root>/snapshots/<id>`.
#[derive(Debug)]
pub(crate) struct Backend {
    root: PathBuf,
}

/// A fresh `$TMPDIR/fake-manila-XXXXXX`, removed with everything in it when dropped, even
/// directories a workload made read-only (which stop the removal of a non-root user).
#[derive(Debug)]
pub(crate) struct TemporaryRoot(PathBuf);

impl TemporaryRoot {
    pub(crate) fn new() -> Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("fake-manila-")
            .tempdir()
            .map_err(|source| Error::Backend {
                path: std::env::temp_dir(),
                source,
            })?;
        // Removed by our Drop, which also copes with read-only directories.
        Ok(Self(dir.keep()))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TemporaryRoot {
    fn drop(&mut self) {
        if std::fs::remove_dir_all(&self.0).is_ok() {
            return;
        }
        make_owner_writable(&self.0);
        if let Err(e) = std::fs::remove_dir_all(&self.0) {
            tracing::warn!(path = %self.0.display(), error = %e, "cannot remove the temporary backend");
        }
    }
}

/// Gives the owner full access to every directory below `dir` (symlinks not followed).
fn make_owner_writable(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(metadata) = std::fs::symlink_metadata(dir) else {
        return;
    };
    if !metadata.is_dir() {
        return;
    }
    let mode = metadata.permissions().mode() | 0o700;
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode));
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        make_owner_writable(&entry.path());
    }
}

impl Backend {
    /// Uses `root` (created if missing).
    pub(crate) fn new(root: &Path) -> Result<Self> {
        for dir in [root.join("shares"), root.join("snapshots")] {
            std::fs::create_dir_all(&dir).map_err(|source| Error::Backend { path: dir, source })?;
        }
        let root = root.canonicalize().map_err(|source| Error::Backend {
            path: root.to_path_buf(),
            source,
        })?;
        Ok(Self { root })
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    pub(crate) fn share_dir(&self, id: &str) -> PathBuf {
        self.root.join("shares").join(id)
    }

    pub(crate) fn snapshot_dir(&self, id: &str) -> PathBuf {
        self.root.join("snapshots").join(id)
    }

    /// Creates a share's directory, filled from a snapshot's when given (in tests; the API
    /// copies with [`Backend::restore_copy`] outside the state lock).
    pub(crate) fn create_share(&self, id: &str, from_snapshot: Option<&str>) -> Result<PathBuf> {
        let dir = self.share_dir(id);
        match from_snapshot {
            Some(snap) => self.restore_copy(id, snap).run(None)?,
            None => create_dir(&dir)?,
        }
        Ok(dir)
    }

    pub(crate) fn delete_share(&self, id: &str) -> Result<()> {
        remove_tree(&self.share_dir(id))
    }

    /// Copies the share's bytes into the snapshot's directory.
    #[cfg(test)]
    pub(crate) fn create_snapshot(&self, id: &str, share_id: &str) -> Result<()> {
        self.snapshot_copy(id, share_id).run(None)
    }

    /// The copy that fills snapshot `id` from share `share_id`.
    pub(crate) fn snapshot_copy(&self, id: &str, share_id: &str) -> Copy {
        Copy {
            from: self.share_dir(share_id),
            to: self.snapshot_dir(id),
        }
    }

    /// The copy that fills share `id` from snapshot `snapshot_id`.
    pub(crate) fn restore_copy(&self, id: &str, snapshot_id: &str) -> Copy {
        Copy {
            from: self.snapshot_dir(snapshot_id),
            to: self.share_dir(id),
        }
    }

    pub(crate) fn delete_snapshot(&self, id: &str) -> Result<()> {
        remove_tree(&self.snapshot_dir(id))
    }

    /// Empties the backend (reset).
    pub(crate) fn clear(&self) -> Result<()> {
        for sub in ["shares", "snapshots"] {
            let dir = self.root.join(sub);
            remove_tree(&dir)?;
            create_dir(&dir)?;
        }
        Ok(())
    }
}

/// Creates `dir` in an existing parent: a request served while the cloud is being dropped
/// must not bring back a removed root.
pub(crate) fn create_dir(dir: &Path) -> Result<()> {
    match std::fs::create_dir(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(Error::Backend {
            path: dir.into(),
            source: e,
        }),
        _ => Ok(()),
    }
}

fn remove_tree(dir: &Path) -> Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::Backend {
            path: dir.into(),
            source: e,
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn snapshot_then_restore_copies_bytes() {
        let root = TemporaryRoot::new().unwrap();
        let b = Backend::new(root.path()).unwrap();
        let dir = b.create_share("a", None).unwrap();
        std::fs::create_dir(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/f"), b"hello").unwrap();
        b.create_snapshot("s", "a").unwrap();
        std::fs::write(dir.join("sub/f"), b"changed").unwrap();
        let restored = b.create_share("b", Some("s")).unwrap();
        assert_eq!(std::fs::read(restored.join("sub/f")).unwrap(), b"hello");
        b.delete_share("a").unwrap();
        b.delete_share("a").unwrap();
        assert!(!dir.exists());
    }
}
