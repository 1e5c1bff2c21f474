//! The embedded backend: the [`ControlPlane`] plus N `node-agent` processes, owned by one
//! process (a test binary, a benchmark, or the background cluster process that
//! `conformance cluster up` starts).
//!
//! [`EmbeddedCluster::start`] boots the control plane, issues each node a kubelet-style client
//! certificate, starts the node agents with the run's lifeline (so every pod ends with the
//! owner, however it ends), waits until all nodes are Ready, writes `cluster.json` (see
//! [`description`]) and serves a control socket, so other processes can attach with
//! [`EmbeddedCluster::connect`] and ask for a node agent restart.
//! [`EmbeddedCluster::stop`] stops the node agents, the pods and the control plane and
//! removes the run directory.

pub(crate) mod control;
pub mod daemon;
pub mod description;
pub(crate) mod node_agents;
mod readiness;
pub mod sockets;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Mutex;

use super::Cluster;
use super::error::{Error, Result};
use control_plane::{Binaries, ClientIdentity, ControlPlane, RunDir, run_dir};
use kube_support::error::IoContext;
use pod_runtime::{Lifeline, LifelineHolder};

pub use description::{ClusterDescription, ContainersDescription, NodeDescription};
pub use node_agents::{NODE_AGENT_ENV, locate_node_agent};
pub use readiness::is_node_ready;
pub(crate) use readiness::{wait_nodes_ready_checking, wait_usable};

use node_agents::{NodeAgentLaunch, NodeAgentProcess};

/// The prefix of a fresh run directory's name (`cluster-XXXXXX`).
const RUN_DIR_PREFIX: &str = "cluster-";

/// The directory of the nodes' run directories (kubelet's root of each) and logs, below the
/// cluster's run directory.
const NODES_DIR: &str = "nodes";

/// How long a node agent may take to stop after SIGTERM.
const AGENT_STOP_GRACE: Duration = Duration::from_secs(10);

/// Options of an [`EmbeddedCluster`].
#[derive(Debug, Clone)]
pub struct EmbeddedOptions {
    /// How many nodes (default 3).
    pub nodes: usize,
    /// The zones, assigned to the nodes in turn (default `zone-a`, `zone-b`, `zone-c`).
    pub zones: Vec<String>,
    /// The region of every node (default `RegionOne`, OpenStack's default region).
    pub region: String,
    /// The run directory; default a fresh `cluster-XXXXXX` under [`EmbeddedOptions::base_dir`].
    pub run_dir: Option<PathBuf>,
    /// Where fresh run directories are created and stale ones cleaned (default `$TMPDIR/occ`,
    /// [`run_dir::default_base`]). Every unix socket the cluster makes below its run
    /// directory must fit 107 bytes ([`sockets`]): a base (or run directory) too long for
    /// that is refused before anything starts.
    pub base_dir: PathBuf,
    /// Images mapped to host binaries (image reference, binary); other images are generic.
    pub images: Vec<(String, PathBuf)>,
    /// The `node-agent` binary; default [`locate_node_agent`].
    pub node_agent: Option<PathBuf>,
    /// The control-plane binaries; default [`Binaries::locate`].
    pub binaries: Option<Binaries>,
    /// How long the nodes may take to become Ready once their agents run (default 60 s).
    pub ready_timeout: Duration,
    /// Keep the run directory (logs) after [`EmbeddedCluster::stop`].
    pub keep_run_dir: bool,
    /// Environment variables every container of every node's pods gets before its own (see
    /// [`NodeAgentConfig::pod_env`](node_agent::NodeAgentConfig::pod_env)); each value's
    /// [`NODE_PLACEHOLDER`] becomes the node's name. The stand-in for per-machine services
    /// all nodes here share a host for, e.g. `OS_METADATA_URL` pointing each node at its own
    /// document of the fake cloud's metadata service. Default none.
    pub pod_env: Vec<(String, String)>,
}

/// In a value of [`EmbeddedOptions::pod_env`], the node's name.
pub const NODE_PLACEHOLDER: &str = "{node}";

/// Every container of the embedded cluster gets this variable (before
/// [`EmbeddedOptions::pod_env`]): all pods share the host's network, so the workspace's CSI
/// livenessprobe listens with `SO_REUSEPORT` and two replicas of a driver (or the node
/// plugins of two nodes) can serve their probes on one port instead of colliding.
pub const SHARED_NETWORK_POD_ENV: (&str, &str) = ("LIVENESSPROBE_HTTP_ENDPOINT_REUSE_PORT", "true");

