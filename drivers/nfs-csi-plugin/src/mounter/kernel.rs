//! The kernel mounter: `mount -t nfs` and `umount`, for machines with an NFS client.

use std::path::{Path, PathBuf};

use tokio::process::Command;

use super::{MountRequest, Mounter};
use crate::error::{NodeError, Result};

const NAME: &str = "kernel";

/// Where `mount` looks for the NFS helper.
const MOUNT_NFS_DIRS: &[&str] = &["/sbin", "/usr/sbin", "/bin", "/usr/bin"];

/// Mounts with the system's `mount -t nfs` (needs the kernel NFS client and `mount.nfs`,
/// Debian's `nfs-common`).
#[derive(Debug, Clone, Default)]
pub struct KernelMounter;

impl Mounter for KernelMounter {
    fn name(&self) -> &'static str {
        NAME
    }

    fn check_usable(&self) -> Result<()> {
        let unusable = |reason: String| NodeError::MounterUnusable {
            mounter: NAME,
            reason,
        };
        let filesystems = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
        if !kernel_knows_nfs(&filesystems) && nfs_module().is_none() {
            return Err(unusable(
                "the kernel has no NFS client: no nfs/nfs4 in /proc/filesystems and no nfs \
                 module under /lib/modules"
                    .to_owned(),
            ));
        }
        if mount_nfs_helper().is_none() {
            return Err(unusable(format!(
                "mount.nfs (Debian package nfs-common) is not installed in any of {}",
                MOUNT_NFS_DIRS.join(", ")
            )));
        }
        Ok(())
    }

    async fn mount(&self, request: &MountRequest<'_>) -> Result<()> {
        let mut options: Vec<&str> = request.options.iter().map(String::as_str).collect();
        if request.readonly && !options.contains(&"ro") {
            options.push("ro");
        }
        let export = request.export();
        let mut command = Command::new("mount");
        command.args(["-t", "nfs"]);
        if !options.is_empty() {
            command.arg("-o").arg(options.join(","));
        }
        command.arg(&export).arg(request.target);
        run(command).await.map_err(|detail| NodeError::MountFailed {
            export,
            target: request.target.to_owned(),
            detail,
        })
    }

    async fn unmount(&self, target: &Path) -> Result<()> {
        let mut command = Command::new("umount");
        command.arg(target);
        run(command)
            .await
            .map_err(|detail| NodeError::UnmountFailed {
                target: target.to_owned(),
                detail,
            })
    }
}

/// Runs a command; on failure returns its trimmed stderr (or how it failed to start).
async fn run(mut command: Command) -> std::result::Result<(), String> {
    let program = command
        .as_std()
        .get_program()
        .to_string_lossy()
        .into_owned();
    let output = command
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    Err(if stderr.is_empty() {
        format!("{program} exited with {}", output.status)
    } else {
        stderr
    })
}

fn kernel_knows_nfs(filesystems: &str) -> bool {
    filesystems
        .lines()
        .filter_map(|line| line.split_whitespace().last())
        .any(|fs| fs == "nfs" || fs == "nfs4")
}

/// The nfs kernel module of the running kernel, if installed (it loads on first mount).
fn nfs_module() -> Option<PathBuf> {
    let release = nix::sys::utsname::uname()
        .ok()?
        .release()
        .to_string_lossy()
        .into_owned();
    let dir = PathBuf::from(format!("/lib/modules/{release}/kernel/fs/nfs"));
    std::fs::read_dir(&dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n == "nfs.ko" || n.starts_with("nfs.ko."))
        })
}

fn mount_nfs_helper() -> Option<PathBuf> {
    MOUNT_NFS_DIRS
        .iter()
        .map(|dir| Path::new(dir).join("mount.nfs"))
        .find(|path| path.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nfs_is_recognised_in_proc_filesystems() {
        assert!(kernel_knows_nfs("nodev\tsysfs\nnodev\tnfs\n\text4\n"));
        assert!(kernel_knows_nfs("nodev\tnfs4\n"));
        assert!(!kernel_knows_nfs("nodev\tnfsd\n\text4\nnodev\tfuse\n"));
    }

    #[test]
    fn ipv6_servers_are_bracketed_in_the_export() {
        let target = Path::new("/t");
        let request = |server| MountRequest {
            server,
            share: "/exports/a",
            target,
            options: &[],
            readonly: false,
        };
        assert_eq!(request("fd00::1").export(), "[fd00::1]:/exports/a");
        assert_eq!(request("10.0.0.1").export(), "10.0.0.1:/exports/a");
    }
}
