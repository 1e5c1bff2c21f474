//! The errors of the cluster module.

use std::path::PathBuf;
use std::time::Duration;

use kube_support::error::IoContext;
use kube_support::wait::WaitError;

/// A [`Result`](std::result::Result) with the cluster module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong starting, attaching to or using a cluster.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The control plane failed to start or stop.
    #[error("control plane: {0}")]
    ControlPlane(#[from] control_plane::Error),

    /// Exec into a container or reading its logs failed on the node.
    #[error("node: {0}")]
    Node(#[from] node_agent::Error),

    /// The container runtime failed (lifeline, exec, logs).
    #[error("runtime: {0}")]
    Runtime(#[from] pod_runtime::Error),

    /// The options of a cluster are invalid.
    #[error("invalid cluster option {option}: {reason}")]
    InvalidOption {
        /// The option, e.g. `zones`.
        option: &'static str,
        /// Why it is refused.
        reason: String,
    },

    /// A unix socket of the cluster would have a longer path than a socket address holds
    /// (see [`sockets`](super::embedded::sockets)); checked before anything starts.
    #[error(
        "the unix socket path {} would be {length} bytes, over the limit of {limit}: choose a shorter base or run directory (room is kept for CSI driver names of up to {driver_name_room} bytes)",
        path.display()
    )]
    SocketPathTooLong {
        /// The longest socket path the cluster would have.
        path: PathBuf,
        /// Its length in bytes.
        length: usize,
        /// The longest a socket path can be.
        limit: usize,
        /// The room kept in `path` for a CSI driver's name, in bytes (driver names are
        /// only known once drivers are deployed).
        driver_name_room: usize,
    },

    /// A workspace binary (`conformance`) could not be located or built.
    #[error("{0}")]
    Workspace(#[from] workspace_binaries::Error),

    /// A helper binary (`node-agent`, `conformance`) is not where it is looked for.
    #[error(
        "the {binary} binary is missing at {}: build it with `cargo build -p node-agent -p pod-runtime -p suites --bins` or set ${env} to its path",
        path.display()
    )]
    BinaryMissing {
        /// The binary's name.
        binary: &'static str,
        /// Where it was looked for.
        path: PathBuf,
        /// The environment variable that names it.
        env: &'static str,
    },

    /// A file-system or process operation failed.
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What was being done, e.g. `reading`.
        action: &'static str,
        /// The file or directory (or process) concerned.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },

    /// A request to the apiserver failed.
    #[error("{action}: {source}")]
    Kube {
        /// What was being done, e.g. `creating namespace x`.
        action: String,
        /// The cause.
        source: kube::Error,
    },

    /// A node agent process ended while the cluster needed it.
    #[error("node agent {node} exited ({status}); log {}:\n{log_tail}", log.display())]
    NodeAgentExited {
        /// The node.
        node: String,
        /// How it ended.
        status: String,
        /// Its log file.
        log: PathBuf,
        /// The last lines of its log.
        log_tail: String,
    },

    /// The nodes did not all become Ready in time.
    #[error("{want} nodes not Ready after {timeout:?}; last seen: {last_seen}")]
    NodesNotReady {
        /// How many Ready nodes were expected.
        want: usize,
        /// How long was waited.
        timeout: Duration,
        /// The nodes and their Ready condition as last seen.
        last_seen: String,
    },

    /// No node of that name is part of the cluster.
    #[error("no node {node} in this cluster (nodes: {known})")]
    UnknownNode {
        /// The requested node.
        node: String,
        /// The cluster's nodes.
        known: String,
    },

    /// The pod is not (yet) bound to a node, so it cannot be exec'ed into or its logs read.
    #[error("pod {namespace}/{pod} is not scheduled to a node of this cluster")]
    PodNotOnNode {
        /// The pod's namespace.
        namespace: String,
        /// The pod.
        pod: String,
    },

    /// No live cluster is served from the run directory.
    #[error("no cluster running in {}: {reason}", run_dir.display())]
    NotRunning {
        /// The run directory.
        run_dir: PathBuf,
        /// Why it is not usable.
        reason: String,
    },

    /// The run directory belongs to another live cluster.
    #[error("run directory {} is in use by the cluster process {pid}", run_dir.display())]
    InUse {
        /// The run directory.
        run_dir: PathBuf,
        /// The pid holding it.
        pid: String,
    },

    /// The cluster description file (`cluster.json`) cannot be read or written.
    #[error("cluster description {}: {source}", path.display())]
    Description {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: serde_json::Error,
    },

    /// The cluster process refused or failed a control request.
    #[error("control request {request:?} failed: {message}")]
    Control {
        /// The request.
        request: String,
        /// The cluster process's answer or the transport error.
        message: String,
    },

    /// Starting the cluster in the background failed.
    #[error("the cluster process failed to start ({status}); log {}:\n{log_tail}", log.display())]
    DaemonFailed {
        /// How the process ended.
        status: String,
        /// Its log.
        log: PathBuf,
        /// The last lines of its log.
        log_tail: String,
    },

    /// A wait timed out.
    #[error(transparent)]
    Wait(#[from] Box<WaitError>),

    /// The container engine failed a request of the containers backend.
    #[error("docker: {action}: {reason}")]
    Docker {
        /// What was asked, e.g. `creating network occ-ab12cd`.
        action: String,
        /// The engine's answer.
        reason: String,
    },

    /// The containers backend's image could not be built or found.
    #[error("the container-node image: {0}")]
    NodeImage(String),

    /// A step of the kind backend's bootstrap (kubeadm init, join, the pod network) failed.
    #[error("kind node {node}: {step} failed: {reason} (run directory {})", run_dir.display())]
    Bootstrap {
        /// The node.
        node: String,
        /// The step, e.g. `kubeadm init`.
        step: String,
        /// What failed, with the step's last output.
        reason: String,
        /// The cluster's run directory (kubeadm's configuration and logs).
        run_dir: PathBuf,
    },

    /// The operation needs a backend this cluster does not have.
    #[error("{operation} needs {needs}")]
    Unsupported {
        /// The operation, e.g. `pause_node`.
        operation: &'static str,
        /// What it needs, e.g. `the containers backend`.
        needs: &'static str,
    },

    /// Leftovers remained after a test namespace was cleaned up.
    #[error("test namespace {namespace} left things behind: {leftovers}")]
    Leftovers {
        /// The namespace.
        namespace: String,
        /// What remained.
        leftovers: String,
    },
}

impl From<WaitError> for Error {
    fn from(e: WaitError) -> Self {
        Error::Wait(Box::new(e))
    }
}

impl IoContext for Error {
    fn from_io(action: &'static str, path: PathBuf, source: std::io::Error) -> Self {
        Error::Io {
            action,
            path,
            source,
        }
    }
}

impl Error {
    pub(crate) fn docker<E: std::fmt::Display>(
        action: impl Into<String>,
    ) -> impl FnOnce(E) -> Self {
        let action = action.into();
        move |e| Error::Docker {
            action,
            reason: e.to_string(),
        }
    }

    pub(crate) fn kube(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let action = action.into();
        move |source| Error::Kube { action, source }
    }
}
