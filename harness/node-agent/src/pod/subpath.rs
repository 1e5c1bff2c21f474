//! A container's `subPath` volume mounts, prepared as kubelet 1.20 prepares them
//! (`pkg/kubelet/kubelet_pods.go` makeMounts, `pkg/volume/util/subpath/subpath_linux.go`),
//! so that no symbolic link inside a volume can lead a container's mount out of it:
//!
//! 1. The subPath's text must be relative and without `..` ([`SubPathError::Absolute`],
//!    [`SubPathError::Backsteps`]; the API server checks `subPath` too, `subPathExpr` is
//!    checked once expanded).
//! 2. A subPath that does not exist is created as a directory with the mode of the volume's
//!    root, below the longest part of it that exists (which, its links resolved, must be in
//!    the volume), one component at a time through descriptors opened without following
//!    links. A component that is a symbolic link to nothing is refused rather than followed
//!    ([`SubPathFault::DanglingLink`]): creating its target could create a directory
//!    anywhere on the node.
//! 3. The subPath, its symbolic links resolved, must be in the volume
//!    ([`SubPathFault::Escapes`]); it is then opened again one component at a time from the
//!    volume's root without following links (a link swapped in after the resolution is
//!    refused, [`SubPathFault::Symlink`]), and what was opened is bind-mounted through
//!    `/proc/self/fd/<fd>` — never by its path, which could change meanwhile — at
//!    `/var/lib/kubelet/pods/<uid>/volume-subpaths/<volume>/<container>/<mount index>`
//!    (in the run directory), which the container mounts. Later attempts of the container
//!    reuse that bind mount while it shows the same file.
//!
//! [`clean_pod`] unmounts those bind mounts and removes their directories when the pod
//! goes, before its volumes are unmounted.

use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

use kube_support::error::IoContext;
use nix::fcntl::OFlag;
use nix::mount::{MntFlags, MsFlags};
use nix::sys::stat::{Mode, SFlag};

use crate::error::{SubPathError, SubPathFault};
use crate::{layout, mounts};

/// kubelet's directory of a pod's subPath bind mounts, in its pod directory.
const SUBPATHS_DIR: &str = "volume-subpaths";

/// One volume mount of a container with a subPath.
#[derive(Debug, Clone, Copy)]
pub struct SubPathMount<'a> {
    /// The pod's UID.
    pub pod_uid: &'a str,
    /// The container's name.
    pub container: &'a str,
    /// The index of the mount among the container's volume mounts.
    pub index: usize,
    /// The volume's name.
    pub volume: &'a str,
    /// The volume's directory on the node.
    pub volume_path: &'a Path,
    /// The subPath (expanded).
    pub sub_path: &'a str,
}

/// The path on the node the container mounts for `mount` (see the module docs), on the node
/// whose run directory is `run_dir`.
pub fn prepare(run_dir: &Path, mount: &SubPathMount<'_>) -> Result<PathBuf, SubPathError> {
    let relative = check(mount.sub_path)?;
    let path = mount.volume_path.join(&relative);
    // As kubelet's PathExists: only "not found" counts as missing.
    let missing =
        matches!(std::fs::metadata(&path), Err(e) if e.kind() == std::io::ErrorKind::NotFound);
    if missing {
        let perm = std::fs::metadata(mount.volume_path)
            .map(|m| m.mode() & 0o7777)
            .map_err(SubPathFault::io("reading", mount.volume_path))
            .map_err(SubPathError::MakeDir)?;
        safe_make_dir(mount.volume_path, &relative, perm).map_err(SubPathError::MakeDir)?;
    }
    let target = bind_target(run_dir, mount);
    bind(mount.volume_path, &relative, &target).map_err(SubPathError::Bind)
}

/// Unmounts the subPath bind mounts of pod `pod_uid` and removes their directories.
pub fn clean_pod(run_dir: &Path, pod_uid: &str) -> Result<(), SubPathFault> {
    let root = subpaths_dir(run_dir, pod_uid);
    for volume in subdirs(&root)? {
        for container in subdirs(&volume)? {
            for entry in entries(&container)? {
                unmount_and_remove(&entry)?;
            }
            remove_dir(&container)?;
        }
        remove_dir(&volume)?;
    }
    remove_dir(&root)
}

