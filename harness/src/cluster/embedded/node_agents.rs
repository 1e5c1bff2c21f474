//! The node agents of an embedded cluster: one `node-agent` process per node, started with
//! its own client certificate (`system:node:<name>` in `system:nodes`, as kubelet), the run's
//! lifeline, its output in `nodes/<node>.log`, and `PR_SET_PDEATHSIG` so it dies with the
//! cluster process. Stopping one (SIGTERM) leaves its pods running for the next agent to
//! re-adopt; the pods end with the lifeline.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

use super::super::error::{Error, Result};
use super::description::NodeDescription;
use crate::control_plane::RunDir;
use crate::control_plane::process::{die_with_parent, log_tail};
use crate::runtime::Lifeline;

/// The environment variable naming the `node-agent` binary.
pub const NODE_AGENT_ENV: &str = "HARNESS_NODE_AGENT_BIN";

/// Everything a node agent is started with; kept to restart it identically.
#[derive(Debug, Clone)]
pub(crate) struct NodeAgentLaunch {
    pub(crate) binary: PathBuf,
    pub(crate) node: NodeDescription,
    pub(crate) region: String,
    pub(crate) kubeconfig: PathBuf,
    pub(crate) api_host: String,
    pub(crate) api_port: u16,
    pub(crate) ca_file: PathBuf,
    pub(crate) images: Vec<(String, PathBuf)>,
    pub(crate) lifeline: Lifeline,
}

impl NodeAgentLaunch {
    fn args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![
            "--node-name".into(),
            self.node.name.clone().into(),
            "--zone".into(),
            self.node.zone.clone().into(),
            "--region".into(),
            self.region.clone().into(),
            "--kubeconfig".into(),
            self.kubeconfig.clone().into(),
            "--run-dir".into(),
            self.node.run_dir.clone().into(),
            "--api-server-host".into(),
            self.api_host.clone().into(),
            "--api-server-port".into(),
            self.api_port.to_string().into(),
            "--cluster-ca".into(),
            self.ca_file.clone().into(),
        ];
        for (image, binary) in &self.images {
            args.push("--image".into());
            let mut mapping = OsString::from(format!("{image}="));
            mapping.push(binary);
            args.push(mapping);
        }
        args
    }
}

/// A running node agent.
#[derive(Debug)]
pub(crate) struct NodeAgentProcess {
    launch: NodeAgentLaunch,
    child: Child,
    pid: u32,
}

impl NodeAgentProcess {
    /// Starts the agent and records it in the cluster's run directory.
    pub(crate) fn spawn(launch: NodeAgentLaunch, run_dir: &RunDir) -> Result<Self> {
        let log = &launch.node.log;
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(Error::io("opening", log))?;
        let err = out.try_clone().map_err(Error::io("duplicating", log))?;
        let (lifeline_var, lifeline_fd) = launch.lifeline.env();
        let mut command = Command::new(&launch.binary);
        command
            .args(launch.args())
            .env(lifeline_var, lifeline_fd)
            .env(
                "RUST_LOG",
                std::env::var("HARNESS_NODE_AGENT_LOG").unwrap_or_else(|_| "info".into()),
            )
            .current_dir(&launch.node.run_dir)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true);
        die_with_parent(&mut command);
        let child = command
            .spawn()
            .map_err(Error::io("starting", &launch.binary))?;
        let pid = child.id().unwrap_or_default();
        run_dir
            .record_process(&format!("node-agent {}", launch.node.name), pid)
            .map_err(Error::ControlPlane)?;
        tracing::info!(node = %launch.node.name, zone = %launch.node.zone, pid, "node agent started");
        Ok(Self { launch, child, pid })
    }

    pub(crate) fn node(&self) -> &NodeDescription {
        &self.launch.node
    }

    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    pub(crate) fn launch(&self) -> &NodeAgentLaunch {
        &self.launch
    }

    /// `Err(NodeAgentExited)` (with its log tail) if the agent has ended.
    pub(crate) fn check_running(&mut self) -> Result<()> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(self.exited(status.to_string())),
            Err(e) => Err(self.exited(format!("unknown: {e}"))),
        }
    }

    fn exited(&self, status: String) -> Error {
        Error::NodeAgentExited {
            node: self.launch.node.name.clone(),
            status,
            log: self.launch.node.log.clone(),
            log_tail: log_tail(&self.launch.node.log),
        }
    }

    /// SIGTERM, then SIGKILL after `grace`. The agent's pods keep running.
    pub(crate) async fn stop(&mut self, grace: Duration) -> Result<()> {
        if self.child.try_wait().ok().flatten().is_some() {
            return Ok(());
        }
        match kill(Pid::from_raw(self.pid as i32), Signal::SIGTERM) {
            Ok(()) | Err(nix::errno::Errno::ESRCH) => {}
            Err(e) => {
                return Err(Error::io("signalling node agent", &self.launch.node.log)(
                    e.into(),
                ));
            }
        }
        if tokio::time::timeout(grace, self.child.wait()).await.is_ok() {
            return Ok(());
        }
        tracing::warn!(node = %self.launch.node.name, ?grace, "node agent ignored SIGTERM; killing it");
        self.child
            .kill()
            .await
            .map_err(Error::io("killing node agent", &self.launch.node.log))
    }
}

/// Finds the `node-agent` binary: `$HARNESS_NODE_AGENT_BIN`, else next to the current
/// executable, else one directory up (cargo puts test executables in `deps/`).
pub fn locate_node_agent() -> Result<PathBuf> {
    locate_binary("node-agent", NODE_AGENT_ENV)
}

/// Finds one of this crate's binaries (see [`locate_node_agent`]).
pub(crate) fn locate_binary(name: &'static str, env: &'static str) -> Result<PathBuf> {
    if let Some(path) = std::env::var_os(env) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(Error::BinaryMissing {
                binary: name,
                path,
                env,
            })
        };
    }
    let exe = std::env::current_exe().map_err(Error::io("locating", "the current executable"))?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    let candidates = [Some(dir.join(name)), dir.parent().map(|up| up.join(name))];
    candidates
        .iter()
        .flatten()
        .find(|p| p.is_file())
        .cloned()
        .ok_or_else(|| Error::BinaryMissing {
            binary: name,
            path: dir.join(name),
            env,
        })
}
