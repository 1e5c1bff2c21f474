//! The snapshotter's errors. Their `Display` is what `status.error` and the Warning events
//! on a VolumeSnapshotContent say, so none of them carries secret values.

use kube_support::finalizers::FinalizerError;
use sidecar_common::{CsiCallError, ReconcileError};

/// Why creating, checking or deleting a snapshot failed (this attempt; it is retried): the
/// shared reconcile errors, with CSI failures printed after the call's name
/// (`CreateSnapshot: rpc error: …`), as this sidecar always has.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The driver refused or failed a call (or did not answer in time).
    #[error("{call}: {0}", call = .0.call)]
    Csi(CsiCallError),
    /// Any other reason: a Kubernetes API call, a secret, an unusable content or class.
    #[error(transparent)]
    Reconcile(#[from] ReconcileError),
}

impl Error {
    /// A Kubernetes error with what we were doing.
    pub fn kube(what: impl Into<String>, error: kube::Error) -> Self {
        ReconcileError::kube(what, error).into()
    }

    /// The content or its class asks for something that cannot be done.
    pub fn invalid(reason: impl Into<String>) -> Self {
        ReconcileError::Invalid(reason.into()).into()
    }

    /// Whether this is an optimistic-concurrency conflict (retried quietly, never reported).
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Reconcile(error) if error.is_conflict())
    }
}

impl From<CsiCallError> for Error {
    fn from(error: CsiCallError) -> Self {
        Error::Csi(error)
    }
}

impl From<sidecar_common::Error> for Error {
    fn from(error: sidecar_common::Error) -> Self {
        ReconcileError::from(error).into()
    }
}

impl From<FinalizerError> for Error {
    fn from(error: FinalizerError) -> Self {
        ReconcileError::from(error).into()
    }
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csi_failures_name_the_call_first() {
        let error = Error::from(CsiCallError {
            call: "CreateSnapshot",
            status: tonic::Status::invalid_argument("no such share"),
        });
        assert_eq!(
            error.to_string(),
            "CreateSnapshot: rpc error: code = InvalidArgument desc = no such share"
        );
        assert_eq!(Error::invalid("bad class").to_string(), "bad class");
        assert!(!Error::invalid("bad class").is_conflict());
    }
}
