//! A node agent (the simulated kubelet) in-process on a control plane, as the harness's
//! node tests run it, and what tests read back from a node: its containers' processes, its
//! volumes in use and its CSINode's drivers.

use std::path::{Path, PathBuf};
use std::time::Duration;

use control_plane::{ClientIdentity, ControlPlane};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::CSINode;
use kube::Client;
use kube::api::Api;
use node_agent::{NodeAgent, NodeAgentConfig, Timings};
use pod_runtime::host_mounts::ScratchDir;
use pod_runtime::{Lifeline, Runtime, RuntimeConfig};

use crate::task::InProcess;
use crate::wait::wait_for;

/// What a node agent test starts from: a control plane of its own and a scratch directory
/// for the node's kubeconfig, run directory and logs. Everything mounted below the
/// directory (the agent's shared `pods` and `plugins` mount points, volumes left published)
/// is unmounted when the bed is dropped, also when the test fails.
#[derive(Debug)]
pub struct NodeBed {
    // Dropped first: unmounted before the control plane goes.
    dir: ScratchDir,
    /// The control plane.
    pub cp: ControlPlane,
}

impl NodeBed {
    /// Sends the logs of `harness` to the test's output and boots the control plane.
    pub async fn start() -> NodeBed {
        crate::init_tracing("cluster=info,node_agent=info,control_plane=info,pod_runtime=info");
        let cp = ControlPlane::builder()
            .start()
            .await
            .unwrap_or_else(|e| panic!("starting the control plane: {e}"));
        let dir = ScratchDir::new().unwrap_or_else(|e| panic!("a scratch directory: {e}"));
        NodeBed { dir, cp }
    }

    /// A client of the control plane as the cluster admin.
    pub fn client(&self) -> Client {
        self.cp.client()
    }

    /// The scratch directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// [`agent_config_with_helper`] for `node` in the scratch directory.
    pub fn agent_config(&self, node: &str, sandbox_helper: impl Into<PathBuf>) -> NodeAgentConfig {
        agent_config_with_helper(&self.cp, self.dir(), node, sandbox_helper)
    }

    /// Stops the control plane; fails the test unless it stops cleanly.
    pub async fn shutdown(self) {
        self.cp
            .shutdown()
            .await
            .unwrap_or_else(|e| panic!("shutting the control plane down: {e}"));
    }
}

/// A node agent's configuration for `node` on `cp`: a kubeconfig with the node's identity
/// (`system:node:<node>` in `system:nodes`) written to `<dir>/kubeconfig`, the run directory
/// `<dir>/node`, the workspace's `pod-sandbox` helper, this process as lifeline (the pods
/// die with the test) and short timings (node status every 2 s, retries every 500 ms).
pub fn agent_config(cp: &ControlPlane, dir: &Path, node: &str) -> NodeAgentConfig {
    agent_config_with_helper(cp, dir, node, pod_sandbox())
}

/// [`agent_config`] with the `pod-sandbox` helper at `sandbox_helper` (e.g. one a test built
/// or found itself).
pub fn agent_config_with_helper(
    cp: &ControlPlane,
    dir: &Path,
    node: &str,
    sandbox_helper: impl Into<PathBuf>,
) -> NodeAgentConfig {
    let kubeconfig = dir.join("kubeconfig");
    write_node_kubeconfig(cp, &kubeconfig, node);
    let mut config = NodeAgentConfig::new(
        node,
        kubeconfig,
        dir.join("node"),
        cp.ports().apiserver,
        cp.ca_file(),
    );
    config.sandbox_helper = Some(sandbox_helper.into());
    config.lifeline = Some(Lifeline::this_process().expect("a lifeline to this process"));
    config.timings = Timings {
        node_status_interval: Duration::from_secs(2),
        retry_interval: Duration::from_millis(500),
        ..Timings::default()
    };
    config
}

/// Writes to `path` a kubeconfig for `cp` with the identity of the kubelet of `node`
/// (`system:node:<node>` in `system:nodes`, as the Node authorizer expects).
pub fn write_node_kubeconfig(cp: &ControlPlane, path: &Path, node: &str) {
    cp.write_kubeconfig(
        path,
        &ClientIdentity {
            user: format!("system:node:{node}"),
            group: Some("system:nodes".into()),
        },
    )
    .unwrap_or_else(|e| panic!("writing the kubeconfig of {node}: {e}"));
}