/// The subPath's text checked and cleaned: relative, without `..`.
fn check(sub_path: &str) -> Result<PathBuf, SubPathError> {
    let path = Path::new(sub_path);
    if path.is_absolute() {
        return Err(SubPathError::Absolute);
    }
    if sub_path.split('/').any(|c| c == "..") {
        return Err(SubPathError::Backsteps);
    }
    Ok(path
        .components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .collect())
}

/// `<run_dir>/pods/<uid>/volume-subpaths`.
fn subpaths_dir(run_dir: &Path, pod_uid: &str) -> PathBuf {
    layout::host_path(run_dir, &layout::kubelet_pod_dir(pod_uid)).join(SUBPATHS_DIR)
}

/// `<run_dir>/pods/<uid>/volume-subpaths/<volume>/<container>/<index>`.
fn bind_target(run_dir: &Path, mount: &SubPathMount<'_>) -> PathBuf {
    subpaths_dir(run_dir, mount.pod_uid)
        .join(mount.volume)
        .join(mount.container)
        .join(mount.index.to_string())
}

/// Creates `relative` (missing) as a directory with mode `perm` below `volume`, without
/// leaving the volume (kubelet's `doSafeMakeDir`).
fn safe_make_dir(volume: &Path, relative: &Path, perm: u32) -> Result<(), SubPathFault> {
    let base = canonical(volume)?;
    let full = base.join(relative);
    match std::fs::metadata(&full) {
        Ok(m) if m.is_dir() => return Ok(()),
        Ok(_) => return Err(SubPathFault::NotADirectory { path: full }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(SubPathFault::io("reading", full)(e)),
    }
    // The longest part that exists (links followed); what follows is to be created.
    let mut existing = base.clone();
    let mut to_create: Vec<&OsStr> = Vec::new();
    for component in relative.iter() {
        if !to_create.is_empty() {
            to_create.push(component);
            continue;
        }
        let next = existing.join(component);
        match std::fs::metadata(&next) {
            Ok(_) => existing = next,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if let Ok(target) = std::fs::read_link(&next) {
                    let lexical = normalize(&canonical(&existing)?.join(&target));
                    return Err(SubPathFault::DanglingLink {
                        path: next,
                        target,
                        outside: !lexical.starts_with(&base),
                    });
                }
                to_create.push(component);
            }
            Err(e) => return Err(SubPathFault::io("reading", next)(e)),
        }
    }
    let resolved = canonical(&existing)?;
    let inside = within(&existing, &resolved, &base)?;
    let mut parent = safe_open(&base, inside)?;
    let mut current = resolved.clone();
    let mode = Mode::from_bits_truncate(perm);
    for component in to_create {
        current.push(component);
        nix::sys::stat::mkdirat(parent.as_fd(), component, mode)
            .map_err(|e| SubPathFault::io("creating", &current)(e.into()))?;
        let child = nix::fcntl::openat(
            parent.as_fd(),
            component,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| SubPathFault::io("opening", &current)(e.into()))?;
        // mkdirat's mode went through the umask.
        nix::sys::stat::fchmod(child.as_fd(), mode)
            .map_err(|e| SubPathFault::io("setting the mode of", &current)(e.into()))?;
        parent = child;
    }
    Ok(())
}

/// Bind-mounts `relative` of `volume` at `target`, opened without leaving the volume
/// (kubelet's `doBindSubPath`); returns `target`.
fn bind(volume: &Path, relative: &Path, target: &Path) -> Result<PathBuf, SubPathFault> {
    let base = canonical(volume)?;
    let path = volume.join(relative);
    let resolved = canonical(&path)?;
    let inside = within(&path, &resolved, &base)?;
    let fd = safe_open(&base, inside)?;
    if mounts::is_mount_point(target).map_err(SubPathFault::io("inspecting", target))? {
        if same_file(&resolved, target)? {
            tracing::debug!(target = %target.display(), "subPath already bind-mounted");
            return Ok(target.to_path_buf());
        }
        nix::mount::umount2(target, MntFlags::empty())
            .map_err(|e| SubPathFault::io("unmounting", target)(e.into()))?;
    }
    let is_dir = is(&fd, SFlag::S_IFDIR).map_err(SubPathFault::io("reading", &resolved))?;
    make_target(target, is_dir)?;
    // The file the descriptor is open on, whatever its path is now.
    let source = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let mounted = nix::mount::mount(
        Some(source.as_str()),
        target,
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    );
    if let Err(e) = mounted {
        if let Err(cleanup) = unmount_and_remove(target) {
            tracing::warn!(target = %target.display(), error = %crate::error_chain(&cleanup), "removing a subPath mount point failed");
        }
        return Err(SubPathFault::io("bind-mounting", resolved)(e.into()));
    }
    tracing::debug!(subpath = %resolved.display(), target = %target.display(), "subPath bind-mounted");
    Ok(target.to_path_buf())
}

