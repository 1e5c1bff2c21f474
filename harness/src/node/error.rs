//! The node agent's error type.

use std::path::PathBuf;

/// Everything that can go wrong in a node agent.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration is invalid.
    #[error("invalid node agent configuration: {what}: {reason}")]
    Config {
        /// The field at fault.
        what: String,
        /// Why it is invalid.
        reason: String,
    },
    /// No API client could be built from the kubeconfig.
    #[error("building an API client from {path:?}")]
    Client {
        /// The kubeconfig.
        path: PathBuf,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// An API request failed.
    #[error("{action}")]
    Api {
        /// What was being done, e.g. `creating Node "node-1"`.
        action: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The container runtime failed.
    #[error(transparent)]
    Runtime(#[from] crate::runtime::Error),
    /// A volume could not be set up (reported as a `FailedMount` event).
    #[error("volume {volume:?}: {reason}")]
    Volume {
        /// The volume name.
        volume: String,
        /// Why.
        reason: String,
    },
    /// A CSI volume could not be mounted: its `Display` is kubelet's message (reported as
    /// `FailedMount`); [`csi::Error::is_not_attached`](super::csi::Error::is_not_attached)
    /// says whether it only waits for attachment (retried about every second).
    #[error(transparent)]
    CsiVolume(#[from] super::csi::Error),
    /// A container's configuration could not be resolved (env references, command).
    #[error("container {container:?}: {reason}")]
    ContainerConfig {
        /// The container name.
        container: String,
        /// Why.
        reason: String,
    },
    /// A pod or container was not found in a node's run directory.
    #[error("{what} not found in {run_dir:?}")]
    NotFound {
        /// What was looked for.
        what: String,
        /// The node run directory searched.
        run_dir: PathBuf,
    },
    /// A file-system operation failed.
    #[error("{action} {path:?}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// The node agent's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn config(what: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Config {
            what: what.into(),
            reason: reason.into(),
        }
    }

    pub(crate) fn api(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let action = action.into();
        move |source| Error::Api { action, source }
    }

    pub(crate) fn volume(volume: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Volume {
            volume: volume.into(),
            reason: reason.into(),
        }
    }

    pub(crate) fn container(container: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::ContainerConfig {
            container: container.into(),
            reason: reason.into(),
        }
    }

    /// Whether an API error is a 404.
    pub(crate) fn is_not_found(e: &kube::Error) -> bool {
        matches!(e, kube::Error::Api(status) if status.code == 404)
    }

    /// Whether an API error is a 409 (already exists or conflict).
    pub(crate) fn is_conflict(e: &kube::Error) -> bool {
        matches!(e, kube::Error::Api(status) if status.code == 409)
    }
}

impl crate::errors::IoContext for Error {
    fn from_io(action: &'static str, path: PathBuf, source: std::io::Error) -> Self {
        Error::Io {
            action,
            path,
            source,
        }
    }
}
