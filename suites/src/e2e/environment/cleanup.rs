//! What an environment leaves on the host, and its removal: the cluster's processes (control
//! plane, node agents, pods), the mounts below its run directory (each node's shared `pods/`
//! and `plugins/`, the volumes published there) and the run directory itself, which also holds
//! the fake cloud's exports.
//!
//! [`ClusterGuard`] owns the embedded cluster. [`ClusterGuard::stop`] is the graceful end
//! (teardown). Dropped before that (a failed assertion, a panic, an early `?`), it ends
//! everything synchronously, as `Drop` must:
//!
//! 1. it drops the cluster's handle: the control-plane components and node agents are killed
//!    (their process handles kill on drop) and the run's lifeline closes, which ends every pod;
//! 2. it waits (at most [`GRACE`]) until no process names the run directory on its command
//!    line (each component, agent and pod sandbox does), SIGKILLs any left and waits again, so
//!    that nothing mounts or writes there afterwards;
//! 3. it lazily unmounts everything below the run directory, deepest first, and removes it.
//!
//! With `keep_run_dir` (`E2E_KEEP_RUN_DIR=1`) step 3 is skipped: stderr says where the directory
//! is, what is still mounted below it, and the command that removes both. The drop blocks its
//! thread while the processes go (usually well under a second); in a multi-thread runtime the
//! thread's other tasks move to another worker meanwhile.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cluster::{Cluster, ContainerCluster, EmbeddedCluster};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use pod_runtime::host_mounts;

use super::super::error::{Error, Result};

/// How long a dropped environment waits for its processes to go, before and after SIGKILL.
const GRACE: Duration = Duration::from_secs(5);
/// How often it looks.
const POLL: Duration = Duration::from_millis(50);

/// The cluster a guard owns: embedded, or in containers.
pub(crate) enum GuardedCluster {
    /// Processes of this host.
    Embedded(Box<EmbeddedCluster>),
    /// Containers (removed by the cluster itself, also when dropped).
    Containers(Box<ContainerCluster>),
}

/// The environment's cluster; ends it, its processes, mounts and run directory when
/// dropped without [`ClusterGuard::stop`] (see the module docs).
pub(crate) struct ClusterGuard {
    embedded: Option<GuardedCluster>,
    run_dir: PathBuf,
    keep_run_dir: bool,
    stopped: bool,
}

impl ClusterGuard {
    /// Guards `embedded`; `keep_run_dir` keeps its run directory (and its mounts) at the end.
    pub(crate) fn new(embedded: EmbeddedCluster, keep_run_dir: bool) -> Self {
        ClusterGuard {
            run_dir: embedded.run_dir().to_path_buf(),
            embedded: Some(GuardedCluster::Embedded(Box::new(embedded))),
            keep_run_dir,
            stopped: false,
        }
    }

    /// Guards a cluster of the containers backend (prepared or booted).
    pub(crate) fn containers(cluster: ContainerCluster, keep_run_dir: bool) -> Self {
        ClusterGuard {
            run_dir: cluster.run_dir().to_path_buf(),
            embedded: Some(GuardedCluster::Containers(Box::new(cluster))),
            keep_run_dir,
            stopped: false,
        }
    }

    /// The containers cluster, to boot it after preparing.
    pub(crate) fn containers_mut(&mut self) -> Option<&mut ContainerCluster> {
        match &mut self.embedded {
            Some(GuardedCluster::Containers(cluster)) => Some(cluster),
            _ => None,
        }
    }

    /// A handle on the cluster for the workloads (kube client, exec, logs).
    pub(crate) async fn cluster(&self) -> Result<Cluster> {
        match &self.embedded {
            Some(GuardedCluster::Embedded(embedded)) => Ok(embedded.cluster().await?),
            Some(GuardedCluster::Containers(cluster)) => Ok(cluster.cluster().await?),
            None => Err(Error::Unexpected(format!(
                "the cluster of {} is stopped",
                self.run_dir.display()
            ))),
        }
    }

    /// The cluster's run directory (its canonical path).
    pub(crate) fn run_dir(&self) -> &Path {
        &self.run_dir
    }

    /// Stops the cluster gracefully (node agents, pods, control plane) and removes the run
    /// directory, or says where it is kept.
    pub(crate) async fn stop(&mut self) -> Result<()> {
        let result = match self.embedded.take() {
            Some(GuardedCluster::Embedded(embedded)) => embedded.stop().await.map_err(Error::from),
            Some(GuardedCluster::Containers(cluster)) => cluster.stop().await.map_err(Error::from),
            None => Ok(()),
        };
        // The harness removes the run directory unless kept; a failed stop may leave it.
        if self.keep_run_dir {
            report_kept(&self.run_dir);
        } else if self.run_dir.exists() {
            remove(&self.run_dir);
        }
        self.stopped = true;
        result
    }
}

impl Drop for ClusterGuard {
    fn drop(&mut self) {
        if self.stopped {
            return;
        }
        tracing::warn!(run_dir = %self.run_dir.display(), "the e2e environment was dropped without teardown: ending its cluster");
        drop(self.embedded.take());
        let (run_dir, keep) = (&self.run_dir, self.keep_run_dir);
        blocking(|| {
            end_processes(run_dir);
            if keep {
                report_kept(run_dir);
            } else {
                remove(run_dir);
            }
        });
    }
}

