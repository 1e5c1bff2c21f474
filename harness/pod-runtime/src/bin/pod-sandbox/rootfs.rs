//! The sandbox root: a tmpfs with the host's top-level directories as overlays (host = lower
//! layer, upper layer in a tmpfs of the sandbox), special file systems, the pod's identity
//! files and its bind mounts; the pivot into it; the containers' own mounts. Runs inside the
//! sandbox's private mount namespace only, except [`clone_sources`], which runs in the host's.

use std::fs::OpenOptions;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, bail};
use nix::mount::{MntFlags, MsFlags, mount};
use pod_runtime::host_mounts;
use pod_runtime::layout::SandboxDir;
use pod_runtime::{Device, Mount, Propagation, SandboxSpec};
use rustix::fs::CWD;
use rustix::mount::{MoveMountFlags, OpenTreeFlags, move_mount, open_tree};

/// Host top-level entries the sandbox gets fresh or private versions of instead of overlays.
const NOT_OVERLAID: &[&str] = &["proc", "sys", "dev", "tmp", "run"];

/// Builds the root at `dir.rootfs()` from the host's `/`, in the sandbox's PID 1 (so that the
/// fresh `/proc` is the sandbox's PID namespace's) before it pivots into it.
pub fn build(dir: &SandboxDir, spec: &SandboxSpec) -> anyhow::Result<()> {
    let root = dir.rootfs();
    let layers = dir.layers();
    tmpfs(&root, "mode=0755")?;
    tmpfs(&layers, "mode=0700")?;
    mkdir(&layers.join("upper"))?;
    mkdir(&layers.join("work"))?;
    for entry in std::fs::read_dir("/").context("listing the host's /")? {
        let entry = entry.context("listing the host's /")?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if NOT_OVERLAID.contains(&name) {
            continue;
        }
        let file_type = entry
            .file_type()
            .with_context(|| format!("inspecting /{name}"))?;
        let target = root.join(name);
        if file_type.is_symlink() {
            let link = std::fs::read_link(entry.path())
                .with_context(|| format!("reading the link /{name}"))?;
            std::os::unix::fs::symlink(&link, &target)
                .with_context(|| format!("creating the link {target:?}"))?;
        } else if file_type.is_dir() {
            overlay(&entry.path(), &layers, name, &target)?;
        }
    }
    for name in ["proc", "sys", "dev", "tmp", "run"] {
        mkdir(&root.join(name))?;
    }
    // Before the pivot: in a user namespace a new proc mount is refused unless a full one is
    // visible.
    mount(
        Some("proc"),
        &root.join("proc"),
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .context("mounting /proc")?;
    bind(Path::new("/dev"), &root.join("dev"), false)?;
    bind(Path::new("/sys"), &root.join("sys"), true)?;
    tmpfs(&root.join("tmp"), "mode=1777")?;
    tmpfs(&root.join("run"), "mode=0755")?;
    identity_files(&root, &spec.hostname)?;
    for m in &spec.mounts {
        bind_into_root(&root, m)?;
    }
    Ok(())
}

/// Bind-mounts `m.source` at `m.target` inside `root`, creating the mount point when missing
/// (sandbox mounts, made before the pivot, while the host's paths are reachable).
pub fn bind_into_root(root: &Path, m: &Mount) -> anyhow::Result<()> {
    let is_dir = std::fs::metadata(&m.source)
        .with_context(|| format!("inspecting mount source {:?}", m.source))?
        .is_dir();
    let target = mount_point_in_root(root, &m.target, is_dir)?;
    bind(&m.source, &target, m.read_only)
        .with_context(|| format!("mounting {:?} at {:?}", m.source, m.target))
}

/// Where `inner` goes inside `root`, created (a directory or a file, like the mount's source)
/// when missing.
fn mount_point_in_root(root: &Path, inner: &Path, is_dir: bool) -> anyhow::Result<PathBuf> {
    let target = resolve_in_root(root, inner)?;
    if is_dir {
        std::fs::create_dir_all(&target)
            .with_context(|| format!("creating mount point {inner:?}"))?;
    } else if !target.exists() {
        // An existing file is left alone: opening it for writing would copy it up into the
        // overlay's upper layer (a whole binary, for an image's entrypoint).
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating the directory of mount point {inner:?}"))?;
        }
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(&target)
            .with_context(|| format!("creating mount point {inner:?}"))?;
    }
    Ok(target)
}

