//! The crate's errors: [`Error`] for the skeleton (start-up, flags, secrets, quantities),
//! [`CsiCallError`] for one CSI call, and [`ReconcileError`], the error shape every
//! controller sidecar's reconcile returns.

use std::time::Duration;

use kube_support::finalizers::FinalizerError;
use kube_support::kube_client::ClientError;
use kube_support::leader::LeaderError;
use kube_support::quantity::QuantityError;

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
    /// No Kubernetes client could be built.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// A Kubernetes API call failed.
    #[error("Kubernetes API: {what}")]
    Kube {
        /// What we were doing.
        what: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// Leader election could not run, or leadership was lost while leading (the process
    /// must stop, as upstream sidecars do).
    #[error(transparent)]
    Leader(#[from] LeaderError),
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
    #[error(transparent)]
    Quantity(#[from] QuantityError),
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

impl From<CsiCallError> for Error {
    fn from(error: CsiCallError) -> Self {
        Error::Csi {
            call: error.call,
            status: error.status,
        }
    }
}

/// A CSI call that failed, or did not answer within `--timeout` (then its status is
/// DeadlineExceeded). Printed as upstream prints gRPC errors.
#[derive(Debug, thiserror::Error)]
#[error("rpc error: code = {code:?} desc = {message}", code = .status.code(), message = .status.message())]
pub struct CsiCallError {
    /// The RPC, e.g. `CreateVolume`.
    pub call: &'static str,
    /// The driver's answer.
    pub status: tonic::Status,
}

/// Why one reconcile of a controller sidecar failed (this attempt; it is retried with
/// back-off). The `Display` is what the sidecars write into events and status fields
/// (`attachError`, ProvisioningFailed, …): one line that includes its cause, as upstream
/// prints errors there, and never a secret value.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The driver refused or failed a call.
    #[error(transparent)]
    Csi(#[from] CsiCallError),
    /// A Kubernetes API call failed.
    #[error("{what}: {error}")]
    Kube {
        /// What we were doing.
        what: String,
        /// The client's error (printed in the message, so not a `source`).
        error: kube::Error,
    },
    /// A secret reference, quantity or access mode of the object is unusable, or a Secret
    /// could not be read.
    #[error(transparent)]
    Common(#[from] Error),
    /// The object (or what it refers to) asks for something that cannot be done.
    #[error("{0}")]
    Invalid(String),
    /// Something the object depends on is not ready yet (a snapshot, a node's topology).
    #[error("{0}")]
    NotReady(String),
}

impl ReconcileError {
    /// A Kubernetes error with what we were doing.
    pub fn kube(what: impl Into<String>, error: kube::Error) -> Self {
        ReconcileError::Kube {
            what: what.into(),
            error,
        }
    }

    /// Whether this is an optimistic-concurrency conflict (a stale view: retried, and not
    /// worth reporting).
    pub fn is_conflict(&self) -> bool {
        matches!(self, ReconcileError::Kube { error: kube::Error::Api(status), .. } if status.code == 409)
    }
}

impl From<FinalizerError> for ReconcileError {
    fn from(error: FinalizerError) -> Self {
        ReconcileError::Kube {
            what: error.what,
            error: error.source,
        }
    }
}

impl From<QuantityError> for ReconcileError {
    fn from(error: QuantityError) -> Self {
        ReconcileError::Common(Error::Quantity(error))
    }
}
