//! The resizer's errors. Their `Display` is what VolumeResizeFailed events say.

/// Why expanding a volume failed (this attempt; it is retried).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The driver refused or failed a call; printed as upstream prints gRPC errors.
    #[error("rpc error: code = {code:?} desc = {message}", code = .0.code(), message = .0.message())]
    Csi(tonic::Status),
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
    /// The claim or its volume is unusable as it is.
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
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
