//! The run directory: one directory per control plane holding its data, certificates,
//! kubeconfigs and logs, owned by the harness process that created it.
//!
//! Ownership is an exclusive `flock` on `run.lock` (which also records the harness pid). The
//! kernel drops the lock when the harness dies, however it dies, so a run directory whose
//! lock can be taken belongs to a dead harness: it is *stale*. The processes the harness
//! started are recorded in `processes` (pid, start time, name); cleaning a stale directory
//! kills those still alive (the start time guards against a recycled pid) and removes it.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kube_support::error::IoContext;
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::error::{Error, Result};

const LOCK_FILE: &str = "run.lock";
const PROCESSES_FILE: &str = "processes";

/// The directory under `$TMPDIR` where run directories go by default: short (it abbreviates
/// `openstack-csi-conformance`) because unix socket paths below a cluster's run directory
/// must fit 107 bytes (see `cluster::embedded::sockets`).
pub const DEFAULT_BASE_NAME: &str = "occ";

/// How many random characters follow the prefix of a fresh run directory's name.
pub const RANDOM_SUFFIX_LEN: usize = 6;

/// The default base directory of run directories: `$TMPDIR/occ` ([`DEFAULT_BASE_NAME`]).
pub fn default_base() -> PathBuf {
    std::env::temp_dir().join(DEFAULT_BASE_NAME)
}

/// A run directory held by this process (see the module docs).
#[derive(Debug)]
pub struct RunDir {
    path: PathBuf,
    // Held for the life of the run; released by the kernel if the process dies.
    _lock: Flock<File>,
}

/// A stale run directory that [`clean_stale`] removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleRun {
    /// The directory that was removed.
    pub path: PathBuf,
    /// The recorded processes that were still alive and got killed: (name, pid).
    pub killed: Vec<(String, i32)>,
}

impl RunDir {
    /// Creates a fresh run directory `<base>/<prefix><random>` ([`RANDOM_SUFFIX_LEN`]
    /// random characters) and takes its lock.
    pub fn create_in(base: &Path, prefix: &str) -> Result<Self> {
        std::fs::create_dir_all(base).map_err(Error::io("creating", base))?;
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .rand_bytes(RANDOM_SUFFIX_LEN)
            .tempdir_in(base)
            .map_err(Error::io("creating a run directory in", base))?;
        // From here on the directory is ours to keep (or clean on failure below).
        let path = dir.keep();
        match Self::lock_new(&path) {
            Ok(run_dir) => Ok(run_dir),
            Err(e) => {
                let _ = remove_tree(&path);
                Err(e)
            }
        }
    }

    /// Takes the run directory at `path`: creates it if missing, cleans it first if it is
    /// stale, and refuses it if a live harness holds it.
    pub fn open(path: &Path) -> Result<Self> {
        if path.join(LOCK_FILE).exists() {
            clean_one(path)?;
        }
        std::fs::create_dir_all(path).map_err(Error::io("creating", path))?;
        Self::lock_new(path)
    }

