//! The data plane of block storage: every volume (and volume snapshot) is a sparse file
//! under the backend root, and a volume attached to a server is a loop device over that
//! file, published in the server's disk directory as `virtio-<first 20 chars of the id>`,
//! as a virtio disk's serial appears in `/dev/disk/by-id` on a real instance.
//!
//! Loop devices outlive processes, so every one the cloud makes is recorded in a
//! [`LoopRegistry`] shared by the cloud's state and its handle: the handle detaches what is
//! left (and removes the links) when it is dropped, whoever holds the state then.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{Error, Result};

/// Bytes in a GiB (Cinder sizes are GiB).
pub(crate) const GIB: u64 = 1 << 30;

/// Where a volume's file lives.
pub(crate) fn volume_file(root: &Path, id: &str) -> PathBuf {
    root.join("volumes").join(id)
}

/// Where a volume snapshot's file lives.
pub(crate) fn snapshot_file(root: &Path, id: &str) -> PathBuf {
    root.join("volume-snapshots").join(id)
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Backend {
        path: path.to_path_buf(),
        source,
    }
}

/// Creates (or grows) a sparse file of `gib` GiB, its directory included.
pub(crate) fn allocate(path: &Path, gib: u64) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io_error(dir))?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(io_error(path))?;
    let len = gib.saturating_mul(GIB);
    if file.metadata().map_err(io_error(path))?.len() < len {
        file.set_len(len).map_err(io_error(path))?;
    }
    Ok(())
}

/// Removes a file; a missing one is not an error.
pub(crate) fn remove(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::Backend {
            path: path.into(),
            source: e,
        }),
        _ => Ok(()),
    }
}

/// The name of a volume's disk link: `virtio-` and the first 20 characters of its id.
pub(crate) fn link_name(volume_id: &str) -> String {
    let serial: String = volume_id.chars().take(20).collect();
    format!("virtio-{serial}")
}

/// One volume attached to one server on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LoopAttachment {
    /// `/dev/loopN`.
    pub device: PathBuf,
    /// The link in the server's disk directory.
    pub link: PathBuf,
    /// The volume's file.
    pub file: PathBuf,
}

/// The loop devices the cloud made, by (volume id, server id).
#[derive(Debug, Clone, Default)]
pub(crate) struct LoopRegistry {
    inner: Arc<Mutex<BTreeMap<(String, String), LoopAttachment>>>,
}

fn run(program: &str, args: &[&std::ffi::OsStr]) -> std::result::Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(format!(
            "{program} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn loop_error(path: &Path, message: String) -> Error {
    Error::Backend {
        path: path.to_path_buf(),
        source: std::io::Error::other(message),
    }
}

impl LoopRegistry {
    fn entries(&self) -> MutexGuard<'_, BTreeMap<(String, String), LoopAttachment>> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Makes a loop device for `file` and links `disk_dir/virtio-…` to it.
    pub(crate) fn attach(
        &self,
        volume_id: &str,
        server_id: &str,
        file: &Path,
        disk_dir: &Path,
    ) -> Result<LoopAttachment> {
        std::fs::create_dir_all(disk_dir).map_err(io_error(disk_dir))?;
        let device = run(
            "losetup",
            &["-f".as_ref(), "--show".as_ref(), file.as_os_str()],
        )
        .map_err(|m| loop_error(file, m))?;
        let attachment = LoopAttachment {
            device: PathBuf::from(device),
            link: disk_dir.join(link_name(volume_id)),
            file: file.to_path_buf(),
        };
        // Recorded before the link, so that a failure below still detaches it on drop.
        self.entries().insert(
            (volume_id.to_owned(), server_id.to_owned()),
            attachment.clone(),
        );
        let _ = std::fs::remove_file(&attachment.link);
        if let Err(e) = std::os::unix::fs::symlink(&attachment.device, &attachment.link) {
            self.detach(volume_id, server_id);
            return Err(Error::Backend {
                path: attachment.link,
                source: e,
            });
        }
        Ok(attachment)
    }

    /// Removes the link and detaches the loop device of `volume_id` on `server_id`.
    pub(crate) fn detach(&self, volume_id: &str, server_id: &str) {
        let removed = self
            .entries()
            .remove(&(volume_id.to_owned(), server_id.to_owned()));
        if let Some(a) = removed {
            release(&a);
        }
    }

    /// Makes the loop devices of `volume_id` see its file's new size.
    pub(crate) fn refresh(&self, volume_id: &str) -> Result<()> {
        let devices: Vec<LoopAttachment> = self
            .entries()
            .iter()
            .filter(|((v, _), _)| v == volume_id)
            .map(|(_, a)| a.clone())
            .collect();
        for a in devices {
            run("losetup", &["-c".as_ref(), a.device.as_os_str()])
                .map_err(|m| loop_error(&a.device, m))?;
        }
        Ok(())
    }

    /// Every loop device still attached.
    pub(crate) fn list(&self) -> Vec<LoopAttachment> {
        self.entries().values().cloned().collect()
    }

    /// Detaches everything (reset, and the cloud's drop).
    pub(crate) fn detach_all(&self) {
        let all = std::mem::take(&mut *self.entries());
        for a in all.values() {
            release(a);
        }
    }
}

fn release(a: &LoopAttachment) {
    if let Err(e) = std::fs::remove_file(&a.link)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(link = %a.link.display(), error = %e, "cannot remove a disk link");
    }
    if let Err(m) = run("losetup", &["-d".as_ref(), a.device.as_os_str()]) {
        tracing::warn!(device = %a.device.display(), error = %m, "cannot detach a loop device");
    }
}

/// Detaches every loop device of a [`LoopRegistry`] when dropped: held by the cloud's handle.
#[derive(Debug)]
pub(crate) struct LoopGuard(pub LoopRegistry);

impl Drop for LoopGuard {
    fn drop(&mut self) {
        self.0.detach_all();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn link_names_cut_the_id() {
        assert_eq!(
            link_name("0123456789abcdefghijklmnop"),
            "virtio-0123456789abcdefghij"
        );
    }
}
