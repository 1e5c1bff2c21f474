//! The crate's error type.

use std::time::Duration;

/// What can go wrong in the shared sidecar plumbing.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `--csi-address` could not be parsed or connected to.
    #[error("CSI endpoint {endpoint}")]
    Endpoint {
        /// The address as given.
        endpoint: String,
        /// Why.
        #[source]
        source: csi_proto::Error,
    },
    /// The driver did not answer Probe with ready in time.
    #[error("CSI driver at {endpoint} not ready after {waited:?}; last Probe: {last}")]
    DriverNotReady {
        /// The address.
        endpoint: String,
        /// How long we waited.
        waited: Duration,
        /// The last answer or error.
        last: String,
    },
    /// A CSI call failed.
    #[error("CSI {call}: {status}")]
    Csi {
        /// The RPC.
        call: &'static str,
        /// The driver's answer.
        status: tonic::Status,
    },
    /// No Kubernetes client configuration could be loaded.
    #[error("Kubernetes client configuration")]
    KubeConfig(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A Kubernetes API call failed.
    #[error("Kubernetes API: {what}")]
    Kube {
        /// What we were doing.
        what: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// Leader election could not run.
    #[error("leader election")]
    LeaderElection(#[source] kube_lease_manager::LeaseManagerError),
    /// Leadership was lost while leading: the process must stop, as upstream sidecars do.
    #[error("lost the leader lease {0}")]
    LeadershipLost(String),
    /// A flag value is invalid.
    #[error("invalid flag {flag}: {reason}")]
    InvalidFlag {
        /// The flag.
        flag: &'static str,
        /// Why.
        reason: String,
    },
    /// A secret reference in StorageClass parameters is invalid or cannot be resolved.
    #[error("{0}")]
    SecretReference(String),
    /// A storage quantity (`1Gi`, `500M`) could not be read as bytes.
    #[error("invalid storage quantity {text:?}: {reason}")]
    Quantity {
        /// The quantity as given.
        text: String,
        /// Why.
        reason: String,
    },
    /// A PersistentVolume has none of the access modes CSI can express.
    #[error("the PersistentVolume has no supported access mode (has {0:?})")]
    UnsupportedAccessModes(Vec<String>),
    /// The HTTP endpoint could not be served.
    #[error("HTTP endpoint {address}")]
    Http {
        /// The address.
        address: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
