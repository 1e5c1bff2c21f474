//! A pod's `fsGroup` applied to its volumes before its containers start, as kubelet 1.20's
//! `SetVolumeOwnership` (`pkg/volume/volume_linux.go`) does it: every file and directory of
//! the volume gets the group `fsGroup` (its owner kept), the group may read and write
//! (read only on read-only volumes), and directories are group-searchable and setgid, so
//! what containers create later belongs to the group as well. Symbolic links are left alone.
//! Children are changed before their directory, the volume's root last, so that
//! `fsGroupChangePolicy: OnRootMismatch` (skip the walk when the root already has the group
//! and the permissions) never skips a volume whose change was interrupted.
//!
//! Which volumes get it is the caller's decision: emptyDir, configMap, secret, downwardAPI and
//! projected volumes always (their read-only attribute set, but for emptyDir), CSI volumes by
//! the CSIDriver's `fsGroupPolicy` (see
//! [`VolumeManager::mount`](super::csi::VolumeManager::mount)).
//!
//! Unlike kubelet's walk, which reads each path again by name, every file is reached through
//! its parent's descriptor without following symbolic links, so a link swapped in meanwhile
//! (by a pod already using a shared volume) cannot lead the change out of the volume.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use k8s_openapi::api::core::v1::Pod;
use kube_support::error::IoContext;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{FileStat, Mode, SFlag};
use nix::unistd::Gid;

/// Read-write for owner and group (kubelet's `rwMask`).
const RW_MASK: u32 = 0o660;
/// Read for owner and group (kubelet's `roMask`), on read-only volumes.
const RO_MASK: u32 = 0o440;
/// Search for owner and group, added on directories (kubelet's `execMask`).
const EXEC_MASK: u32 = 0o110;
/// The setgid bit, added on directories.
const SETGID: u32 = 0o2000;

/// The pod's `securityContext.fsGroupChangePolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangePolicy {
    /// Walk the whole volume every time it is set up (the default).
    Always,
    /// Walk it only when its root lacks the group or the permissions.
    OnRootMismatch,
}

/// A pod's `fsGroup` and how its volumes get it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsGroup {
    /// The group id.
    pub gid: u32,
    /// When the walk may be skipped.
    pub policy: ChangePolicy,
}

impl FsGroup {
    /// The pod's `securityContext.fsGroup` with its `fsGroupChangePolicy`, when it sets one
    /// (a group id out of range counts as none).
    pub fn of_pod(pod: &Pod) -> Option<FsGroup> {
        let context = pod.spec.as_ref()?.security_context.as_ref()?;
        let gid = u32::try_from(context.fs_group?).ok()?;
        let policy = match context.fs_group_change_policy.as_deref() {
            Some("OnRootMismatch") => ChangePolicy::OnRootMismatch,
            _ => ChangePolicy::Always,
        };
        Some(FsGroup { gid, policy })
    }

    /// The same group, walked every time: what kubelet does for the volume types that
    /// ignore the change policy (emptyDir, configMap, secret, downwardAPI, projected).
    pub fn always(self) -> FsGroup {
        FsGroup {
            policy: ChangePolicy::Always,
            ..self
        }
    }
}

/// Applies `fs_group` to the volume at `root` (see the module docs); `read_only` volumes get
/// read rather than read-write permissions. Returns false when `OnRootMismatch` found the
/// root as wanted and nothing was walked. A file whose group or mode cannot be changed is
/// logged and skipped, as kubelet does; a file or directory that cannot be opened or read
/// fails the whole change, naming it.
pub fn set_volume_ownership<E: IoContext>(
    root: &Path,
    fs_group: FsGroup,
    read_only: bool,
) -> Result<bool, E> {
    let fd = nix::fcntl::open(root, OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty())
        .map_err(|e| E::from_io("opening", root.to_path_buf(), e.into()))?;
    let stat = nix::sys::stat::fstat(&fd)
        .map_err(|e| E::from_io("reading", root.to_path_buf(), e.into()))?;
    if fs_group.policy == ChangePolicy::OnRootMismatch
        && !needs_change(&stat, fs_group.gid, read_only)
    {
        tracing::debug!(volume = %root.display(), gid = fs_group.gid, "fsGroup already applied to the volume's root; skipped");
        return Ok(false);
    }
    walk::<E>(fd, stat, root, fs_group.gid, read_only)?;
    Ok(true)
}

