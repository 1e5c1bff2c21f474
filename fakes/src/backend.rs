//! The share backend: one real directory per share (and per snapshot) under a root, so that
//! a node plugin can mount the bytes an export location names.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Directories under `<root>/shares/<id>` and `<root>/snapshots/<id>`.
#[derive(Debug)]
pub(crate) struct Backend {
    root: PathBuf,
    /// Keeps a temporary root alive (and removes it) when the cloud owns it.
    _temp: Option<tempfile::TempDir>,
}

impl Backend {
    /// Uses `root` (created if missing), or a fresh temporary directory.
    pub(crate) fn new(root: Option<&Path>) -> Result<Self> {
        let (root, temp) = match root {
            Some(root) => (root.to_path_buf(), None),
            None => {
                let temp = tempfile::Builder::new()
                    .prefix("fake-manila-")
                    .tempdir()
                    .map_err(|source| Error::Backend {
                        path: std::env::temp_dir(),
                        source,
                    })?;
                (temp.path().to_path_buf(), Some(temp))
            }
        };
        for dir in [root.join("shares"), root.join("snapshots")] {
            std::fs::create_dir_all(&dir).map_err(|source| Error::Backend { path: dir, source })?;
        }
        let root = root.canonicalize().map_err(|source| Error::Backend {
            path: root.clone(),
            source,
        })?;
        Ok(Self { root, _temp: temp })
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    pub(crate) fn share_dir(&self, id: &str) -> PathBuf {
        self.root.join("shares").join(id)
    }

    fn snapshot_dir(&self, id: &str) -> PathBuf {
        self.root.join("snapshots").join(id)
    }

    /// Creates a share's directory, filled from a snapshot's when given.
    pub(crate) fn create_share(&self, id: &str, from_snapshot: Option<&str>) -> Result<PathBuf> {
        let dir = self.share_dir(id);
        match from_snapshot {
            Some(snap) => copy_tree(&self.snapshot_dir(snap), &dir)?,
            None => create_dir(&dir)?,
        }
        Ok(dir)
    }

    pub(crate) fn delete_share(&self, id: &str) -> Result<()> {
        remove_tree(&self.share_dir(id))
    }

    /// Copies the share's bytes into the snapshot's directory.
    pub(crate) fn create_snapshot(&self, id: &str, share_id: &str) -> Result<()> {
        copy_tree(&self.share_dir(share_id), &self.snapshot_dir(id))
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

fn create_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|source| Error::Backend {
        path: dir.into(),
        source,
    })
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
        let b = Backend::new(None).unwrap();
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