/// The source of a container mount, cloned where its host path is reachable, to be attached
/// where it is not (the container's mount namespace, whose root is the sandbox's).
#[derive(Debug)]
pub struct SourceClone {
    /// The detached mount tree (`open_tree`).
    tree: OwnedFd,
    /// Whether the source is a directory (else a file).
    is_dir: bool,
}

/// For each mount, a detached recursive clone of its source, made in the calling process's
/// mount namespace, which must be the host's: the clone of a shared mount stays in the host
/// mount's peer group wherever it is attached (what propagation needs; a private mount leaves
/// the group when attached). A `Bidirectional` mount of a source that is not on a shared mount
/// is refused, as it could never propagate.
pub fn clone_sources(mounts: &[Mount]) -> anyhow::Result<Vec<SourceClone>> {
    mounts
        .iter()
        .map(|m| {
            if m.propagation == Propagation::Bidirectional
                && !host_mounts::is_shared_mount(&m.source)
                    .with_context(|| format!("inspecting mount source {:?}", m.source))?
            {
                bail!(
                    "mount source {:?} (at {:?}) must be a shared mount for Bidirectional \
                     propagation, but its host mount is not shared (make it one, e.g. with \
                     pod_runtime::host_mounts::make_shared or `mount --make-shared`)",
                    m.source,
                    m.target
                );
            }
            let tree = open_tree(
                CWD,
                &m.source,
                OpenTreeFlags::OPEN_TREE_CLONE
                    | OpenTreeFlags::OPEN_TREE_CLOEXEC
                    | OpenTreeFlags::AT_RECURSIVE,
            )
            .with_context(|| format!("cloning the mount tree of {:?}", m.source))?;
            let is_dir = nix::sys::stat::fstat(&tree)
                .with_context(|| format!("inspecting mount source {:?}", m.source))?
                .st_mode
                & nix::libc::S_IFMT
                == nix::libc::S_IFDIR;
            Ok(SourceClone { tree, is_dir })
        })
        .collect()
}

/// Attaches `clone` (from [`clone_sources`]) at `m.target` inside `root`, in the container's
/// own (private) mount namespace, with `m`'s propagation: `Private` takes it out of the host
/// mount's peer group, `HostToContainer` makes it a slave (receives, never sends),
/// `Bidirectional` leaves it a peer; `read_only` applies to the top mount as in [`bind`].
pub fn attach_into_root(root: &Path, m: &Mount, clone: SourceClone) -> anyhow::Result<()> {
    let target = mount_point_in_root(root, &m.target, clone.is_dir)?;
    move_mount(
        &clone.tree,
        "",
        CWD,
        &target,
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
    )
    .with_context(|| format!("attaching the clone of {:?} at {:?}", m.source, m.target))?;
    let propagation = match m.propagation {
        Propagation::Private => Some((MsFlags::MS_PRIVATE, "private")),
        Propagation::HostToContainer => Some((MsFlags::MS_SLAVE, "a slave")),
        Propagation::Bidirectional => None,
    };
    if let Some((flag, what)) = propagation {
        mount(
            None::<&str>,
            &target,
            None::<&str>,
            flag | MsFlags::MS_REC,
            None::<&str>,
        )
        .with_context(|| format!("making the mount at {:?} {what}", m.target))?;
    }
    if m.read_only {
        remount_read_only(&target)?;
    }
    Ok(())
}

/// For each device, a detached clone of its source (a device node, or a file one is
/// bind-mounted on; links followed), made in the host's mount namespace like
/// [`clone_sources`].
pub fn clone_devices(devices: &[Device]) -> anyhow::Result<Vec<OwnedFd>> {
    devices
        .iter()
        .map(|d| {
            open_tree(
                CWD,
                &d.source,
                OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC,
            )
            .with_context(|| format!("cloning device {:?} (for {:?})", d.source, d.target))
        })
        .collect()
}