/// The harness's `pod-sandbox` helper binary, built if missing or stale.
pub fn pod_sandbox() -> PathBuf {
    crate::drivers::binary("pod-runtime", "pod-sandbox")
}

/// The host pid of the latest container of the pod `pod_uid`, read from the node's runtime
/// directory `runtime_dir` (as the agent's runtime records it) with the `pod-sandbox` helper
/// at `sandbox_helper`: e.g. to check that a container outlives an agent restart.
pub fn last_container_pid(runtime_dir: &Path, sandbox_helper: &Path, pod_uid: &str) -> u32 {
    let runtime = Runtime::new(RuntimeConfig {
        helper: sandbox_helper.to_path_buf(),
        ..RuntimeConfig::new(runtime_dir)
    })
    .unwrap_or_else(|e| panic!("opening the runtime in {}: {e}", runtime_dir.display()));
    let sandbox = runtime
        .sandbox(pod_uid)
        .unwrap_or_else(|e| panic!("reading the sandbox of pod {pod_uid}: {e}"))
        .unwrap_or_else(|| panic!("no sandbox for pod {pod_uid}"));
    let containers = sandbox
        .containers()
        .unwrap_or_else(|e| panic!("listing the containers of pod {pod_uid}: {e}"));
    let last = containers
        .last()
        .unwrap_or_else(|| panic!("pod {pod_uid} has no container"));
    let pid = last.process().pid;
    u32::try_from(pid).unwrap_or_else(|_| panic!("pod {pod_uid}: invalid pid {pid}"))
}

/// The volumes the Node `node` lists in `status.volumesInUse`.
pub async fn volumes_in_use(client: &Client, node: &str) -> Vec<String> {
    read_volumes_in_use(&Api::all(client.clone()), node)
        .await
        .unwrap_or_else(|e| panic!("reading the Node {node}: {e}"))
}

/// Waits until the Node `node` lists exactly `wanted` in `status.volumesInUse` (in that
/// order; empty: none).
pub async fn wait_volumes_in_use(
    client: &Client,
    node: &str,
    wanted: &[String],
    timeout: Duration,
) {
    let nodes: Api<Node> = Api::all(client.clone());
    let what = format!("volumesInUse of {node} to be {wanted:?}");
    wait_for(&what, timeout, || async {
        let in_use = read_volumes_in_use(&nodes, node).await?;
        if in_use == wanted {
            Ok(Some(()))
        } else {
            Err(format!("{in_use:?}"))
        }
    })
    .await
}

async fn read_volumes_in_use(nodes: &Api<Node>, node: &str) -> Result<Vec<String>, String> {
    let node = nodes.get(node).await.map_err(|e| e.to_string())?;
    Ok(node
        .status
        .and_then(|s| s.volumes_in_use)
        .unwrap_or_default())
}

/// Waits until the CSINode of `node` lists every driver in `drivers` (registered through
/// the plugin registration socket) and returns it ([`kube_support::wait::wait_csi_drivers`]).
pub async fn wait_csi_drivers(
    client: &Client,
    node: &str,
    drivers: &[&str],
    timeout: Duration,
) -> CSINode {
    kube_support::wait::wait_csi_drivers(client, &[node.to_string()], drivers, timeout)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .remove(0)
}

/// A node agent running in-process until [`RunningAgent::stop`].
#[derive(Debug)]
pub struct RunningAgent(InProcess<node_agent::Result<()>>);

impl RunningAgent {
    /// Starts the agent with `config`.
    pub fn start(config: NodeAgentConfig) -> RunningAgent {
        RunningAgent(InProcess::spawn(move |stopped| {
            NodeAgent::run(config, stopped)
        }))
    }

    /// Stops the agent; fails the test unless it stops cleanly.
    pub async fn stop(self) {
        if let Err(e) = self.0.stop().await {
            panic!("the node agent did not stop cleanly: {e}");
        }
    }
}
