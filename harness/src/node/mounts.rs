//! Host mount checks the volume manager needs, on top of
//! [`host_mounts`](crate::runtime::host_mounts): whether a path is a mount point, whether a
//! directory holds any, making a directory a shared mount point, and removing a directory
//! only when no mount point is left in it (a published share's data would be deleted).

use std::path::{Path, PathBuf};

use crate::runtime::host_mounts;

const MOUNTINFO: &str = "/proc/thread-self/mountinfo";

fn io(e: crate::runtime::Error) -> std::io::Error {
    std::io::Error::other(crate::node::error_chain(&e))
}

/// The mount points of this mount namespace.
fn mount_points() -> std::io::Result<Vec<PathBuf>> {
    let text = std::fs::read_to_string(MOUNTINFO)?;
    Ok(text
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|field| PathBuf::from(unescape(field)))
        .collect())
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(digits) => {
                let value = digits
                    .iter()
                    .fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
                out.push(u8::try_from(value).unwrap_or(b'?'));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `path` with its symlinks resolved as far as it exists (mountinfo lists resolved paths).
fn resolved(path: &Path) -> PathBuf {
    if let Ok(p) = std::fs::canonicalize(path) {
        return p;
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => resolved(parent).join(name),
        _ => path.to_path_buf(),
    }
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
    let dir = resolved(dir);
    Ok(mount_points()?
        .into_iter()
        .filter(|m| m.starts_with(&dir))
        .collect())
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
    fn mountinfo_escapes_are_decoded() {
        assert_eq!(unescape(r"/a\040b\134c"), r"/a b\c");
        assert_eq!(unescape(r"/plain\"), r"/plain\");
    }

    #[test]
    fn the_root_is_a_mount_point_and_a_fresh_dir_is_not() {
        assert!(is_mount_point(Path::new("/")).unwrap());
        let dir = tempfile::tempdir().unwrap();
        assert!(!is_mount_point(dir.path()).unwrap());
        assert!(mounts_under(dir.path()).unwrap().is_empty());
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        remove_unmounted_dir(&dir.path().join("a")).unwrap();
        assert!(!dir.path().join("a").exists());
    }
}
