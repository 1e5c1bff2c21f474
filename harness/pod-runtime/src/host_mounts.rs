//! Mount points of the calling process's mount namespace (for the node agent: the host's):
//! whether a path is one, making a directory a shared mount point (so mounts made under it in
//! containers with `Bidirectional` propagation reach the host), and lazily unmounting
//! everything under a directory before it is removed recursively (so a leftover bind mount of a
//! share never gets its data deleted).
//!
//! Everything is read from `/proc/thread-self/mountinfo` (the calling thread's mount namespace:
//! the process's, unless a thread unshared its own, as tests do); paths are compared after
//! resolving symbolic links, as mountinfo lists resolved paths (relative to the process's root).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags};

use super::error::{Error, Result};

const MOUNTINFO: &str = "/proc/thread-self/mountinfo";

/// One line of `/proc/self/mountinfo`: where the mount is and whether it is shared.
#[derive(Debug, Clone, PartialEq, Eq)]
struct MountEntry {
    /// The mount point (field 5), unescaped.
    mount_point: PathBuf,
    /// Whether the optional fields hold `shared:N` (the mount is in a peer group).
    shared: bool,
}

/// The mounts of this mount namespace, in mountinfo order (a mount stacked on another comes
/// after it).
fn mount_table() -> Result<Vec<MountEntry>> {
    mount_table_of(MOUNTINFO)
}

fn mount_table_of(mountinfo: &str) -> Result<Vec<MountEntry>> {
    let text =
        std::fs::read_to_string(mountinfo).map_err(|e| Error::io("reading", mountinfo, e))?;
    Ok(text.lines().filter_map(parse_line).collect())
}

/// The mount points at or below `dir` in this mount namespace and in those of the processes
/// `pids` (e.g. the containers of the containers backend's nodes, whose mounts this host's
/// table does not show), each once; a process gone meanwhile is skipped.
pub fn mount_points_under_in(dir: &Path, pids: &[u32]) -> Result<Vec<PathBuf>> {
    let Some(resolved) = canonical(dir)? else {
        return Ok(Vec::new());
    };
    let mut points = mounts_under(&resolved)?;
    for pid in pids {
        let table = match mount_table_of(&format!("/proc/{pid}/mountinfo")) {
            Ok(table) => table,
            Err(_) if !Path::new(&format!("/proc/{pid}")).exists() => continue,
            Err(e) => return Err(e),
        };
        for entry in table {
            if entry.mount_point.starts_with(&resolved) && !points.contains(&entry.mount_point) {
                points.push(entry.mount_point);
            }
        }
    }
    Ok(points)
}

/// Parses a mountinfo line: `id parent major:minor root mount-point options [optional…] - …`.
fn parse_line(line: &str) -> Option<MountEntry> {
    let mut fields = line.split(' ');
    let mount_point = fields.nth(4)?;
    let _options = fields.next()?;
    let shared = fields
        .take_while(|f| *f != "-")
        .any(|f| f.starts_with("shared:"));
    Some(MountEntry {
        mount_point: PathBuf::from(OsStr::from_bytes(&unescape(mount_point))),
        shared,
    })
}

/// Decodes mountinfo's octal escapes (`\040` for a space, `\011`, `\012`, `\134`).
fn unescape(field: &str) -> Vec<u8> {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    while let Some((&first, tail)) = rest.split_first() {
        let escaped = match tail {
            [a, b, c, ..]
                if first == b'\\' && [a, b, c].iter().all(|d| (b'0'..=b'7').contains(d)) =>
            {
                let value =
                    (u32::from(a - b'0') << 6) | (u32::from(b - b'0') << 3) | u32::from(c - b'0');
                u8::try_from(value).ok()
            }
            _ => None,
        };
        match escaped {
            Some(byte) => {
                out.push(byte);
                rest = &tail[3..];
            }
            None => {
                out.push(first);
                rest = tail;
            }
        }
    }
    out
}

