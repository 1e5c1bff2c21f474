//! The node agents of an embedded cluster: one `node-agent` process per node, started with
//! its own client certificate (`system:node:<name>` in `system:nodes`, as kubelet), the run's
//! lifeline, its output in `nodes/<node>.log`, and `PR_SET_PDEATHSIG` so it dies with the
//! cluster process. Stopping one (SIGTERM) leaves its pods running for the next agent to
//! re-adopt; the pods end with the lifeline.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kube_support::error::IoContext;
use tokio::process::Command;

use super::super::error::{Error, Result};
use super::description::NodeDescription;
use control_plane::RunDir;
use control_plane::process::{LoggedChild, log_tail};
use pod_runtime::Lifeline;

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
    /// The run's lifeline (the embedded backend); `None` for a node in a container, whose
    /// pods end with the container.
    pub(crate) lifeline: Option<Lifeline>,
    /// The kubelet API's serving certificate and key (from the cluster CA).
    pub(crate) serving: control_plane::CertFiles,
    /// The kubelet API's port, the same across restarts.
    pub(crate) kubelet_port: u16,
    /// The node's `--pod-env` variables (placeholders already replaced).
    pub(crate) pod_env: Vec<(String, String)>,
    /// `--node-ip-route-to` (a node in a container learns its address); `None`: loopback.
    pub(crate) node_ip_route_to: Option<std::net::IpAddr>,
    /// `--hostname-address`; `None`: the node's name.
    pub(crate) hostname_address: Option<String>,
}

impl NodeAgentLaunch {
    /// The agent's command-line arguments (without the binary).
    pub(crate) fn args(&self) -> Vec<OsString> {
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
            "--tls-cert-file".into(),
            self.serving.cert.clone().into(),
            "--tls-private-key-file".into(),
            self.serving.key.clone().into(),
            "--kubelet-port".into(),
            self.kubelet_port.to_string().into(),
        ];
        for (image, binary) in &self.images {
            args.push("--image".into());
            let mut mapping = OsString::from(format!("{image}="));
            mapping.push(binary);
            args.push(mapping);
        }
        for (name, value) in &self.pod_env {
            args.push("--pod-env".into());
            args.push(format!("{name}={value}").into());
        }
        if let Some(peer) = self.node_ip_route_to {
            args.push("--node-ip-route-to".into());
            args.push(peer.to_string().into());
        }
        if let Some(hostname) = &self.hostname_address {
            args.push("--hostname-address".into());
            args.push(hostname.into());
        }
        args
    }
}

/// A running node agent.
#[derive(Debug)]
pub(crate) struct NodeAgentProcess {
    launch: NodeAgentLaunch,
    process: LoggedChild,
}

impl NodeAgentProcess {
    /// Starts the agent and records it in the cluster's run directory.
    pub(crate) fn spawn(launch: NodeAgentLaunch, run_dir: &RunDir) -> Result<Self> {
        let mut command = Command::new(&launch.binary);
        if let Some(lifeline) = &launch.lifeline {
            let (lifeline_var, lifeline_fd) = lifeline.env();
            command.env(lifeline_var, lifeline_fd);
        }
        command
            .args(launch.args())
            .env(
                "RUST_LOG",
                std::env::var("HARNESS_NODE_AGENT_LOG").unwrap_or_else(|_| "info".into()),
            )
            .current_dir(&launch.node.run_dir);
        let process = LoggedChild::spawn(
            format!("node-agent {}", launch.node.name),
            command,
            launch.node.log.clone(),
            run_dir,
            Error::io("starting", &launch.binary),
        )?;
        tracing::info!(node = %launch.node.name, zone = %launch.node.zone, pid = process.pid(), "node agent started");
        Ok(Self { launch, process })
    }

    pub(crate) fn node(&self) -> &NodeDescription {
        &self.launch.node
    }

    pub(crate) fn pid(&self) -> u32 {
        self.process.pid()
    }

    pub(crate) fn launch(&self) -> &NodeAgentLaunch {
        &self.launch
    }

    /// `Err(NodeAgentExited)` (with its log tail) if the agent has ended.
    pub(crate) fn check_running(&mut self) -> Result<()> {
        match self.process.exit_status() {
            None => Ok(()),
            Some(status) => Err(Error::NodeAgentExited {
                node: self.launch.node.name.clone(),
                status,
                log: self.launch.node.log.clone(),
                log_tail: log_tail(&self.launch.node.log),
            }),
        }
    }

    /// Waits until the agent accepts connections on its kubelet port (failing if it exits).
    pub(crate) async fn wait_listening(&mut self, timeout: Duration) -> Result<()> {
        let address = (std::net::Ipv4Addr::LOCALHOST, self.launch.kubelet_port);
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            self.check_running()?;
            match tokio::net::TcpStream::connect(address).await {
                Ok(_) => return Ok(()),
                Err(e) if tokio::time::Instant::now() >= deadline => {
                    return Err(Error::io(
                        "waiting for the kubelet API of node agent",
                        self.launch.node.name.clone(),
                    )(e));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    /// SIGTERM, then SIGKILL after `grace`. The agent's pods keep running.
    pub(crate) async fn stop(&mut self, grace: Duration) -> Result<()> {
        let log = self.launch.node.log.clone();
        self.process
            .stop(grace, |e| Error::io("signalling node agent", log)(e.into()))
            .await
    }
}

/// Finds the `node-agent` binary: `$HARNESS_NODE_AGENT_BIN`, else next to the current
/// executable, else one directory up (cargo puts test executables in `deps/`), else built by
/// [`workspace_binaries`] with its `pod-sandbox` helper: both belong to other packages
/// (`node-agent`, `pod-runtime`), which `cargo nextest run -p cluster` does not build.
pub fn locate_node_agent() -> Result<PathBuf> {
    match locate_binary("node-agent", NODE_AGENT_ENV) {
        Ok(path) => Ok(path),
        Err(missing) if std::env::var_os(NODE_AGENT_ENV).is_some() => Err(missing),
        Err(missing) => {
            let built = workspace_binaries::binaries(&[
                ("node-agent", "node-agent"),
                ("pod-runtime", "pod-sandbox"),
            ])?;
            built.into_iter().next().ok_or(missing)
        }
    }
}

/// Finds a workspace binary by `name` (see [`locate_node_agent`]).
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