/// The mount point for a subPath: a directory for a directory, an empty file for anything
/// else (a bind mount onto a file takes the type of its source).
fn make_target(target: &Path, is_dir: bool) -> Result<(), SubPathFault> {
    if let Some(parent) = target.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o750)
            .create(parent)
            .map_err(SubPathFault::io("creating", parent))?;
    }
    let made = if is_dir {
        match std::fs::DirBuilder::new().mode(0o750).create(target) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            other => other,
        }
    } else {
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o640)
            .open(target)
            .map(drop)
    };
    made.map_err(SubPathFault::io("creating", target))
}

/// Opens `inside` (relative, links resolved) below `base` one component at a time, following
/// no link (kubelet's `doSafeOpen`); the descriptor is `O_PATH`.
fn safe_open(base: &Path, inside: &Path) -> Result<OwnedFd, SubPathFault> {
    let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mut fd = nix::fcntl::open(base, flags, Mode::empty())
        .map_err(|e| SubPathFault::io("opening", base)(e.into()))?;
    let mut current = base.to_path_buf();
    for component in inside.iter() {
        current.push(component);
        let child = nix::fcntl::openat(fd.as_fd(), component, flags, Mode::empty())
            .map_err(|e| SubPathFault::io("opening", &current)(e.into()))?;
        if is(&child, SFlag::S_IFLNK).map_err(SubPathFault::io("reading", &current))? {
            return Err(SubPathFault::Symlink { path: current });
        }
        fd = child;
    }
    Ok(fd)
}

/// `resolved` (what `path` resolves to) relative to `base`, or [`SubPathFault::Escapes`].
fn within<'a>(path: &Path, resolved: &'a Path, base: &Path) -> Result<&'a Path, SubPathFault> {
    resolved
        .strip_prefix(base)
        .map_err(|_| SubPathFault::Escapes {
            path: path.to_path_buf(),
            resolved: resolved.to_path_buf(),
            volume: base.to_path_buf(),
        })
}

/// `path` with every symbolic link resolved.
fn canonical(path: &Path) -> Result<PathBuf, SubPathFault> {
    std::fs::canonicalize(path).map_err(SubPathFault::io("resolving", path))
}

/// `path` with `.` and `..` removed without looking at the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Whether what `fd` is open on is of `kind`.
fn is(fd: &OwnedFd, kind: SFlag) -> std::io::Result<bool> {
    let stat = nix::sys::stat::fstat(fd.as_fd())?;
    Ok(stat.st_mode & SFlag::S_IFMT.bits() == kind.bits())
}

/// Whether `a` and `b` (not followed if links) are the same file.
fn same_file(a: &Path, b: &Path) -> Result<bool, SubPathFault> {
    let a = std::fs::symlink_metadata(a).map_err(SubPathFault::io("reading", a))?;
    let b = std::fs::symlink_metadata(b).map_err(SubPathFault::io("reading", b))?;
    Ok(a.dev() == b.dev() && a.ino() == b.ino())
}

/// Unmounts `path` (every mount stacked there) and removes it.
fn unmount_and_remove(path: &Path) -> Result<(), SubPathFault> {
    while mounts::is_mount_point(path).map_err(SubPathFault::io("inspecting", path))? {
        nix::mount::umount2(path, MntFlags::empty())
            .map_err(|e| SubPathFault::io("unmounting", path)(e.into()))?;
    }
    let removed = match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir(path),
        Ok(_) => std::fs::remove_file(path),
        Err(e) => Err(e),
    };
    match removed {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(SubPathFault::io("removing", path)(e))
        }
        _ => Ok(()),
    }
}

