//! The snapshotter's errors. Their `Display` is what `status.error` and the Warning events
//! on a VolumeSnapshotContent say, so none of them carries secret values.

/// Why creating, checking or deleting a snapshot failed (this attempt; it is retried).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The driver refused or failed a call; printed as upstream prints gRPC errors.
    #[error("{call}: rpc error: code = {code:?} desc = {message}", code = .status.code(), message = .status.message())]
    Csi {
        /// The RPC.
        call: &'static str,
        /// The driver's answer.
        status: tonic::Status,
    },
    /// A Kubernetes API call failed.
    #[error("{what}: {source}")]
    Kube {
        /// What we were doing.
        what: String,
        /// The client's error.
        source: kube::Error,
    },
    /// A secret could not be read.
    #[error(transparent)]
    Secret(#[from] sidecar_common::Error),
    /// The content or its class asks for something that cannot be done.
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    /// A Kubernetes error with context.
    pub fn kube(what: impl Into<String>, source: kube::Error) -> Self {
        Error::Kube {
            what: what.into(),
            source,
        }
    }

    /// A CSI call's failure (including its deadline) as this crate's error.
    pub fn csi(error: sidecar_common::Error) -> Self {
        match error {
            sidecar_common::Error::Csi { call, status } => Error::Csi { call, status },
            other => Error::Secret(other),
        }
    }

    /// Whether this is an optimistic-concurrency conflict (retried quietly, never reported).
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Kube { source: kube::Error::Api(status), .. } if status.code == 409)
    }
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
