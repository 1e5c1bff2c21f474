//! The host commands and kernel tables the node service uses: `blkid`, `mkfs.*`, `mount`,
//! `umount`, `resize2fs`, `xfs_growfs`, and `/proc/self/mountinfo`.

use std::path::Path;

use tokio::process::Command;

use crate::error::{Error, Result};

/// File systems the node can make and grow.
pub const SUPPORTED_FS: &[&str] = &["ext4", "ext3", "ext2", "xfs"];

/// Runs `program args…`, returning stdout; a failure names the command, status and stderr.
async fn run(program: &str, args: &[&str]) -> Result<String> {
    let output = Command::new(program)
        .args(args)
        .output()
        .await
        .map_err(|e| Error::Command {
            command: format!("{program} {}", args.join(" ")),
            reason: format!("cannot run it: {e}"),
        })?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(Error::Command {
            command: format!("{program} {}", args.join(" ")),
            reason: format!(
                "{}: {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        })
    }
}

fn text(path: &Path) -> Result<&str> {
    path.to_str()
        .ok_or_else(|| Error::InvalidArgument(format!("path {} is not UTF-8", path.display())))
}

/// The file system on `device`, or `None` when it has none (blkid finds nothing).
pub async fn fs_type(device: &Path) -> Result<Option<String>> {
    let output = Command::new("blkid")
        .args(["-p", "-s", "TYPE", "-o", "value", text(device)?])
        .output()
        .await
        .map_err(|e| Error::Command {
            command: format!("blkid {}", device.display()),
            reason: format!("cannot run it: {e}"),
        })?;
    match output.status.code() {
        Some(0) => {
            let found = String::from_utf8_lossy(&output.stdout).trim().to_string();
            Ok((!found.is_empty()).then_some(found))
        }
        // blkid's "nothing identified".
        Some(2) => Ok(None),
        _ => Err(Error::Command {
            command: format!("blkid {}", device.display()),
            reason: format!(
                "{}: {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        }),
    }
}

/// Makes a `fs` file system on `device`.
pub async fn format(device: &Path, fs: &str) -> Result<()> {
    let device = text(device)?;
    let program = format!("mkfs.{fs}");
    match fs {
        "xfs" => run(&program, &["-f", "-q", device]).await?,
        _ => run(&program, &["-F", "-q", device]).await?,
    };
    Ok(())
}

/// Mounts `device` (of type `fs`) on `target` with `options`.
pub async fn mount(device: &Path, target: &Path, fs: &str, options: &[String]) -> Result<()> {
    let mut args = vec!["-t", fs];
    let joined = options.join(",");
    if !joined.is_empty() {
        args.extend(["-o", joined.as_str()]);
    }
    args.extend([text(device)?, text(target)?]);
    run("mount", &args).await.map(|_| ())
}

/// Bind-mounts `source` on `target`, read-only when asked.
pub async fn bind(source: &Path, target: &Path, read_only: bool) -> Result<()> {
    run("mount", &["--bind", text(source)?, text(target)?]).await?;
    if read_only {
        run("mount", &["-o", "remount,bind,ro", text(target)?]).await?;
    }
    Ok(())
}

/// Unmounts `target`.
pub async fn unmount(target: &Path) -> Result<()> {
    run("umount", &[text(target)?]).await.map(|_| ())
}

/// Grows the file system on `device` (mounted at `mount_path`) to the device's size.
pub async fn grow(device: &Path, fs: &str, mount_path: &Path) -> Result<()> {
    match fs {
        "xfs" => run("xfs_growfs", &[text(mount_path)?]).await?,
        "ext2" | "ext3" | "ext4" => run("resize2fs", &[text(device)?]).await?,
        other => {
            return Err(Error::FailedPrecondition(format!(
                "cannot grow a {other} file system (only ext2/3/4 and xfs)"
            )));
        }
    };
    Ok(())
}

/// Whether `path` is a mount point (listed in `/proc/self/mountinfo`).
pub fn is_mount_point(path: &Path) -> Result<bool> {
    let Ok(path) = std::fs::canonicalize(path) else {
        return Ok(false);
    };
    let table = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| Error::Internal(format!("reading /proc/self/mountinfo: {e}")))?;
    Ok(table
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .any(|point| Path::new(&unescape(point)) == path))
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 3 < bytes.len() {
            let digits = std::str::from_utf8(&bytes[i + 1..i + 4]).ok();
            if let Some(value) = digits.and_then(|d| u8::from_str_radix(d, 8).ok()) {
                out.push(value);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape(r"/var/lib/with\040space"), "/var/lib/with space");
        assert_eq!(unescape("/plain"), "/plain");
    }

    #[test]
    fn root_is_a_mount_point_and_a_fresh_dir_is_not() -> Result<()> {
        assert!(is_mount_point(Path::new("/"))?);
        let dir = tempfile::tempdir().map_err(|e| Error::Internal(e.to_string()))?;
        assert!(!is_mount_point(dir.path())?);
        Ok(())
    }
}