/// Attaches each device clone (from [`clone_devices`]) at its path inside `root`, in the
/// container's own (private) mount namespace. When one goes under `/dev`, the container
/// first gets a `/dev` of its own ([`private_dev`]): the sandbox's is the host's, where the
/// device's mount point would otherwise be created.
pub fn attach_devices(root: &Path, devices: Vec<(Device, OwnedFd)>) -> anyhow::Result<()> {
    let dev = root.join("dev");
    let mut under_dev = false;
    for (d, _) in &devices {
        under_dev |= resolve_in_root(root, &d.target)?.starts_with(&dev);
    }
    if under_dev {
        private_dev(&dev)?;
    }
    for (d, tree) in devices {
        let target = mount_point_in_root(root, &d.target, false)?;
        move_mount(
            &tree,
            "",
            CWD,
            &target,
            MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
        )
        .with_context(|| format!("attaching device {:?} at {:?}", d.source, d.target))?;
        mount(
            None::<&str>,
            &target,
            None::<&str>,
            MsFlags::MS_PRIVATE,
            None::<&str>,
        )
        .with_context(|| format!("making the device at {:?} private", d.target))?;
    }
    Ok(())
}

/// Replaces `dev` (the sandbox's `/dev`, a recursive bind of the host's) in the container's
/// mount namespace with a tmpfs holding the same entries: links copied, every other entry
/// bind-mounted from the old `/dev` (directories recursively, so `/dev/pts` and `/dev/shm`
/// stay what they were). Files created in it then stay in the container.
fn private_dev(dev: &Path) -> anyhow::Result<()> {
    let old = open_tree(
        CWD,
        dev,
        OpenTreeFlags::OPEN_TREE_CLONE
            | OpenTreeFlags::OPEN_TREE_CLOEXEC
            | OpenTreeFlags::AT_RECURSIVE,
    )
    .context("cloning the sandbox's /dev")?;
    tmpfs(dev, "mode=0755")?;
    // Where the old /dev is reachable while its entries are bound; gone afterwards.
    let scratch = dev.join(".sandbox-dev");
    mkdir(&scratch)?;
    move_mount(
        &old,
        "",
        CWD,
        &scratch,
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
    )
    .context("attaching the sandbox's /dev")?;
    let entries = std::fs::read_dir(&scratch).context("listing the sandbox's /dev")?;
    for entry in entries {
        let entry = entry.context("listing the sandbox's /dev")?;
        let target = dev.join(entry.file_name());
        let file_type = entry
            .file_type()
            .with_context(|| format!("inspecting {:?}", entry.path()))?;
        if file_type.is_symlink() {
            let link = std::fs::read_link(entry.path())
                .with_context(|| format!("reading the link {:?}", entry.path()))?;
            std::os::unix::fs::symlink(&link, &target)
                .with_context(|| format!("creating the link {target:?}"))?;
            continue;
        }
        if file_type.is_dir() {
            mkdir(&target)?;
        } else {
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(&target)
                .with_context(|| format!("creating {target:?}"))?;
        }
        bind(&entry.path(), &target, false)?;
    }
    nix::mount::umount2(&scratch, MntFlags::MNT_DETACH).context("detaching the sandbox's /dev")?;
    std::fs::remove_dir(&scratch).with_context(|| format!("removing {scratch:?}"))
}

/// Makes `root` (a mount point) the root of the calling process's mount namespace, which must
/// be private, and detaches every other mount from it, as runc does: `pivot_root`, then a lazy
/// unmount of the old root. The namespace then holds only the mounts below `root`, so it keeps
/// no copy of the host's (whose mount points it would keep busy) and a process entering it
/// (setns) starts at `root`. Mount anything taken from the host's tree (e.g. `/proc`) first.
pub fn pivot_into(root: &Path) -> anyhow::Result<()> {
    std::env::set_current_dir(root).with_context(|| format!("entering {root:?}"))?;
    // The old root ends up stacked on the new one, at ".", without a directory for it.
    nix::unistd::pivot_root(".", ".").map_err(|e| {
        anyhow::anyhow!(
            "pivot_root into {root:?} failed: {e} (the current root must be a mount point \
             with a parent mount, as it is everywhere but in an initramfs)"
        )
    })?;
    nix::mount::umount2(".", MntFlags::MNT_DETACH).context("detaching the old root")?;
    std::env::set_current_dir("/").context("entering the new root")
}