impl Default for EmbeddedOptions {
    fn default() -> Self {
        Self {
            nodes: 3,
            zones: vec!["zone-a".into(), "zone-b".into(), "zone-c".into()],
            region: "RegionOne".into(),
            run_dir: None,
            base_dir: run_dir::default_base(),
            images: Vec::new(),
            node_agent: None,
            binaries: None,
            ready_timeout: Duration::from_secs(60),
            keep_run_dir: false,
            pod_env: Vec::new(),
        }
    }
}

/// Refuses a cluster without nodes, or zones that are missing or empty (both backends).
pub(crate) fn check_nodes_and_zones(nodes: usize, zones: &[String]) -> Result<()> {
    if nodes == 0 {
        return Err(Error::InvalidOption {
            option: "nodes",
            reason: "a cluster needs at least one node".into(),
        });
    }
    if zones.is_empty() || zones.iter().any(|z| z.trim().is_empty()) {
        return Err(Error::InvalidOption {
            option: "zones",
            reason: format!("need at least one zone and no empty names, got {zones:?}"),
        });
    }
    Ok(())
}

/// The node names and zones of a cluster (both backends): `node-1`… with the zones in turn.
pub(crate) fn node_layout(nodes: usize, zones: &[String]) -> Vec<(String, String)> {
    (0..nodes)
        .map(|i| (format!("node-{}", i + 1), zones[i % zones.len()].clone()))
        .collect()
}

impl EmbeddedOptions {
    fn validate(&self) -> Result<()> {
        check_nodes_and_zones(self.nodes, &self.zones)?;
        let names: Vec<String> = self
            .node_layout()
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        sockets::check(&self.planned_run_dir(), &names)
    }

    /// The run directory as it will be: the given one, or a fresh one under the base (its
    /// random part stood for by as many `X`).
    fn planned_run_dir(&self) -> PathBuf {
        match &self.run_dir {
            Some(dir) => dir.clone(),
            None => self.base_dir.join(format!(
                "{RUN_DIR_PREFIX}{}",
                "X".repeat(run_dir::RANDOM_SUFFIX_LEN)
            )),
        }
    }

    /// The node names and zones: `node-1`… with the zones in turn.
    fn node_layout(&self) -> Vec<(String, String)> {
        node_layout(self.nodes, &self.zones)
    }
}

/// How long each phase of [`EmbeddedCluster::start`] took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StartTimings {
    /// Control plane start to ready.
    pub control_plane: Duration,
    /// Node agents started to every node Ready.
    pub nodes: Duration,
    /// The whole start.
    pub total: Duration,
}

/// A running embedded cluster owned by this process (see the module docs).
pub struct EmbeddedCluster {
    root: PathBuf,
    control_plane: Option<ControlPlane>,
    agents: Arc<Mutex<NodeAgents>>,
    lifeline: Option<LifelineHolder>,
    description: ClusterDescription,
    control: control::ControlServer,
    keep_run_dir: bool,
    timings: StartTimings,
}

impl std::fmt::Debug for EmbeddedCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedCluster")
            .field("run_dir", &self.run_dir())
            .field("description", &self.description)
            .finish_non_exhaustive()
    }
}

