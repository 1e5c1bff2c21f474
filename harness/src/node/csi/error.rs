//! Why a CSI plugin could not be registered or deregistered.

use std::path::PathBuf;

/// Errors of the plugin watcher; each names the plugin socket, driver or object at fault.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The plugin is not a CSI plugin (`PluginInfo.type` is not `CSIPlugin`).
    #[error("no handler registered for plugin type {found:?} at socket {}", socket.display())]
    PluginType {
        /// The registration socket.
        socket: PathBuf,
        /// The type the plugin announced.
        found: String,
    },
    /// None of the CSI versions the plugin announced is one the agent speaks (1.x).
    #[error(
        "none of the CSI versions reported by driver {driver:?} ({versions:?}) are supported: 1.x is"
    )]
    UnsupportedVersions {
        /// The driver name.
        driver: String,
        /// The versions it announced.
        versions: Vec<String>,
    },
    /// The plugin announced an empty name.
    #[error("the plugin at socket {} reported an empty name", socket.display())]
    EmptyName {
        /// The registration socket.
        socket: PathBuf,
    },
    /// A unix socket could not be reached.
    #[error("connecting to {endpoint}")]
    Connect {
        /// The socket.
        endpoint: String,
        /// The cause.
        #[source]
        source: csi_proto::Error,
    },
    /// A gRPC call failed or did not answer in time.
    #[error("{call} on {endpoint}: {} ({:?})", status.message(), status.code())]
    Call {
        /// The RPC, e.g. `NodeGetInfo`.
        call: &'static str,
        /// The socket called.
        endpoint: String,
        /// The answer.
        status: tonic::Status,
    },
    /// NodeGetInfo returned no node id.
    #[error("driver {driver:?}: NodeGetInfo returned an empty node_id")]
    EmptyNodeId {
        /// The driver name.
        driver: String,
    },
    /// A topology segment contradicts a label the Node already has.
    #[error(
        "detected topology value collision: driver {driver:?} reported {key}={wanted:?} but the Node has {key}={existing:?}"
    )]
    TopologyCollision {
        /// The driver name.
        driver: String,
        /// The label key.
        key: String,
        /// The Node's value.
        existing: String,
        /// The driver's value.
        wanted: String,
    },
    /// The Node's `csi.volume.kubernetes.io/nodeid` annotation is not a JSON string map.
    #[error("the Node's annotation {key} is not a JSON map of driver to node id: {reason}")]
    BadNodeIdAnnotation {
        /// The annotation key.
        key: &'static str,
        /// The parse error.
        reason: String,
    },
    /// An API request failed.
    #[error("{action}")]
    Api {
        /// What was being done, e.g. `updating CSINode "node-a"`.
        action: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The plugin directories could not be created or read.
    #[error("{action} {}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// The plugin watcher's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn api(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let action = action.into();
        move |source| Error::Api { action, source }
    }

    pub(crate) fn is_conflict(&self) -> bool {
        matches!(self, Error::Api { source: kube::Error::Api(status), .. } if status.code == 409)
    }
}
