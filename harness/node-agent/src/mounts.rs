//! Host mount checks the volume manager needs, on top of
//! [`host_mounts`](pod_runtime::host_mounts): whether a path is a mount point, whether a
//! directory holds any, making a directory a shared mount point, and removing a directory
//! only when no mount point is left in it (a published share's data would be deleted).

use std::path::{Path, PathBuf};

use pod_runtime::host_mounts;

fn io(e: pod_runtime::Error) -> std::io::Error {
    std::io::Error::other(crate::error_chain(&e))
}

/// Whether `path` is a mount point (a missing path is not).
pub fn is_mount_point(path: &Path) -> std::io::Result<bool> {
    host_mounts::is_mount_point(path).map_err(io)
}

/// Makes `dir` a shared mount point (bind-mounting it onto itself first when it is not a
/// mount point), so mounts made below it in other mount namespaces that share it propagate.
pub fn make_shared(dir: &Path) -> std::io::Result<()> {
    host_mounts::make_shared(dir).map_err(io)
}

/// The mount points at or below `dir`.
pub fn mounts_under(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    host_mounts::mount_points_under(dir).map_err(io)
}

/// Removes `dir` and everything in it, unless a mount point is at or below it (then nothing
/// is removed and the error names the mount points). A missing `dir` is fine.
pub fn remove_unmounted_dir(dir: &Path) -> std::io::Result<()> {
    let mounted = mounts_under(dir)?;
    if !mounted.is_empty() {
        let list: Vec<String> = mounted.iter().map(|m| m.display().to_string()).collect();
        return Err(std::io::Error::other(format!(
            "{} still holds mount points: {}",
            dir.display(),
            list.join(", ")
        )));
    }
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn the_root_is_a_mount_point_and_a_fresh_dir_is_not() {
        assert!(is_mount_point(Path::new("/")).unwrap());
        let dir = tempfile::Builder::new()
            .prefix("mounts-")
            .tempdir()
            .unwrap();
        assert!(!is_mount_point(dir.path()).unwrap());
        assert!(mounts_under(dir.path()).unwrap().is_empty());
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        remove_unmounted_dir(&dir.path().join("a")).unwrap();
        assert!(!dir.path().join("a").exists());
    }
}
