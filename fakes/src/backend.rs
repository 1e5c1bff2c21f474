//! The share backend: one real directory per share (and per snapshot) under a root, so that
//! a node plugin can mount the bytes an export location names.
//!
//! A temporary root ([`TemporaryRoot`]) belongs to the [`crate::FakeCloud`], not to the
//! [`Backend`]: the backend lives in the cloud's state, which the server's thread may still
//! hold for a moment after the cloud is dropped (and forever if the process exits first),
//! whereas the cloud's own fields are dropped, and the directory removed, right away.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::error::{Error, Result};

/// How long a paused copy waits at most for [`CopyPause::release`] (a test that forgot to
/// release must not hang the copy's thread forever).
const PAUSE_LIMIT: Duration = Duration::from_secs(120);

/// A hook on the backend's data copies (snapshot creation, share creation from a snapshot),
/// from [`crate::FakeCloud::pause_backend_copies`]: every copy announces that it started,
/// then waits until [`CopyPause::release`] before copying, and counts when it is done. The
/// copies run outside the cloud's state lock, so the API answers meanwhile; tests use this
/// to order a request before the end of a copy without sleeping.
#[derive(Debug, Clone, Default)]
pub struct CopyPause {
    inner: Arc<(Mutex<PauseCounts>, Condvar)>,
}

#[derive(Debug, Default)]
struct PauseCounts {
    released: bool,
    started: usize,
    finished: usize,
}

impl CopyPause {
    fn counts(&self) -> MutexGuard<'_, PauseCounts> {
        self.inner
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Waits until `check` holds for the counts, at most `limit`; whether it held.
    fn wait_until(&self, limit: Duration, check: impl Fn(&PauseCounts) -> bool) -> bool {
        let guard = self.counts();
        let (guard, _) = self
            .inner
            .1
            .wait_timeout_while(guard, limit, |c| !check(c))
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        check(&guard)
    }

    /// Lets every waiting and future copy proceed.
    pub fn release(&self) {
        self.counts().released = true;
        self.inner.1.notify_all();
    }

    /// How many copies have started (reached the pause).
    pub fn started(&self) -> usize {
        self.counts().started
    }

    /// How many copies have finished.
    pub fn finished(&self) -> usize {
        self.counts().finished
    }

    /// Waits (at most `limit`) until `n` copies have started; whether they have.
    pub fn wait_started(&self, n: usize, limit: Duration) -> bool {
        self.wait_until(limit, |c| c.started >= n)
    }

    /// Waits (at most `limit`) until `n` copies have finished; whether they have.
    pub fn wait_finished(&self, n: usize, limit: Duration) -> bool {
        self.wait_until(limit, |c| c.finished >= n)
    }

    /// Called by a copy before it starts: counts it and waits for the release.
    pub(crate) fn enter(&self) {
        self.counts().started += 1;
        self.inner.1.notify_all();
        if !self.wait_until(PAUSE_LIMIT, |c| c.released) {
            tracing::warn!("a paused backend copy was never released; copying anyway");
        }
    }

    /// Called by a copy when it is done.
    pub(crate) fn leave(&self) {
        self.counts().finished += 1;
        self.inner.1.notify_all();
    }
}

/// A data copy to run outside the state lock: `from` into the new directory `to`.
#[derive(Debug, Clone)]
pub(crate) struct Copy {
    pub from: PathBuf,
    pub to: PathBuf,
}

impl Copy {
    /// Copies (waiting at `pause` first when given).
    pub(crate) fn run(&self, pause: Option<&CopyPause>) -> Result<()> {
        if let Some(p) = pause {
            p.enter();
        }
        // A volume's file (block storage) is copied as a sparse file; a share's directory
        // as a tree.
        let result = if self.from.is_file() {
            crate::cinder::disk::copy_sparse(&self.from, &self.to)
        } else {
            copy_tree(&self.from, &self.to)
        };
        if let Some(p) = pause {
            p.leave();
        }
        result
    }
}

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
fn create_dir(dir: &Path) -> Result<()> {
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

/// Copies regular files and directories (symlinks are recreated, not followed).
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    create_dir(to)?;
    let entries = match std::fs::read_dir(from) {
        Ok(entries) => entries,
        // A source that vanished (or never existed) copies as empty.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(Error::Backend {
                path: from.into(),
                source,
            });
        }
    };
    for entry in entries {
        let entry = entry.map_err(|source| Error::Backend {
            path: from.into(),
            source,
        })?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().map_err(|source| Error::Backend {
            path: src.clone(),
            source,
        })?;
        let io = |source| Error::Backend {
            path: src.clone(),
            source,
        };
        if kind.is_dir() {
            copy_tree(&src, &dst)?;
        } else if kind.is_symlink() {
            let target = std::fs::read_link(&src).map_err(io)?;
            std::os::unix::fs::symlink(target, &dst).map_err(io)?;
        } else {
            std::fs::copy(&src, &dst).map_err(io)?;
        }
    }
    Ok(())
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