/// `path` with symbolic links resolved; `None` when it does not exist.
fn canonical(path: &Path) -> Result<Option<PathBuf>> {
    match std::fs::canonicalize(path) {
        Ok(p) => Ok(Some(p)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("resolving", path, e)),
    }
}

/// Whether `path` is a mount point of this mount namespace (a missing path is not).
pub fn is_mount_point(path: &Path) -> Result<bool> {
    let Some(path) = canonical(path)? else {
        return Ok(false);
    };
    Ok(mount_table()?.iter().any(|m| m.mount_point == path))
}

/// Whether the mount `path` lives on (the topmost mount at the longest mount point that
/// contains it) is shared, i.e. in a peer group: a clone of it keeps receiving and sending
/// mount events. A missing path is an error naming it.
pub fn is_shared_mount(path: &Path) -> Result<bool> {
    let resolved = canonical(path)?.ok_or_else(|| {
        Error::io(
            "resolving",
            path,
            std::io::Error::from(std::io::ErrorKind::NotFound),
        )
    })?;
    let table = mount_table()?;
    // The longest mount point wins; among equals, the last one (stacked on top).
    let mut best: Option<&MountEntry> = None;
    for entry in table
        .iter()
        .filter(|m| resolved.starts_with(&m.mount_point))
    {
        let deeper = best.is_none_or(|b| {
            entry.mount_point.components().count() >= b.mount_point.components().count()
        });
        if deeper {
            best = Some(entry);
        }
    }
    Ok(best.is_some_and(|m| m.shared))
}

/// Makes `dir` a shared mount point of this mount namespace: when it is not a mount point yet,
/// bind-mounts it onto itself (recursively) first, then marks it `MS_SHARED`. Idempotent.
pub fn make_shared(dir: &Path) -> Result<()> {
    let resolved = canonical(dir)?.ok_or_else(|| {
        Error::io(
            "making a shared mount point of",
            dir,
            std::io::Error::from(std::io::ErrorKind::NotFound),
        )
    })?;
    if !is_mount_point(&resolved)? {
        nix::mount::mount(
            Some(&resolved),
            &resolved,
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            None::<&str>,
        )
        .map_err(|e| Error::io("bind-mounting onto itself", dir, e.into()))?;
    }
    nix::mount::mount(
        None::<&str>,
        &resolved,
        None::<&str>,
        MsFlags::MS_SHARED,
        None::<&str>,
    )
    .map_err(|e| Error::io("making a shared mount of", dir, e.into()))
}

/// The mount points at or below `dir` (resolved), one per mount (stacked mounts repeat).
fn mounts_under(dir: &Path) -> Result<Vec<PathBuf>> {
    Ok(mount_table()?
        .into_iter()
        .map(|m| m.mount_point)
        .filter(|m| m.starts_with(dir))
        .collect())
}

/// The mount points at or below `dir` (symbolic links resolved), in mountinfo order; a missing
/// `dir` has none.
pub fn mount_points_under(dir: &Path) -> Result<Vec<PathBuf>> {
    match canonical(dir)? {
        Some(resolved) => mounts_under(&resolved),
        None => Ok(Vec::new()),
    }
}

/// Lazily unmounts (`MNT_DETACH`) every mount at or below `dir`, deepest first, stacked mounts
/// one by one; returns how many unmounts were done (mounts that vanished meanwhile, e.g. by
/// propagation, are not counted). A missing `dir` has none. Call it before removing a
/// directory recursively, so no bind-mounted data below it is deleted.
pub fn unmount_all_under(dir: &Path) -> Result<usize> {
    let Some(resolved) = canonical(dir)? else {
        return Ok(0);
    };
    let mut done = 0;
    let mut remaining = mounts_under(&resolved)?;
    while let Some(deepest) = remaining
        .iter()
        .max_by_key(|m| m.components().count())
        .cloned()
    {
        let before = remaining.len();
        let result = nix::mount::umount2(&deepest, MntFlags::MNT_DETACH);
        remaining = mounts_under(&resolved)?;
        match result {
            Ok(()) => done += 1,
            // EINVAL/ENOENT: it vanished meanwhile; anything else with no progress is an error.
            Err(e) if remaining.len() >= before => {
                return Err(Error::io("unmounting", deepest, e.into()));
            }
            Err(_) => {}
        }
        if remaining.len() >= before {
            // Unmounted yet still listed as many times: the table changed under us (a mount
            // propagated in); stop rather than loop.
            return Err(Error::io(
                "unmounting",
                deepest,
                std::io::Error::other("mounts keep appearing below the directory"),
            ));
        }
    }
    Ok(done)
}

