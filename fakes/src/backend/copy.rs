//! The data copies of the backends: a share's directory into a snapshot's (and back), a
//! volume's sparse file into a snapshot's or a new volume's. A request only records the copy
//! ([`struct@Copy`]); the router runs it after releasing the state lock, so the API answers while
//! the bytes move, and [`CopyPause`] lets a test hold copies at their start.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use super::create_dir;
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
            copy_sparse(&self.from, &self.to)
        } else {
            copy_tree(&self.from, &self.to)
        };
        if let Some(p) = pause {
            p.leave();
        }
        result
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

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Backend {
        path: path.into(),
        source,
    }
}

/// Copies a file keeping it sparse: blocks of zeros are skipped (left as holes), and the
/// copy has the source's length.
fn copy_sparse(from: &Path, to: &Path) -> Result<()> {
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir).map_err(io_error(dir))?;
    }
    let mut source = File::open(from).map_err(io_error(from))?;
    let len = source.metadata().map_err(io_error(from))?.len();
    let mut target = File::create(to).map_err(io_error(to))?;
    let mut block = vec![0u8; 1 << 20];
    let zeros = vec![0u8; 1 << 20];
    let mut offset = 0u64;
    loop {
        let n = source.read(&mut block).map_err(io_error(from))?;
        if n == 0 {
            break;
        }
        let chunk = &block[..n];
        // A slice comparison (memcmp), fast even in unoptimised builds.
        if chunk != &zeros[..n] {
            target.seek(SeekFrom::Start(offset)).map_err(io_error(to))?;
            target.write_all(chunk).map_err(io_error(to))?;
        }
        offset += n as u64;
    }
    target.set_len(len).map_err(io_error(to))?;
    target.sync_all().map_err(io_error(to))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn sparse_copy_keeps_data_and_length() {
        const GIB: u64 = 1 << 30;
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let mut f = File::create(&a).unwrap();
        f.set_len(GIB).unwrap();
        f.seek(SeekFrom::Start(5 << 20)).unwrap();
        f.write_all(b"hello").unwrap();
        drop(f);
        let b = dir.path().join("copies/b");
        copy_sparse(&a, &b).unwrap();
        let data = std::fs::read(&b).unwrap();
        assert_eq!(data.len() as u64, GIB);
        assert_eq!(&data[5 << 20..(5 << 20) + 5], b"hello");
        use std::os::unix::fs::MetadataExt;
        assert!(std::fs::metadata(&b).unwrap().blocks() * 512 < 16 << 20);
    }
}