/// The entries of `dir` (none when it is missing).
fn entries(dir: &Path) -> Result<Vec<PathBuf>, SubPathFault> {
    match std::fs::read_dir(dir) {
        Ok(list) => list
            .map(|e| e.map(|e| e.path()))
            .collect::<std::io::Result<_>>()
            .map_err(SubPathFault::io("reading", dir)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(SubPathFault::io("reading", dir)(e)),
    }
}

/// The subdirectories of `dir` (none when it is missing).
fn subdirs(dir: &Path) -> Result<Vec<PathBuf>, SubPathFault> {
    Ok(entries(dir)?
        .into_iter()
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()))
        .collect())
}

/// Removes the empty directory `dir` (a missing one is fine).
fn remove_dir(dir: &Path) -> Result<(), SubPathFault> {
    match std::fs::remove_dir(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(SubPathFault::io("removing", dir)(e))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::os::unix::fs::{PermissionsExt, symlink};

    use super::*;
    use pod_runtime::host_mounts::ScratchDir;

    fn dir(prefix: &str) -> tempfile::TempDir {
        tempfile::Builder::new().prefix(prefix).tempdir().unwrap()
    }

    fn mount<'a>(volume: &'a Path, sub_path: &'a str) -> SubPathMount<'a> {
        SubPathMount {
            pod_uid: "u-1",
            container: "app",
            index: 0,
            volume: "data",
            volume_path: volume,
            sub_path,
        }
    }

    #[test]
    fn absolute_and_backstepping_sub_paths_are_refused_by_their_text() {
        assert!(matches!(check("/etc"), Err(SubPathError::Absolute)));
        assert!(matches!(check("a/../b"), Err(SubPathError::Backsteps)));
        assert!(matches!(check(".."), Err(SubPathError::Backsteps)));
        assert_eq!(check("./a//b/").unwrap(), Path::new("a/b"));
        assert_eq!(check("a..b").unwrap(), Path::new("a..b"));
        let message = SubPathError::Absolute.kubelet_message("app", "data", "/etc");
        assert_eq!(message, "error SubPath `/etc` must not be an absolute path");
    }

    #[test]
    fn a_missing_sub_path_is_created_with_the_volume_s_mode() {
        let volume = dir("subpath-volume-");
        std::fs::set_permissions(volume.path(), std::fs::Permissions::from_mode(0o2775)).unwrap();
        std::fs::create_dir(volume.path().join("a")).unwrap();
        safe_make_dir(volume.path(), Path::new("a/b/c"), 0o2775).unwrap();
        for d in ["a/b", "a/b/c"] {
            let mode = std::fs::metadata(volume.path().join(d)).unwrap().mode() & 0o7777;
            assert_eq!(mode, 0o2775, "{d}");
        }
        // Existing: nothing to do; a file in the way is named.
        safe_make_dir(volume.path(), Path::new("a/b"), 0o755).unwrap();
        std::fs::write(volume.path().join("f"), "").unwrap();
        let err = safe_make_dir(volume.path(), Path::new("f"), 0o755).unwrap_err();
        assert!(matches!(err, SubPathFault::NotADirectory { .. }), "{err}");
    }

    #[test]
    fn a_link_to_nothing_is_refused_rather_than_followed_to_create_its_target() {
        let volume = dir("subpath-volume-");
        let outside = dir("subpath-outside-");
        let target = outside.path().join("made-by-the-agent");
        symlink(&target, volume.path().join("out")).unwrap();
        symlink("missing", volume.path().join("in")).unwrap();
        let err = safe_make_dir(volume.path(), Path::new("out"), 0o755).unwrap_err();
        assert!(
            matches!(&err, SubPathFault::DanglingLink { outside: true, .. }),
            "{err}"
        );
        let err = safe_make_dir(volume.path(), Path::new("out/deeper"), 0o755).unwrap_err();
        assert!(
            matches!(&err, SubPathFault::DanglingLink { outside: true, .. }),
            "{err}"
        );
        assert!(!target.exists());
        let err = safe_make_dir(volume.path(), Path::new("in"), 0o755).unwrap_err();
        assert!(
            matches!(&err, SubPathFault::DanglingLink { outside: false, .. }),
            "{err}"
        );
        assert!(!volume.path().join("missing").exists());
    }

    #[test]
    fn directories_are_not_created_through_a_link_out_of_the_volume() {
        let volume = dir("subpath-volume-");
        let outside = dir("subpath-outside-");
        symlink(outside.path(), volume.path().join("out")).unwrap();
        let err = safe_make_dir(volume.path(), Path::new("out/new"), 0o755).unwrap_err();
        assert!(matches!(err, SubPathFault::Escapes { .. }), "{err}");
        assert!(!outside.path().join("new").exists());
        // A link that stays inside is followed, as kubelet does.
        std::fs::create_dir(volume.path().join("real")).unwrap();
        symlink("real", volume.path().join("alias")).unwrap();
        safe_make_dir(volume.path(), Path::new("alias/new"), 0o755).unwrap();
        assert!(volume.path().join("real/new").is_dir());
    }

    #[test]
    fn links_out_of_the_volume_are_refused_and_nothing_is_mounted() {
        let scratch = ScratchDir::new().unwrap();
        let volume = scratch.path().join("volume");
        std::fs::create_dir_all(volume.join("sub")).unwrap();
        symlink("../", volume.join("parent")).unwrap();
        symlink("/bin", volume.join("bin")).unwrap();
        symlink("sub/../../volume/..", volume.join("sneaky")).unwrap();
        let run_dir = scratch.path().join("node");
        for sub in ["parent", "bin", "sneaky", "parent/volume/bin"] {
            let err = prepare(&run_dir, &mount(&volume, sub)).unwrap_err();
            assert!(
                matches!(&err, SubPathError::Bind(SubPathFault::Escapes { .. })),
                "{sub}: {err:?}"
            );
            assert_eq!(
                err.kubelet_message("app", "data", sub),
                "failed to prepare subPath for volumeMount \"data\" of container \"app\""
            );
        }
        assert!(mounts::mounts_under(scratch.path()).unwrap().is_empty());
        symlink("/bin/notanexistingpath", volume.join("dangling")).unwrap();
        let err = prepare(&run_dir, &mount(&volume, "dangling")).unwrap_err();
        assert!(
            matches!(
                &err,
                SubPathError::MakeDir(SubPathFault::DanglingLink { outside: true, .. })
            ),
            "{err:?}"
        );
        assert_eq!(
            err.kubelet_message("app", "data", "dangling"),
            "failed to create subPath directory for volumeMount \"data\" of container \"app\""
        );
    }

    #[test]
    fn a_sub_path_is_bind_mounted_reused_and_cleaned() {
        let scratch = ScratchDir::new().unwrap();
        let volume = scratch.path().join("volume");
        std::fs::create_dir_all(volume.join("dir")).unwrap();
        std::fs::write(volume.join("file"), "content").unwrap();
        let run_dir = scratch.path().join("node");
        let dir_target = prepare(&run_dir, &mount(&volume, "dir")).unwrap();
        assert_eq!(
            dir_target,
            run_dir.join("pods/u-1/volume-subpaths/data/app/0")
        );
        assert!(mounts::is_mount_point(&dir_target).unwrap());
        std::fs::write(dir_target.join("written"), "x").unwrap();
        assert!(volume.join("dir/written").is_file());
        // A second attempt of the container reuses the mount.
        assert_eq!(
            prepare(&run_dir, &mount(&volume, "dir")).unwrap(),
            dir_target
        );
        assert_eq!(mounts::mounts_under(&run_dir).unwrap().len(), 1);
        let file = SubPathMount {
            index: 1,
            ..mount(&volume, "file")
        };
        let file_target = prepare(&run_dir, &file).unwrap();
        assert_eq!(std::fs::read_to_string(&file_target).unwrap(), "content");
        // A missing one is created in the volume.
        let created = SubPathMount {
            index: 2,
            ..mount(&volume, "new/deeper")
        };
        prepare(&run_dir, &created).unwrap();
        assert!(volume.join("new/deeper").is_dir());

        clean_pod(&run_dir, "u-1").unwrap();
        assert!(mounts::mounts_under(scratch.path()).unwrap().is_empty());
        assert!(!run_dir.join("pods/u-1/volume-subpaths").exists());
        assert_eq!(
            std::fs::read_to_string(volume.join("file")).unwrap(),
            "content"
        );
        // Nothing to clean is fine.
        clean_pod(&run_dir, "u-1").unwrap();
    }
}
