//! The `Cluster` abstraction the suites use, and its embedded backend.
//!
//! A [`Cluster`] is a handle on a running cluster: an admin kube client, the admin
//! kubeconfig (for `kubectl`), the node names, exec into a pod's container and its logs, a
//! node-agent restart, and fresh [`TestNamespace`]s that isolate tests sharing the cluster.
//! The waits on cluster state ([`kube_support::wait`]) report what they last saw.
//!
//! # Backends
//!
//! [`embedded`] (the default): a real control plane plus simulated nodes, owned by one
//! process ([`EmbeddedCluster`]) and attachable from others by its run directory
//! ([`EmbeddedCluster::connect`]). [`containers`]: the same control plane and node agents,
//! each in a container of its own on a private docker network ([`ContainerCluster`]), so
//! nodes have their own addresses and can be powered off, frozen or cut off
//! ([`Cluster::node_action`]). [`kind`]: real kubelets and containerd in node containers,
//! bootstrapped with kubeadm as kind does ([`KindCluster`]). Any other cluster is reached through its kubeconfig
//! ([`Cluster::from_kubeconfig`]): exec and logs then go through the apiserver.
//!
//! # One cluster per test run
//!
//! Booting costs seconds, so the tests of one run share a cluster and isolate themselves by
//! namespace. [`Cluster::shared`] gives every test of the run the same cluster:
//!
//! - under `cargo nextest`, the setup script `ci/cluster-setup.sh` (see
//!   `.config/nextest.toml`) runs `conformance cluster up --until-pid <nextest>`, which starts
//!   a background cluster process living as long as the nextest run, and exports its run
//!   directory as `HARNESS_CLUSTER_DIR` to the tests; [`Cluster::shared`] attaches to it;
//! - without that variable (plain `cargo test`, or a nextest run with the setup script
//!   disabled) the first call in a test process starts such a cluster process for the test
//!   process (it stops when the test process exits); later calls in the same process attach
//!   to it.
//!
//! By hand: `conformance cluster up` prints `HARNESS_CLUSTER_DIR=<dir>`;
//! `kubectl --kubeconfig <dir>/control-plane/admin.kubeconfig get pods -A` works against it;
//! `conformance cluster down --run-dir <dir>` stops it.
//!
//! ```no_run
//! # async fn demo() -> cluster::Result<()> {
//! use std::time::Duration;
//! use cluster::Cluster;
//! use k8s_openapi::api::core::v1::Pod;
//! use kube_support::wait;
//! use kube::runtime::conditions::is_pod_running;
//!
//! let cluster = Cluster::shared().await?;
//! let ns = cluster.namespace("demo").await?;
//! let pods: kube::Api<Pod> = ns.api();
//! // … create a pod "web" …
//! wait::wait_for(&pods, "web", is_pod_running(), Duration::from_secs(30)).await?;
//! let out = cluster.exec(ns.name(), "web", "app", &["cat", "/etc/hostname"]).await?;
//! assert_eq!(out.stdout, b"web\n");
//! ns.cleanup().await?; // deletes the namespace, checks nothing was left behind
//! # Ok(()) }
//! ```

pub mod containers;
pub mod embedded;
mod error;
pub mod kind;
mod namespace;
mod remote;
mod shared;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use containers::{ContainerCluster, ContainerNetwork, ContainerOptions, NodeAction};
pub use embedded::{ClusterDescription, EmbeddedCluster, EmbeddedOptions, NODE_PLACEHOLDER};
pub use error::{Error, Result};
pub use kind::{KindCluster, KindOptions};
pub use namespace::{TEST_NAMESPACE_LABEL, TestNamespace};
pub use shared::CLUSTER_DIR_ENV;

pub use pod_runtime::ExecOutput;

/// Which backend a harness-started cluster runs on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ClusterBackend {
    /// Control plane and node agents as processes of this host ([`EmbeddedCluster`]).
    #[default]
    Embedded,
    /// Each in a container of its own on a private network ([`ContainerCluster`]).
    Containers,
}

impl ClusterBackend {
    /// The backend's name on command lines (`embedded`, `containers`).
    pub fn name(self) -> &'static str {
        match self {
            ClusterBackend::Embedded => "embedded",
            ClusterBackend::Containers => "containers",
        }
    }
}

impl std::fmt::Display for ClusterBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for ClusterBackend {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<Self, String> {
        match text {
            "embedded" => Ok(ClusterBackend::Embedded),
            "containers" => Ok(ClusterBackend::Containers),
            other => Err(format!("unknown backend {other:?}: embedded or containers")),
        }
    }
}

/// A running cluster, as the suites use it. Cheap to clone.
///
/// Its kube client belongs to the tokio runtime it was created in: create one `Cluster`
/// per test (attaching is cheap) rather than sharing one across runtimes.
#[derive(Clone)]
pub struct Cluster {
    inner: Arc<Inner>,
}

struct Inner {
    client: kube::Client,
    /// For exec (see [`control_plane::streaming_client_from_kubeconfig`]).
    streaming: kube::Client,
    backend: Backend,
    description: ClusterDescription,
}