/// A temporary directory that, when dropped, unmounts everything mounted below it before it
/// is removed: the run directory of a node agent in tests and benches (the agent makes its
/// `pods` and `plugins` shared mount points, which a plain temporary directory would leave
/// behind, mounted, in the host's table).
#[derive(Debug)]
pub struct ScratchDir(tempfile::TempDir);

impl ScratchDir {
    /// A new empty directory under the system's temporary directory.
    pub fn new() -> Result<Self> {
        let dir = std::env::temp_dir();
        tempfile::Builder::new()
            .prefix("scratch-")
            .tempdir()
            .map(ScratchDir)
            .map_err(|e| Error::io("creating a temporary directory in", dir, e))
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let path = self.0.path();
        if let Err(e) = unmount_all_under(path) {
            tracing::warn!(path = %path.display(), error = %e, "unmounting below a scratch directory failed");
        }
        // The test's processes (a pod's containers, a driver, a registrar) may still be
        // ending, removing their sockets and writing their last log lines while the tree
        // goes: one pass of remove_dir_all can then fail with "directory not empty" and
        // leave an emptied directory behind. Try again for a short while.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            match std::fs::remove_dir_all(path) {
                Ok(()) => return,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
                Err(e) if std::time::Instant::now() >= deadline => {
                    tracing::warn!(path = %path.display(), error = %e, "cannot remove a scratch directory");
                    leave_a_note(path, &e);
                    return;
                }
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
            }
        }
    }
}