/// Whether the root (`stat`) lacks the group, the permissions or (directories) setgid:
/// kubelet's `requiresPermissionChange`.
fn needs_change(stat: &FileStat, gid: u32, read_only: bool) -> bool {
    if stat.st_gid != gid || !is(stat, SFlag::S_IFDIR) {
        return true;
    }
    let wanted = if read_only { RO_MASK } else { RW_MASK } | EXEC_MASK;
    let mode = stat.st_mode;
    mode & wanted != wanted || mode & SETGID == 0
}

fn is(stat: &FileStat, kind: SFlag) -> bool {
    stat.st_mode & SFlag::S_IFMT.bits() == kind.bits()
}

/// Changes what `fd` (opened with `O_PATH`, not following links) is, children first.
fn walk<E: IoContext>(
    fd: OwnedFd,
    stat: FileStat,
    path: &Path,
    gid: u32,
    read_only: bool,
) -> Result<(), E> {
    if is(&stat, SFlag::S_IFLNK) {
        return Ok(());
    }
    if is(&stat, SFlag::S_IFDIR) {
        // The directory itself, through its descriptor (never a path that could change).
        let entries = std::fs::read_dir(proc_path(&fd))
            .map_err(|e| E::from_io("reading the directory", path.to_path_buf(), e))?;
        for entry in entries {
            let entry =
                entry.map_err(|e| E::from_io("reading the directory", path.to_path_buf(), e))?;
            let name = entry.file_name();
            let child_path = path.join(&name);
            let child = nix::fcntl::openat(
                fd.as_fd(),
                name.as_os_str(),
                OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| E::from_io("opening", child_path.clone(), e.into()))?;
            let child_stat = nix::sys::stat::fstat(&child)
                .map_err(|e| E::from_io("reading", child_path.clone(), e.into()))?;
            walk::<E>(child, child_stat, &child_path, gid, read_only)?;
        }
    }
    change(&fd, &stat, path, gid, read_only);
    Ok(())
}

/// Sets the group and adds the permissions of one file or directory; failures are logged.
fn change(fd: &OwnedFd, stat: &FileStat, path: &Path, gid: u32, read_only: bool) {
    if let Err(e) = nix::unistd::fchownat(
        fd.as_fd(),
        "",
        None,
        Some(Gid::from_raw(gid)),
        AtFlags::AT_EMPTY_PATH,
    ) {
        tracing::warn!(path = %path.display(), gid, error = %e, "changing the group of a volume file failed");
    }
    let mut mask = if read_only { RO_MASK } else { RW_MASK };
    if is(stat, SFlag::S_IFDIR) {
        mask |= SETGID | EXEC_MASK;
    }
    let mode = (stat.st_mode & 0o7777) | mask;
    // An `O_PATH` descriptor cannot be `fchmod`ed; its /proc link leads to the same inode.
    if let Err(e) = std::fs::set_permissions(proc_path(fd), std::fs::Permissions::from_mode(mode)) {
        tracing::warn!(path = %path.display(), mode = format!("{mode:o}"), error = %e, "changing the mode of a volume file failed");
    }
}

