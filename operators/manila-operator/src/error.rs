//! The operator's error type: each part has its own, wrapped here.

/// Anything that stops a reconcile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or using the cloud credentials (the Degraded kind of problem).
    #[error(transparent)]
    Credentials(#[from] crate::cloud::CredentialsError),
    /// Rendering the embedded driver manifests.
    #[error(transparent)]
    Assets(#[from] operator_kit::templates::TemplateError),
    /// Applying or deleting the driver's objects.
    #[error(transparent)]
    Apply(#[from] operator_kit::apply::ApplyError),
    /// Deleting objects the running release no longer installs.
    #[error(transparent)]
    Prune(#[from] operator_kit::prune::PruneError),
    /// Creating or re-creating share-type StorageClasses.
    #[error(transparent)]
    StorageClasses(#[from] operator_kit::storage_classes::SyncError),
    /// Writing the ClusterCSIDriver's or the ClusterOperator's status.
    #[error(transparent)]
    Status(#[from] operator_kit::operator_status::StatusError),
    /// Any other Kubernetes API call.
    #[error("{action}: {source}")]
    Kube {
        /// What was being done.
        action: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Something the operator built or read is not what it must be.
    #[error("{0}")]
    Invalid(String),
}

/// The operator's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
