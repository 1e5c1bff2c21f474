//! One embedded cluster shared by many test processes: a background *cluster process* owns it
//! and lives until told to stop or until a watched process (the nextest run) exits.
//!
//! - [`serve`] is the cluster process itself (`conformance cluster serve`): it starts the
//!   cluster, then waits for SIGTERM, SIGINT or the exit of `until_pid`, and stops it.
//! - [`up`] (`conformance cluster up`) starts [`serve`] detached from the caller (own process
//!   group, output in `<run dir>/cluster.log`, no inherited stdio, so nextest does not see a
//!   leaked process), relays its progress and returns once the cluster is ready, or fails
//!   with the end of its log.
//! - [`down`] stops a cluster process and waits until it has cleaned up.

use std::ffi::OsString;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use kube_support::error::IoContext;
use nix::sys::signal::Signal;
use tokio::signal::unix::{SignalKind, signal};

use super::super::error::{Error, Result};
use super::description::{CLUSTER_LOG, ClusterDescription};
use super::node_agents::locate_binary;
use super::{EmbeddedCluster, EmbeddedOptions};
use control_plane::process::log_tail;
use pod_runtime::ProcessId;

/// The environment variable naming the `conformance` binary (used by
/// [`Cluster::shared`](super::super::Cluster::shared) to start a cluster process).
pub const CONFORMANCE_ENV: &str = "HARNESS_CONFORMANCE_BIN";