    // The lock file is created under a temporary name, locked, then renamed: a cleaner only
    // looks at `run.lock`, so it can never see this directory unlocked.
    fn lock_new(path: &Path) -> Result<Self> {
        let tmp = path.join(format!("{LOCK_FILE}.new"));
        let file = File::create(&tmp).map_err(Error::io("creating", &tmp))?;
        let mut lock =
            Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|(_, errno)| Error::Io {
                action: "locking",
                path: tmp.clone(),
                source: errno.into(),
            })?;
        writeln!(lock, "{}", std::process::id()).map_err(Error::io("writing", &tmp))?;
        let final_path = path.join(LOCK_FILE);
        std::fs::rename(&tmp, &final_path).map_err(Error::io("renaming", &tmp))?;
        Ok(Self {
            path: path.to_path_buf(),
            _lock: lock,
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records a process started for this run, so that a later harness can kill it should
    /// this one die without stopping it.
    pub fn record_process(&self, name: &str, pid: u32) -> Result<()> {
        let file = self.path.join(PROCESSES_FILE);
        let start = process_start_time(pid as i32).unwrap_or(0);
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&file)
            .map_err(Error::io("opening", &file))?;
        writeln!(f, "{pid} {start} {name}").map_err(Error::io("writing", &file))
    }

    /// Removes the directory and releases it.
    pub fn remove(self) -> Result<()> {
        remove_tree(&self.path)
    }
}

/// Removes `path` recursively after lazily unmounting every mount point below it (e.g. a
/// volume a node's CSI plugin published with `Bidirectional` propagation and nobody
/// unpublished), so no mounted data is ever deleted.
fn remove_tree(path: &Path) -> Result<()> {
    let unmounted = pod_runtime::host_mounts::unmount_all_under(path)
        .map_err(|e| Error::io("unmounting the mounts below", path)(std::io::Error::other(e)))?;
    if unmounted > 0 {
        tracing::info!(dir = %path.display(), unmounted, "unmounted leftover mounts before removing");
    }
    std::fs::remove_dir_all(path).map_err(Error::io("removing", path))
}

/// Whether a live harness holds the run directory at `path` (its lock is taken). A missing
/// directory or lock file is not held.
pub fn is_held(path: &Path) -> bool {
    let Ok(file) = File::open(path.join(LOCK_FILE)) else {
        return false;
    };
    // Taking the lock (and dropping it at once) succeeds only if nobody holds it.
    Flock::lock(file, FlockArg::LockExclusiveNonblock).is_err()
}

/// Cleans every stale run directory directly under `base` (see the module docs); directories
/// held by live harnesses are left alone. Returns what was cleaned.
pub fn clean_stale(base: &Path) -> Result<Vec<StaleRun>> {
    let entries = match std::fs::read_dir(base) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("listing", base)(e)),
    };
    let mut cleaned = Vec::new();
    for entry in entries {
        let path = entry.map_err(Error::io("listing", base))?.path();
        if !path.join(LOCK_FILE).is_file() {
            continue;
        }
        match clean_one(&path) {
            Ok(Some(stale)) => cleaned.push(stale),
            Ok(None) | Err(Error::RunDirInUse { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(cleaned)
}

/// Cleans `path` if it is stale; `RunDirInUse` if a live harness holds it.
fn clean_one(path: &Path) -> Result<Option<StaleRun>> {
    let lock_path = path.join(LOCK_FILE);
    let file = match File::open(&lock_path) {
        Ok(file) => file,
        // Removed meanwhile by another cleaner.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("opening", &lock_path)(e)),
    };
    let _lock = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => lock,
        Err((_, Errno::EWOULDBLOCK)) => {
            let holder = std::fs::read_to_string(&lock_path)
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unknown".into());
            return Err(Error::RunDirInUse {
                path: path.to_path_buf(),
                holder,
            });
        }
        Err((_, errno)) => return Err(Error::io("locking", &lock_path)(errno.into())),
    };
    let killed = kill_recorded_processes(path)?;
    tracing::info!(run_dir = %path.display(), ?killed, "cleaning a stale run directory");
    match remove_tree(path) {
        // Removed meanwhile by another cleaner.
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
        result => result?,
    }
    Ok(Some(StaleRun {
        path: path.to_path_buf(),
        killed,
    }))
}

fn kill_recorded_processes(path: &Path) -> Result<Vec<(String, i32)>> {
    let file = path.join(PROCESSES_FILE);
    let text = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("reading", &file)(e)),
    };
    let mut killed = Vec::new();
    for line in text.lines() {
        let mut fields = line.splitn(3, ' ');
        let (Some(pid), Some(start), Some(name)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let (Ok(pid), Ok(start)) = (pid.parse::<i32>(), start.parse::<u64>()) else {
            continue;
        };
        if process_start_time(pid) != Some(start) {
            continue; // gone, or the pid now belongs to another process
        }
        match kill(Pid::from_raw(pid), Signal::SIGKILL) {
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(source) => {
                return Err(Error::Signal {
                    component: name.to_string(),
                    pid,
                    source,
                });
            }
        }
        wait_gone(pid, start);
        killed.push((name.to_string(), pid));
    }
    Ok(killed)
}

// The killed process is not our child: its new parent reaps it. Wait (bounded) until it has,
// so that its files and ports are free when the caller goes on.
fn wait_gone(pid: i32, start: u64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while process_start_time(pid) == Some(start) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The start time of `pid` (field 22 of `/proc/<pid>/stat`, in clock ticks since boot), or
/// `None` if there is no such process or it is a zombie.
pub(crate) fn process_start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain spaces.
    let after_name = &stat[stat.rfind(')')? + 2..];
    let mut fields = after_name.split(' ');
    // after_name starts at field 3 (state).
    if fields.next()? == "Z" {
        return None;
    }
    fields.nth(22 - 4)?.parse().ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use nix::mount::MsFlags;

    #[test]
    fn removing_a_run_dir_unmounts_a_leftover_bind_mount_and_keeps_its_data() {
        // A mount namespace of this test thread's own: the host's mount table never changes.
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS).unwrap();
        let private = MsFlags::MS_REC | MsFlags::MS_PRIVATE;
        nix::mount::mount(None::<&str>, "/", None::<&str>, private, None::<&str>).unwrap();
        let base = tempfile::Builder::new()
            .prefix("run-dir-")
            .tempdir()
            .unwrap();
        let share = base.path().join("share");
        std::fs::create_dir(&share).unwrap();
        std::fs::write(share.join("data"), "published").unwrap();
        let run = RunDir::create_in(base.path(), "run-").unwrap();
        let target = run.path().join("node-a/pods/volume");
        std::fs::create_dir_all(&target).unwrap();
        let bind = MsFlags::MS_BIND;
        nix::mount::mount(Some(&share), &target, None::<&str>, bind, None::<&str>).unwrap();
        let path = run.path().to_path_buf();

        run.remove().unwrap();
        assert!(!path.exists());
        assert_eq!(
            std::fs::read_to_string(share.join("data")).unwrap(),
            "published"
        );
    }
}