/// `/proc/self/fd/<fd>`: the file `fd` is open on, whatever its path is now.
fn proc_path(fd: &OwnedFd) -> String {
    format!("/proc/self/fd/{}", fd.as_raw_fd())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::os::unix::fs::MetadataExt;

    use super::*;

    /// Any error type with an `Io` variant will do.
    type Failed = crate::Error;

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
    }

    fn gid(path: &Path) -> u32 {
        std::fs::symlink_metadata(path).unwrap().gid()
    }

    fn volume() -> tempfile::TempDir {
        let dir = tempfile::Builder::new()
            .prefix("ownership-")
            .tempdir()
            .unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/file"), "x").unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::set_permissions(
            dir.path().join("sub"),
            std::fs::Permissions::from_mode(0o700),
        )
        .unwrap();
        std::fs::set_permissions(
            dir.path().join("sub/file"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        dir
    }

    const GROUP: u32 = 4321;

    fn always() -> FsGroup {
        FsGroup {
            gid: GROUP,
            policy: ChangePolicy::Always,
        }
    }

    #[test]
    fn files_get_the_group_and_group_rw_and_directories_setgid() {
        let dir = volume();
        let outside = tempfile::Builder::new()
            .prefix("ownership-outside-")
            .tempfile()
            .unwrap();
        std::fs::set_permissions(outside.path(), std::fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("sub/link")).unwrap();
        assert!(set_volume_ownership::<Failed>(dir.path(), always(), false).unwrap());
        for d in [dir.path().to_path_buf(), dir.path().join("sub")] {
            assert_eq!((gid(&d), mode(&d)), (GROUP, 0o2770), "{}", d.display());
        }
        let file = dir.path().join("sub/file");
        assert_eq!((gid(&file), mode(&file)), (GROUP, 0o660));
        // The link and what it points to are left alone.
        assert_ne!(gid(&dir.path().join("sub/link")), GROUP);
        assert_eq!((gid(outside.path()), mode(outside.path())), (0, 0o600));
    }

    #[test]
    fn read_only_volumes_get_group_read() {
        let dir = volume();
        set_volume_ownership::<Failed>(dir.path(), always(), true).unwrap();
        assert_eq!(mode(dir.path()), 0o2750);
        assert_eq!(mode(&dir.path().join("sub/file")), 0o640);
    }

    #[test]
    fn on_root_mismatch_skips_a_volume_whose_root_is_as_wanted() {
        let dir = volume();
        let on_mismatch = FsGroup {
            policy: ChangePolicy::OnRootMismatch,
            ..always()
        };
        // The root differs: everything is changed.
        assert!(set_volume_ownership::<Failed>(dir.path(), on_mismatch, false).unwrap());
        assert_eq!(gid(&dir.path().join("sub/file")), GROUP);
        // The root is right: a new file keeps its group and mode.
        let later = dir.path().join("sub/later");
        std::fs::write(&later, "y").unwrap();
        nix::unistd::chown(&later, None, Some(Gid::from_raw(0))).unwrap();
        std::fs::set_permissions(&later, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(!set_volume_ownership::<Failed>(dir.path(), on_mismatch, false).unwrap());
        assert_eq!((gid(&later), mode(&later)), (0, 0o600));
        // Always walks again.
        assert!(set_volume_ownership::<Failed>(dir.path(), always(), false).unwrap());
        assert_eq!((gid(&later), mode(&later)), (GROUP, 0o660));
        // A root without setgid is a mismatch.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o770)).unwrap();
        std::fs::set_permissions(&later, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(set_volume_ownership::<Failed>(dir.path(), on_mismatch, false).unwrap());
        assert_eq!(mode(&later), 0o660);
    }

    #[test]
    fn the_pod_s_fs_group_and_policy_are_read() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "spec": {"containers": [], "securityContext": {
                "fsGroup": 1234, "fsGroupChangePolicy": "OnRootMismatch"
            }}
        }))
        .unwrap();
        assert_eq!(
            FsGroup::of_pod(&pod),
            Some(FsGroup {
                gid: 1234,
                policy: ChangePolicy::OnRootMismatch
            })
        );
        assert_eq!(
            FsGroup::of_pod(&pod).map(FsGroup::always).map(|f| f.policy),
            Some(ChangePolicy::Always)
        );
        let none: Pod =
            serde_json::from_value(serde_json::json!({"spec": {"containers": []}})).unwrap();
        assert_eq!(FsGroup::of_pod(&none), None);
    }
}