impl EmbeddedCluster {
    /// Boots the control plane and the node agents and waits until every node is Ready.
    ///
    /// Start it from a runtime that outlives it: its processes die with the thread that
    /// started them (`PR_SET_PDEATHSIG`).
    pub async fn start(options: EmbeddedOptions) -> Result<Self> {
        options.validate()?;
        let started = Instant::now();
        let node_agent = match &options.node_agent {
            Some(path) if path.is_file() => path.clone(),
            Some(path) => {
                return Err(Error::BinaryMissing {
                    binary: "node-agent",
                    path: path.clone(),
                    env: NODE_AGENT_ENV,
                });
            }
            None => locate_node_agent()?,
        };
        let run_dir = open_run_dir(&options)?;
        let root = std::fs::canonicalize(run_dir.path())
            .map_err(Error::io("resolving", run_dir.path()))?;
        tracing::info!(run_dir = %root.display(), nodes = options.nodes, "starting the control plane");
        let mut builder = ControlPlane::builder()
            .run_dir(root.join("control-plane"))
            .keep_run_dir(options.keep_run_dir);
        if let Some(binaries) = &options.binaries {
            builder = builder.binaries(binaries.clone());
        }
        let control_plane = builder.start().await?;
        let control_plane_time = started.elapsed();
        tracing::info!(api = control_plane.api_url(), elapsed = ?control_plane_time, "control plane ready; starting node agents");

        let (lifeline, holder) = Lifeline::pair()?;
        let (api_host, api_port) = host_port(control_plane.api_url());
        let nodes = NodeSetup {
            control_plane: &control_plane,
            options: &options,
            node_agent: &node_agent,
            nodes_dir: root.join(NODES_DIR),
            lifeline: &lifeline,
            api_host: &api_host,
            api_port,
        };
        let mut agents = Vec::new();
        for (name, zone) in options.node_layout() {
            agents.push(NodeAgentProcess::spawn(
                nodes.launch(name, zone)?,
                &run_dir,
            )?);
        }
        let nodes_started = Instant::now();
        let names: Vec<String> = agents.iter().map(|a| a.node().name.clone()).collect();
        wait_nodes_ready(
            &control_plane.client(),
            &names,
            &mut agents,
            options.ready_timeout,
        )
        .await?;
        wait_usable(&control_plane.client(), &names, options.ready_timeout).await?;
        let nodes_time = nodes_started.elapsed();

        let description = ClusterDescription {
            kubeconfig: control_plane.kubeconfig().to_path_buf(),
            api_url: control_plane.api_url().into(),
            nodes: agents.iter().map(|a| a.node().clone()).collect(),
            pid: std::process::id(),
            containers: None,
        };
        let agents = Arc::new(Mutex::new(NodeAgents {
            processes: agents,
            run_dir: Some(run_dir),
        }));
        let control = control::ControlServer::start(&root, agents.clone())?;
        description.write(&root)?;
        let timings = StartTimings {
            control_plane: control_plane_time,
            nodes: nodes_time,
            total: started.elapsed(),
        };
        tracing::info!(nodes = ?names, ?timings, run_dir = %root.display(), "cluster ready");
        Ok(Self {
            root,
            control_plane: Some(control_plane),
            agents,
            lifeline: Some(holder),
            description,
            control,
            keep_run_dir: options.keep_run_dir,
            timings,
        })
    }

    /// Attaches to a cluster another process runs from `run_dir` (see [`Cluster::connect`]).
    pub async fn connect(run_dir: &Path) -> Result<Cluster> {
        Cluster::connect(run_dir).await
    }

    /// A handle the suites use (kube client, exec, logs, waits, namespaces).
    pub async fn cluster(&self) -> Result<Cluster> {
        Cluster::from_description(self.run_dir().to_path_buf(), self.description.clone()).await
    }

    /// The run directory.
    pub fn run_dir(&self) -> &Path {
        &self.root
    }

    /// What other processes read to attach.
    pub fn description(&self) -> &ClusterDescription {
        &self.description
    }

    /// The control plane.
    pub fn control_plane(&self) -> Option<&ControlPlane> {
        self.control_plane.as_ref()
    }

    /// How long the start took.
    pub fn timings(&self) -> StartTimings {
        self.timings
    }

    /// Every process of the cluster: (name, pid) of the control-plane components and the node
    /// agents (not the pods).
    pub async fn pids(&self) -> Vec<(String, u32)> {
        let mut pids: Vec<(String, u32)> = self
            .control_plane
            .iter()
            .flat_map(|cp| cp.pids())
            .map(|(name, pid)| (name.to_string(), pid))
            .collect();
        for agent in &self.agents.lock().await.processes {
            pids.push((format!("node-agent {}", agent.node().name), agent.pid()));
        }
        pids
    }

    /// Restarts one node agent: SIGTERM (its pods keep running), then the same command again;
    /// the new agent re-adopts the pods.
    pub async fn restart_node_agent(&self, node: &str) -> Result<()> {
        restart_node_agent(&self.agents, node).await
    }

    /// Checks that every node agent is still running.
    pub async fn check_running(&self) -> Result<()> {
        for agent in &mut self.agents.lock().await.processes {
            agent.check_running()?;
        }
        Ok(())
    }