/// Runs `f`, which blocks, letting a multi-thread runtime move this worker's tasks elsewhere.
fn blocking(f: impl FnOnce()) {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// Waits until no process names `run_dir`; SIGKILLs those left after [`GRACE`].
fn end_processes(run_dir: &Path) {
    if wait_processes_gone(run_dir) {
        return;
    }
    for (pid, command) in processes_naming(run_dir) {
        tracing::warn!(
            pid,
            command,
            "still running after its cluster was dropped: killing it"
        );
        if let Err(e) = kill(Pid::from_raw(pid), Signal::SIGKILL) {
            tracing::warn!(pid, error = %e, "cannot kill it");
        }
    }
    if !wait_processes_gone(run_dir) {
        eprintln!(
            "e2e: processes naming {} outlived their cluster: {:?}",
            run_dir.display(),
            processes_naming(run_dir)
        );
    }
}

/// Whether, within [`GRACE`], no process names `run_dir` any more.
fn wait_processes_gone(run_dir: &Path) -> bool {
    let deadline = Instant::now() + GRACE;
    loop {
        if processes_naming(run_dir).is_empty() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(POLL);
    }
}

/// The live processes (pid, command line) whose command line contains `dir`: every process of
/// a cluster names a file in its run directory (flags, a pod sandbox's `--dir`).
fn processes_naming(dir: &Path) -> Vec<(i32, String)> {
    let needle = dir.as_os_str().as_bytes();
    let own = std::process::id().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| *n != own)
            .and_then(|n| n.parse().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if cmdline.windows(needle.len()).any(|w| w == needle) && !is_zombie(&entry.path()) {
            let command = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            found.push((pid, command.trim_end().to_string()));
        }
    }
    found
}

/// Whether the process at `/proc/<pid>` has ended and awaits its reaper (or is gone).
fn is_zombie(proc_dir: &Path) -> bool {
    let Ok(stat) = std::fs::read_to_string(proc_dir.join("stat")) else {
        return true;
    };
    // The state follows the command name, which is in parentheses and may contain any byte.
    stat.rsplit_once(')')
        .is_none_or(|(_, rest)| matches!(rest.trim_start().chars().next(), Some('Z' | 'X')))
}

/// Unmounts everything below `run_dir` and removes it; never removes through a mount.
fn remove(run_dir: &Path) {
    match host_mounts::unmount_all_under(run_dir) {
        Ok(0) => {}
        Ok(unmounted) => {
            tracing::info!(run_dir = %run_dir.display(), unmounted, "unmounted what was left below the run directory")
        }
        Err(e) => {
            eprintln!(
                "e2e: cannot unmount below {}: {e}; left in place. Remove it with:\n  {}",
                run_dir.display(),
                removal_command(run_dir)
            );
            return;
        }
    }
    match std::fs::remove_dir_all(run_dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => eprintln!("e2e: cannot remove {}: {e}", run_dir.display()),
    }
}

/// Says on stderr where the kept run directory is, what is mounted below it and how to
/// remove both.
fn report_kept(run_dir: &Path) {
    let mounted = host_mounts::mount_points_under(run_dir)
        .map(|m| m.len())
        .unwrap_or_default();
    eprintln!(
        "e2e: kept the run directory {} (E2E_KEEP_RUN_DIR): the cluster's logs, the nodes' run \
         directories and the fake cloud's exports.",
        run_dir.display()
    );
    if mounted > 0 {
        eprintln!(
            "e2e: {mounted} mounts below it are still mounted (the nodes' shared pods/ and \
             plugins/, volumes left published)."
        );
    }
    eprintln!("e2e: remove it with:\n  {}", removal_command(run_dir));
}

/// The shell command that unmounts what is mounted below `run_dir` now (deepest first, a
/// stacked mount once per layer) and removes it.
fn removal_command(run_dir: &Path) -> String {
    let mut mounts = host_mounts::mount_points_under(run_dir).unwrap_or_default();
    // Stable: the layers of a stacked mount stay together.
    mounts.sort_by_key(|m| std::cmp::Reverse(m.components().count()));
    let remove = format!("rm -rf {}", quoted(run_dir));
    if mounts.is_empty() {
        return remove;
    }
    let targets: Vec<String> = mounts.iter().map(|m| quoted(m)).collect();
    format!("umount --lazy {} && {remove}", targets.join(" "))
}

/// `path` in single quotes for a POSIX shell.
fn quoted(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn paths_are_quoted_for_the_shell() {
        assert_eq!(quoted(Path::new("/tmp/a b")), "'/tmp/a b'");
        assert_eq!(quoted(Path::new("/tmp/it's")), r"'/tmp/it'\''s'");
    }

    #[test]
    fn a_directory_without_mounts_is_removed_with_rm() {
        let dir = tempfile::Builder::new()
            .prefix("cleanup-")
            .tempdir()
            .unwrap();
        assert_eq!(
            removal_command(dir.path()),
            format!("rm -rf '{}'", dir.path().display())
        );
    }

    #[test]
    fn processes_naming_a_directory_are_found_until_they_end() {
        let dir = tempfile::Builder::new()
            .prefix("cleanup-")
            .tempdir()
            .unwrap();
        let file = dir.path().join("followed");
        std::fs::write(&file, "").unwrap();
        let mut child = std::process::Command::new("tail")
            .arg("-f")
            .arg(&file)
            .spawn()
            .unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        // Until the child has exec'd, its command line is still this test's.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut found = processes_naming(dir.path());
        while !found.iter().any(|(p, _)| *p == pid) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
            found = processes_naming(dir.path());
        }
        assert!(found.iter().any(|(p, _)| *p == pid), "{found:?}");
        child.kill().unwrap();
        // Killed but not reaped yet: a zombie, which counts as gone.
        assert!(wait_processes_gone(dir.path()));
        child.wait().unwrap();
    }
}