/// Where `path` (absolute, inside the sandbox) lives under `root`, following symbolic links as
/// the sandbox would see them, so a link to an absolute path never leads out to the host.
fn resolve_in_root(root: &Path, path: &Path) -> anyhow::Result<PathBuf> {
    let mut pending: Vec<PathBuf> = path
        .components()
        .rev()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(PathBuf::from(n)),
            _ => None,
        })
        .collect();
    let mut resolved = PathBuf::new(); // relative to root
    let mut links = 0;
    while let Some(part) = pending.pop() {
        let candidate = root.join(&resolved).join(&part);
        match std::fs::symlink_metadata(&candidate) {
            Ok(meta) if meta.file_type().is_symlink() => {
                links += 1;
                if links > 40 {
                    bail!("too many symbolic links resolving {path:?} in the sandbox");
                }
                let link = std::fs::read_link(&candidate)
                    .with_context(|| format!("reading the link {candidate:?}"))?;
                if link.is_absolute() {
                    resolved = PathBuf::new();
                }
                for c in link.components().rev() {
                    match c {
                        Component::Normal(n) => pending.push(PathBuf::from(n)),
                        Component::ParentDir => pending.push(PathBuf::from("..")),
                        _ => {}
                    }
                }
            }
            _ if part == Path::new("..") => {
                resolved.pop();
            }
            _ => resolved.push(part),
        }
    }
    Ok(root.join(resolved))
}

fn overlay(lower: &Path, layers: &Path, name: &str, target: &Path) -> anyhow::Result<()> {
    let upper = layers.join("upper").join(name);
    let work = layers.join("work").join(name);
    for dir in [&upper, &work, &target.to_path_buf()] {
        mkdir(dir)?;
    }
    let paths = [lower, upper.as_path(), work.as_path()];
    if let Some(bad) = paths.iter().find(|p| {
        let s = p.to_string_lossy();
        s.contains(',') || s.contains(':')
    }) {
        bail!("cannot use {bad:?} in an overlay: the path contains ',' or ':'");
    }
    let options = format!(
        "lowerdir={},upperdir={},workdir={}",
        lower.display(),
        upper.display(),
        work.display()
    );
    match mount(
        Some("overlay"),
        target,
        Some("overlay"),
        MsFlags::empty(),
        Some(options.as_str()),
    ) {
        Ok(()) => Ok(()),
        // Some file systems cannot be an overlay's lower layer: show those read-only instead.
        Err(e) => {
            eprintln!(
                "pod-sandbox: overlay of {lower:?} failed ({e}); mounting it read-only instead"
            );
            bind(lower, target, true)
        }
    }
}

fn identity_files(root: &Path, hostname: &str) -> anyhow::Result<()> {
    let etc = root.join("etc");
    mkdir(&etc)?;
    write_replacing(&etc.join("hostname"), &format!("{hostname}\n"))?;
    write_replacing(
        &etc.join("hosts"),
        &format!(
            "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t{hostname}\n"
        ),
    )
}

/// Writes a file in the overlay, replacing a symbolic link rather than following it to the host.
fn write_replacing(path: &Path, text: &str) -> anyhow::Result<()> {
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        std::fs::remove_file(path).with_context(|| format!("replacing {path:?}"))?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {path:?}"))
}

fn mkdir(path: &Path) -> anyhow::Result<()> {
    match std::fs::create_dir(path) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
            Err(e).with_context(|| format!("creating {path:?}"))
        }
        _ => Ok(()),
    }
}

fn tmpfs(target: &Path, options: &str) -> anyhow::Result<()> {
    mount(
        Some("tmpfs"),
        target,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(options),
    )
    .with_context(|| format!("mounting a tmpfs at {target:?}"))
}

/// A recursive bind mount, optionally read-only (the top mount; submounts keep their flags).
pub fn bind(source: &Path, target: &Path, read_only: bool) -> anyhow::Result<()> {
    mount(
        Some(source),
        target,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .with_context(|| format!("bind-mounting {source:?} at {target:?}"))?;
    if read_only {
        remount_read_only(target)?;
    }
    Ok(())
}

/// Makes the mount at `target` read-only (the top mount only).
fn remount_read_only(target: &Path) -> anyhow::Result<()> {
    mount(
        None::<&str>,
        target,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY,
        None::<&str>,
    )
    .with_context(|| format!("making {target:?} read-only"))
}