    /// Stops everything: node agents, pods, control plane; removes the run directory unless
    /// asked to keep it.
    pub async fn stop(mut self) -> Result<()> {
        tracing::info!(run_dir = %self.run_dir().display(), "stopping the cluster");
        self.control.stop();
        let mut first_error = None;
        let mut agents = self.agents.lock().await;
        for agent in &mut agents.processes {
            if let Err(e) = agent.stop(AGENT_STOP_GRACE).await {
                first_error.get_or_insert(e);
            }
        }
        let run_dir = agents.run_dir.take();
        drop(agents);
        // Ends every pod: each sandbox's PID 1 sees its lifeline close.
        drop(self.lifeline.take());
        if let Some(cp) = self.control_plane.take()
            && let Err(e) = cp.shutdown().await
        {
            first_error.get_or_insert(e.into());
        }
        if let Some(dir) = run_dir {
            if self.keep_run_dir {
                let _ = std::fs::remove_file(dir.path().join(description::DESCRIPTION_FILE));
            } else if let Err(e) = remove_run_dir(dir) {
                first_error.get_or_insert(e);
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// What starting a node agent of the embedded cluster needs.
struct NodeSetup<'a> {
    control_plane: &'a ControlPlane,
    options: &'a EmbeddedOptions,
    node_agent: &'a Path,
    /// The directory of the nodes' run directories and logs.
    nodes_dir: PathBuf,
    /// Every node agent's pods end with it.
    lifeline: &'a Lifeline,
    /// The apiserver's host and port, for the node agents and their pods.
    api_host: &'a str,
    api_port: u16,
}

impl NodeSetup<'_> {
    /// Node `name`'s run directory with its kubeconfig (`system:node:<name>` in
    /// `system:nodes`) and kubelet serving certificate, and the node agent's command line.
    fn launch(&self, name: String, zone: String) -> Result<NodeAgentLaunch> {
        let (control_plane, options) = (self.control_plane, self.options);
        let node_dir = self.nodes_dir.join(&name);
        std::fs::create_dir_all(&node_dir).map_err(Error::io("creating", &node_dir))?;
        let kubeconfig = node_dir.join("kubeconfig");
        control_plane.write_kubeconfig(
            &kubeconfig,
            &ClientIdentity {
                user: format!("system:node:{name}"),
                group: Some("system:nodes".into()),
            },
        )?;
        let serving = control_plane::write_serving_pair(
            &node_dir,
            "kubelet",
            &control_plane.ca().serving_cert(
                &format!("system:node:{name}"),
                &[std::net::Ipv4Addr::LOCALHOST.to_string(), name.clone()],
            )?,
        )?;
        let shared_network = (
            SHARED_NETWORK_POD_ENV.0.to_string(),
            SHARED_NETWORK_POD_ENV.1.to_string(),
        );
        let pod_env = std::iter::once(shared_network)
            .chain(
                options
                    .pod_env
                    .iter()
                    .map(|(k, v)| (k.clone(), v.replace(NODE_PLACEHOLDER, &name))),
            )
            .collect();
        Ok(NodeAgentLaunch {
            pod_env,
            binary: self.node_agent.to_path_buf(),
            node: NodeDescription {
                log: self.nodes_dir.join(format!("{name}.log")),
                name,
                zone,
                run_dir: node_dir,
            },
            region: options.region.clone(),
            kubeconfig,
            api_host: self.api_host.to_string(),
            api_port: self.api_port,
            ca_file: control_plane.ca_file().to_path_buf(),
            images: options.images.clone(),
            lifeline: Some(self.lifeline.clone()),
            serving,
            kubelet_port: free_port()?,
            node_ip_route_to: None,
            hostname_address: None,
        })
    }
}

/// The node agents and the run directory they are recorded in (taken out when stopping).
#[derive(Debug)]
pub(crate) struct NodeAgents {
    processes: Vec<NodeAgentProcess>,
    run_dir: Option<RunDir>,
}

/// Shared by [`EmbeddedCluster::restart_node_agent`] and the control socket.
pub(crate) async fn restart_node_agent(agents: &Mutex<NodeAgents>, node: &str) -> Result<()> {
    let mut guard = agents.lock().await;
    let NodeAgents { processes, run_dir } = &mut *guard;
    let known = processes
        .iter()
        .map(|a| a.node().name.clone())
        .collect::<Vec<_>>()
        .join(", ");
    let agent = processes
        .iter_mut()
        .find(|a| a.node().name == node)
        .ok_or_else(|| Error::UnknownNode {
            node: node.into(),
            known,
        })?;
    tracing::info!(node, "restarting the node agent");
    agent.stop(AGENT_STOP_GRACE).await?;
    let launch = agent.launch().clone();
    *agent = match run_dir {
        Some(run_dir) => NodeAgentProcess::spawn(launch, run_dir)?,
        None => {
            return Err(Error::NotRunning {
                run_dir: launch.node.run_dir,
                reason: "the cluster is stopping".into(),
            });
        }
    };
    // The new agent serves the kubelet API on the same (advertised) port: back when it
    // listens again, so an exec right after the restart works.
    agent.wait_listening(AGENT_LISTEN_TIMEOUT).await
}

/// How long a restarted node agent may take to listen on its kubelet port.
const AGENT_LISTEN_TIMEOUT: Duration = Duration::from_secs(30);

/// A loopback port the kernel reports free now (a node agent's kubelet port, kept across its
/// restarts so the port the Node advertises stays valid).
fn free_port() -> Result<u16> {
    std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(Error::io(
            "finding a free port for",
            "a node agent's kubelet API",
        ))
}

fn open_run_dir(options: &EmbeddedOptions) -> Result<RunDir> {
    match &options.run_dir {
        Some(dir) => RunDir::open(dir).map_err(|e| match e {
            control_plane::Error::RunDirInUse { path, holder } => Error::InUse {
                run_dir: path,
                pid: holder,
            },
            e => e.into(),
        }),
        None => {
            for stale in run_dir::clean_stale(&options.base_dir)? {
                tracing::info!(path = %stale.path.display(), killed = ?stale.killed, "cleaned a stale run directory");
            }
            Ok(RunDir::create_in(&options.base_dir, RUN_DIR_PREFIX)?)
        }
    }
}

fn remove_run_dir(dir: RunDir) -> Result<()> {
    let path = dir.path().to_path_buf();
    dir.remove().map_err(|e| match e {
        control_plane::Error::Io { source, .. } => Error::io("removing", path)(source),
        e => e.into(),
    })
}

/// `https://127.0.0.1:6443` → (`127.0.0.1`, 6443).
pub(crate) fn host_port(url: &str) -> (String, u16) {
    let authority = url
        .split_once("://")
        .map(|(_, rest)| rest)
        .unwrap_or(url)
        .trim_end_matches('/');
    match authority.rsplit_once(':') {
        Some((host, port)) => (host.to_string(), port.parse().unwrap_or(443)),
        None => (authority.to_string(), 443),
    }
}

/// Waits until every node in `names` is registered and Ready, failing early when an agent
/// exits.
async fn wait_nodes_ready(
    client: &kube::Client,
    names: &[String],
    agents: &mut [NodeAgentProcess],
    timeout: Duration,
) -> Result<()> {
    wait_nodes_ready_checking(client, names, timeout, || {
        agents
            .iter_mut()
            .try_for_each(NodeAgentProcess::check_running)
    })
    .await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn zones_are_assigned_in_turn() {
        let options = EmbeddedOptions {
            nodes: 3,
            zones: vec!["a".into(), "b".into()],
            ..Default::default()
        };
        assert_eq!(
            options.node_layout(),
            vec![
                ("node-1".to_string(), "a".to_string()),
                ("node-2".into(), "b".into()),
                ("node-3".into(), "a".into())
            ]
        );
    }

    #[test]
    fn bad_options_are_named() {
        let none = EmbeddedOptions {
            nodes: 0,
            ..Default::default()
        };
        assert!(
            none.validate()
                .unwrap_err()
                .to_string()
                .contains("option nodes")
        );
        let empty_zone = EmbeddedOptions {
            zones: vec!["a".into(), " ".into()],
            ..Default::default()
        };
        assert!(
            empty_zone
                .validate()
                .unwrap_err()
                .to_string()
                .contains("option zones")
        );
    }

    #[test]
    fn a_base_dir_too_long_for_the_sockets_is_refused_before_it_is_created() {
        let base = std::env::temp_dir().join("b".repeat(80));
        let options = EmbeddedOptions {
            base_dir: base.clone(),
            ..Default::default()
        };
        let err = options.validate().unwrap_err();
        assert!(
            matches!(&err, Error::SocketPathTooLong { path, limit: 107, .. }
                if path.to_string_lossy().contains("/plugins_registry/")),
            "{err}"
        );
        assert!(!base.exists());
    }

    #[test]
    fn the_default_base_dir_leaves_room_for_the_sockets() {
        EmbeddedOptions::default().validate().unwrap();
    }

    #[test]
    fn api_url_splits_into_host_and_port() {
        assert_eq!(
            host_port("https://127.0.0.1:35711"),
            ("127.0.0.1".to_string(), 35711)
        );
    }
}