/// How exec, logs and node agents are reached.
enum Backend {
    /// Through the embedded cluster's run directory.
    Embedded {
        /// The run directory.
        run_dir: PathBuf,
    },
    /// Through the apiserver only ([`Cluster::from_kubeconfig`]).
    Remote,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("run_dir", &self.run_dir())
            .field("api_url", &self.inner.description.api_url)
            .field("nodes", &self.node_names())
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// Attaches to the embedded cluster served from `run_dir` by another process (or this
    /// one).
    pub async fn connect(run_dir: &Path) -> Result<Self> {
        let description = ClusterDescription::read(run_dir)?;
        if embedded::daemon::owner(run_dir)?.is_none() {
            return Err(Error::NotRunning {
                run_dir: run_dir.to_path_buf(),
                reason: format!("its cluster process ({}) is gone", description.pid),
            });
        }
        Self::from_description(run_dir.to_path_buf(), description).await
    }

    pub(crate) async fn from_description(
        run_dir: PathBuf,
        description: ClusterDescription,
    ) -> Result<Self> {
        let client = control_plane::client_from_kubeconfig(&description.kubeconfig).await?;
        Self::with_backend(client, Backend::Embedded { run_dir }, description).await
    }

    async fn with_backend(
        client: kube::Client,
        backend: Backend,
        description: ClusterDescription,
    ) -> Result<Self> {
        let streaming =
            control_plane::streaming_client_from_kubeconfig(&description.kubeconfig).await?;
        Ok(Self {
            inner: Arc::new(Inner {
                client,
                streaming,
                backend,
                description,
            }),
        })
    }

    /// A kube client with cluster-admin rights.
    pub fn client(&self) -> kube::Client {
        self.inner.client.clone()
    }

    /// The admin kubeconfig (`kubectl --kubeconfig <this>`).
    pub fn kubeconfig(&self) -> &Path {
        &self.inner.description.kubeconfig
    }

    /// The cluster's run directory (logs of every component and node agent are under it);
    /// empty for a cluster reached through a kubeconfig only.
    pub fn run_dir(&self) -> &Path {
        match &self.inner.backend {
            Backend::Embedded { run_dir } => run_dir,
            Backend::Remote => Path::new(""),
        }
    }

    /// The node names, in creation order (`node-1`, …).
    pub fn node_names(&self) -> Vec<String> {
        self.inner.description.node_names()
    }

    /// The description of the cluster (nodes, zones, node run directories and logs).
    pub fn description(&self) -> &ClusterDescription {
        &self.inner.description
    }

    /// Runs `argv` in a running container of a pod as `kubectl exec` does: through the
    /// apiserver (`pods/exec`, WebSocket) and the node's kubelet API, on any cluster.
    /// Returns its exit status and output.
    pub async fn exec(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        argv: &[&str],
    ) -> Result<ExecOutput> {
        self.remote_exec(namespace, pod, container, argv).await
    }

    /// A container's log (`previous`: the log of its previous instance, after a restart),
    /// through the apiserver (`pods/log`) and the node's kubelet API, as `kubectl logs`.
    pub async fn logs(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        previous: bool,
    ) -> Result<String> {
        self.remote_logs(namespace, pod, container, previous).await
    }

    /// Whether the cluster's nodes are containers of the containers backend (and can be
    /// acted on with [`Cluster::node_action`]).
    pub fn has_node_machines(&self) -> bool {
        self.inner.description.containers.is_some()
    }

    /// Powers off, powers on, freezes, thaws, cuts off or reconnects the machine of `node`:
    /// only on the containers backend, whose nodes are containers of their own.
    pub async fn node_action(&self, node: &str, action: NodeAction) -> Result<()> {
        containers::node_action(&self.inner.description, node, action).await
    }

    /// For the containers backend, the pid (on this host) of each running node container's
    /// first process, by node: `/proc/<pid>/mountinfo` lists the node's mounts. Empty for the
    /// other backends, whose mounts are this host's.
    pub async fn node_mount_pids(&self) -> Result<std::collections::BTreeMap<String, u32>> {
        containers::node_mount_namespaces(&self.inner.description).await
    }

    /// The mount points at or below `dir` wherever this cluster's nodes mount: this host's
    /// mount namespace and, for the containers backend, every running node container's.
    pub async fn mount_points_under(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        let pids: Vec<u32> = self.node_mount_pids().await?.into_values().collect();
        Ok(pod_runtime::host_mounts::mount_points_under_in(dir, &pids)?)
    }

    /// Restarts the agent of `node`: its pods keep running and the new agent re-adopts them
    /// (the embedded backend; a container node's agent is its container's process).
    pub async fn restart_node_agent(&self, node: &str) -> Result<()> {
        self.inner.description.node(node)?;
        if self.has_node_machines() {
            return Err(Error::Unsupported {
                operation: "restarting a node agent alone",
                needs: "the embedded backend (a container node's agent is its container's process: power it off and on instead)",
            });
        }
        match &self.inner.backend {
            Backend::Embedded { run_dir } => {
                embedded::control::request_restart(run_dir, node).await
            }
            Backend::Remote => Err(Error::InvalidOption {
                option: "restart_node_agent",
                reason: "the cluster was not started by the harness: it has no node agents".into(),
            }),
        }
    }

    /// A fresh namespace `<prefix>-<random>` for one test (see [`TestNamespace`]).
    pub async fn namespace(&self, prefix: &str) -> Result<TestNamespace> {
        TestNamespace::create(self, prefix).await
    }
}