/// Runs a cluster until SIGTERM/SIGINT, or until the process `until_pid` exits; then stops it.
pub async fn serve(options: EmbeddedOptions, until_pid: Option<u32>) -> Result<()> {
    let watched = match until_pid {
        Some(pid) => Some(
            ProcessId::of(pid as i32).ok_or_else(|| Error::InvalidOption {
                option: "until-pid",
                reason: format!("no process {pid}"),
            })?,
        ),
        None => None,
    };
    let mut term = signal(SignalKind::terminate()).map_err(Error::io("handling", "SIGTERM"))?;
    let mut int = signal(SignalKind::interrupt()).map_err(Error::io("handling", "SIGINT"))?;
    let cluster = tokio::select! {
        started = EmbeddedCluster::start(options) => started?,
        _ = term.recv() => return Ok(()),
        _ = int.recv() => return Ok(()),
    };
    let watched_exit = async {
        match &watched {
            Some(process) => process.exited().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: stopping"),
        _ = int.recv() => tracing::info!("SIGINT: stopping"),
        exited = watched_exit => match exited {
            Ok(()) => tracing::info!(pid = ?until_pid, "the watched process exited: stopping"),
            Err(e) => tracing::warn!("watching the process failed ({e}): stopping"),
        },
    }
    cluster.stop().await?;
    tracing::info!("cluster stopped");
    Ok(())
}

/// What [`up`] starts.
#[derive(Debug, Clone)]
pub struct UpOptions {
    /// The run directory; default a fresh `cluster-XXXXXX` under `base_dir`.
    pub run_dir: Option<PathBuf>,
    /// Where fresh run directories go.
    pub base_dir: PathBuf,
    /// The arguments of `conformance cluster serve` besides `--run-dir` (nodes, zones, …).
    pub serve_args: Vec<OsString>,
    /// The `conformance` binary; default this executable.
    pub conformance: Option<PathBuf>,
    /// How long the start may take.
    pub timeout: Duration,
}

/// Starts a cluster process in the background and waits until its cluster is ready; returns
/// its run directory. Progress (the cluster process's log) goes to `progress`.
pub async fn up(options: UpOptions, progress: &mut (dyn Write + Send)) -> Result<PathBuf> {
    let conformance = match options.conformance {
        Some(path) => path,
        None => std::env::current_exe().map_err(Error::io("locating", "the current executable"))?,
    };
    let run_dir = match options.run_dir {
        Some(dir) => {
            std::fs::create_dir_all(&dir).map_err(Error::io("creating", &dir))?;
            dir
        }
        None => {
            std::fs::create_dir_all(&options.base_dir)
                .map_err(Error::io("creating", &options.base_dir))?;
            let dir = tempfile::Builder::new()
                .prefix(super::RUN_DIR_PREFIX)
                .rand_bytes(control_plane::run_dir::RANDOM_SUFFIX_LEN)
                .tempdir_in(&options.base_dir)
                .map_err(Error::io("creating a run directory in", &options.base_dir))?;
            dir.keep()
        }
    };
    let run_dir = std::fs::canonicalize(&run_dir).map_err(Error::io("resolving", &run_dir))?;
    if let Some(owner) = owner(&run_dir)? {
        return Err(Error::InUse {
            run_dir,
            pid: owner.pid.to_string(),
        });
    }
    if run_dir.join("run.lock").exists() {
        remove_stale(&run_dir)?;
        std::fs::create_dir_all(&run_dir).map_err(Error::io("creating", &run_dir))?;
    }
    let log = run_dir.join(CLUSTER_LOG);
    let out = std::fs::File::create(&log).map_err(Error::io("creating", &log))?;
    let err = out.try_clone().map_err(Error::io("duplicating", &log))?;
    let mut command = tokio::process::Command::new(&conformance);
    command
        .args(["cluster", "serve", "--run-dir"])
        .arg(&run_dir)
        .args(&options.serve_args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        // Its own process group: a Ctrl-C meant for the caller does not reach it.
        .process_group(0);
    let mut child = command
        .spawn()
        .map_err(Error::io("starting", &conformance))?;
    let mut follower = LogFollower::new(&log);
    let deadline = Instant::now() + options.timeout;
    loop {
        follower.relay(progress);
        if ClusterDescription::read(&run_dir).is_ok() {
            follower.relay(progress);
            return Ok(run_dir);
        }
        if let Ok(Some(status)) = child.try_wait() {
            follower.relay(progress);
            return Err(Error::DaemonFailed {
                status: status.to_string(),
                log_tail: log_tail(&log),
                log,
            });
        }
        if Instant::now() >= deadline {
            let _ = child.start_kill();
            return Err(Error::DaemonFailed {
                status: format!("not ready after {:?}, killed", options.timeout),
                log_tail: log_tail(&log),
                log,
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Stops the cluster process owning `run_dir` and waits (up to `timeout`) until it is gone.
/// A run directory whose cluster process is already gone is removed (after killing what it
/// recorded).
pub async fn down(run_dir: &Path, timeout: Duration) -> Result<()> {
    let Some(owner) = owner(run_dir)? else {
        return remove_stale(run_dir);
    };
    owner.signal(Signal::SIGTERM).map_err(|e| Error::Control {
        request: "stop".into(),
        message: e.to_string(),
    })?;
    match tokio::time::timeout(timeout, owner.exited()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(Error::Control {
            request: "stop".into(),
            message: e.to_string(),
        }),
        Err(_) => Err(Error::Control {
            request: "stop".into(),
            message: format!(
                "the cluster process {} is still running after {timeout:?}; log {}",
                owner.pid,
                run_dir.join(CLUSTER_LOG).display()
            ),
        }),
    }
}

/// Removes a run directory nobody holds, killing what its dead owner recorded (control-plane
/// components, node agents) first.
fn remove_stale(run_dir: &Path) -> Result<()> {
    if !run_dir.exists() {
        return Ok(());
    }
    control_plane::run_dir::clean_stale(run_dir)?;
    // Opening a stale run directory cleans it (kills its recorded processes, empties it).
    control_plane::RunDir::open(run_dir)?.remove()?;
    Ok(())
}

/// The live process owning the run directory (the holder of its `run.lock`), if any.
pub fn owner(run_dir: &Path) -> Result<Option<ProcessId>> {
    let lock = run_dir.join("run.lock");
    let file = match std::fs::File::open(&lock) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("opening", &lock)(e)),
    };
    // A lock we can take is held by nobody.
    if nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).is_ok() {
        return Ok(None);
    }
    let pid = std::fs::read_to_string(&lock).map_err(Error::io("reading", &lock))?;
    Ok(pid.trim().parse().ok().and_then(ProcessId::of))
}

/// Finds the `conformance` binary (of the `suites` package, which runs the suites on top of
/// this crate): `$HARNESS_CONFORMANCE_BIN`, else next to the current executable or one
/// directory up, else built by [`workspace_binaries::binary`].
pub fn locate_conformance() -> Result<PathBuf> {
    match locate_binary("conformance", CONFORMANCE_ENV) {
        Ok(path) => Ok(path),
        Err(missing) if std::env::var_os(CONFORMANCE_ENV).is_some() => Err(missing),
        Err(_) => Ok(workspace_binaries::binary("suites", "conformance")?),
    }
}

/// Copies what a log gained since the last call.
struct LogFollower {
    path: PathBuf,
    offset: u64,
}

impl LogFollower {
    fn new(path: &Path) -> Self {
        Self {
            path: path.to_path_buf(),
            offset: 0,
        }
    }

    fn relay(&mut self, out: &mut (dyn Write + Send)) {
        let Ok(mut file) = std::fs::File::open(&self.path) else {
            return;
        };
        if file.seek(SeekFrom::Start(self.offset)).is_err() {
            return;
        }
        let mut new = Vec::new();
        if let Ok(n) = file.read_to_end(&mut new) {
            self.offset += n as u64;
            let _ = out.write_all(&new);
            let _ = out.flush();
        }
    }
}