/// Next to a scratch directory that could not be removed, a file naming the thread (a test
/// runner names it after the test) and the error, so a leftover check can say who left it.
fn leave_a_note(path: &Path, error: &std::io::Error) {
    let thread = std::thread::current()
        .name()
        .unwrap_or("unnamed")
        .replace(|c: char| !c.is_ascii_alphanumeric() && c != '_', "-");
    let mut note = path.as_os_str().to_owned();
    note.push(format!(".left-by-{thread}"));
    let _ = std::fs::write(&note, format!("{}: {error}\n", path.display()));
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn bind(source: &Path, target: &Path) {
        nix::mount::mount(
            Some(source),
            target,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
        .unwrap();
    }

    #[test]
    fn mountinfo_escapes_are_decoded() {
        assert_eq!(unescape(r"/a\040b\011c\012d\134e"), b"/a b\tc\nd\\e");
        assert_eq!(unescape(r"/end\"), br"/end\");
        assert_eq!(unescape(r"/x\09"), br"/x\09");
    }

    #[test]
    fn mountinfo_lines_give_the_mount_point_and_sharing() {
        let shared =
            "36 35 98:0 /mnt1 /mnt/my\\040dir rw,noatime master:1 shared:7 - ext3 /dev/root rw";
        assert_eq!(
            parse_line(shared),
            Some(MountEntry {
                mount_point: PathBuf::from("/mnt/my dir"),
                shared: true
            })
        );
        let private = "25 1 0:22 / /tmp rw - tmpfs tmpfs rw,shared:3";
        assert!(
            !parse_line(private).unwrap().shared,
            "super options are not optional fields"
        );
    }

    // The tests below mount (they need root) in a mount namespace of the test thread's own
    // (so the host's mount table never changes, whatever runs in parallel), inside a scratch
    // directory made a private mount point; each unmounts what it mounted.

    /// The scratch directory of a mounting test: a private mount point of its own, unmounted
    /// (if the test did not) before it is removed, or its removal would fail with EBUSY and
    /// leave an emptied directory behind.
    struct PrivateScratch(tempfile::TempDir);

    impl PrivateScratch {
        fn path(&self) -> &Path {
            self.0.path()
        }
    }

    impl Drop for PrivateScratch {
        fn drop(&mut self) {
            let _ = nix::mount::umount2(self.0.path(), nix::mount::MntFlags::MNT_DETACH);
        }
    }

    fn private_scratch() -> PrivateScratch {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS).unwrap();
        nix::mount::mount(
            None::<&str>,
            "/",
            None::<&str>,
            MsFlags::MS_REC | MsFlags::MS_PRIVATE,
            None::<&str>,
        )
        .unwrap();
        let dir = tempfile::Builder::new()
            .prefix("host-mounts-")
            .tempdir()
            .unwrap();
        bind(dir.path(), dir.path());
        nix::mount::mount(
            None::<&str>,
            dir.path(),
            None::<&str>,
            MsFlags::MS_PRIVATE,
            None::<&str>,
        )
        .unwrap();
        PrivateScratch(dir)
    }

    #[test]
    fn make_shared_makes_a_shared_mount_point_idempotently() {
        let dir = private_scratch();
        let path = dir.path().join("with space");
        std::fs::create_dir(&path).unwrap();
        assert!(!is_mount_point(&path).unwrap());
        make_shared(&path).unwrap();
        make_shared(&path).unwrap();
        assert!(is_mount_point(&path).unwrap());
        assert!(is_shared_mount(&path).unwrap());
        std::fs::create_dir(path.join("sub")).unwrap();
        assert!(is_shared_mount(&path.join("sub")).unwrap(), "below it");
        assert!(!is_mount_point(&path.join("sub")).unwrap());
        assert_eq!(
            mounts_under(&std::fs::canonicalize(&path).unwrap())
                .unwrap()
                .len(),
            1,
            "the second call mounts nothing"
        );
        assert!(!is_shared_mount(dir.path()).unwrap());
        assert_eq!(
            unmount_all_under(dir.path()).unwrap(),
            2,
            "the shared and the scratch"
        );
        assert!(!is_mount_point(&path).unwrap());
    }

    #[test]
    fn a_missing_path_is_no_mount_point_and_has_nothing_to_unmount() {
        let _scratch = private_scratch();
        assert!(!is_mount_point(Path::new("/does/not/exist")).unwrap());
        assert_eq!(unmount_all_under(Path::new("/does/not/exist")).unwrap(), 0);
        let err = make_shared(Path::new("/does/not/exist")).unwrap_err();
        assert!(err.to_string().contains("/does/not/exist"), "{err}");
        assert!(is_mount_point(Path::new("/")).unwrap());
    }

    #[test]
    fn unmount_all_under_detaches_nested_and_stacked_mounts_and_keeps_their_data() {
        let dir = private_scratch();
        let share = dir.path().join("share");
        let node = dir.path().join("node");
        std::fs::create_dir_all(&share).unwrap();
        std::fs::write(share.join("data"), "keep me").unwrap();
        let target = node.join("pods/a/volume");
        std::fs::create_dir_all(&target).unwrap();
        bind(&node, &node); // the directory itself is a mount point
        bind(&share, &target);
        bind(&share, &target); // stacked
        std::fs::create_dir_all(target.join("inner")).unwrap();
        bind(&share, &target.join("inner")); // nested
        assert!(is_mount_point(&target).unwrap());

        assert_eq!(unmount_all_under(&node).unwrap(), 4);
        assert!(!is_mount_point(&target).unwrap());
        assert!(!is_mount_point(&node).unwrap());
        std::fs::remove_dir_all(&node).unwrap();
        assert_eq!(
            std::fs::read_to_string(share.join("data")).unwrap(),
            "keep me"
        );
        assert_eq!(unmount_all_under(&node).unwrap(), 0);
        assert_eq!(unmount_all_under(dir.path()).unwrap(), 1);
    }
}
