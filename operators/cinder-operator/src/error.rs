//! The reconcile's error type: each part has its own, wrapped here.

/// Anything that stops a reconcile (and makes the controller back off).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading the credentials Secret or the ConfigMap.
    #[error(transparent)]
    Inputs(#[from] crate::inputs::InputError),
    /// The configuration translation.
    #[error(transparent)]
    Translation(#[from] crate::cloud_conf::TranslationError),
    /// The cloud check.
    #[error(transparent)]
    Cloud(#[from] crate::cloud::CloudError),
    /// Rendering the embedded driver manifests.
    #[error(transparent)]
    Assets(#[from] operator_kit::templates::TemplateError),
    /// Applying or deleting the driver's objects.
    #[error(transparent)]
    Apply(#[from] operator_kit::apply::ApplyError),
    /// Deleting objects the operator no longer installs.
    #[error(transparent)]
    Prune(#[from] operator_kit::prune::PruneError),
    /// Creating, re-creating or deleting the StorageClass.
    #[error(transparent)]
    StorageClasses(#[from] operator_kit::storage_classes::SyncError),
    /// Writing the ClusterCSIDriver's or the ClusterOperator's status.
    #[error(transparent)]
    Status(#[from] operator_kit::operator_status::StatusError),
    /// Any other Kubernetes API call.
    #[error("{action}: {}", operator_kit::apply::api_message(source))]
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
