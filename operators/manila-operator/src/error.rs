//! The operator's error type: each part has its own, wrapped here.

/// Anything that stops a reconcile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or using the cloud credentials (the Degraded kind of problem).
    #[error(transparent)]
    Credentials(#[from] crate::cloud::CredentialsError),
    /// Rendering the embedded driver manifests.
    #[error(transparent)]
    Assets(#[from] crate::assets::AssetError),
    /// Applying or deleting the driver's objects.
    #[error(transparent)]
    Apply(#[from] crate::apply::ApplyError),
    /// Deleting objects the running release no longer installs.
    #[error(transparent)]
    Prune(#[from] crate::prune::PruneError),
    /// Creating or re-creating share-type StorageClasses.
    #[error(transparent)]
    StorageClasses(#[from] crate::storage_classes::SyncError),
    /// Installing the operator's CRDs.
    #[error(transparent)]
    Crds(#[from] kube_support::crd::CrdError),
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
    /// Leader election failed.
    #[error(transparent)]
    LeaderElection(#[from] kube_support::leader::LeaderError),
}

/// The operator's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Wraps a kube error with what was being done.
pub(crate) fn kube(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let action = action.into();
    move |source| Error::Kube { action, source }
}
