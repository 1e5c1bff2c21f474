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
    /// The kubelet API could not be served.
    #[error(transparent)]
    KubeletApi(#[from] super::kubelet::Error),
    /// The container runtime failed.
    #[error(transparent)]
    Runtime(#[from] pod_runtime::Error),
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
    /// A volume mount's subPath was refused or could not be prepared (the container waits in
    /// `CreateContainerConfigError`): kubelet's message. Past the checks of the path's text,
    /// the cause is not in the message (kubelet keeps what it learns about the node's file
    /// system out of the pod's status); the agent logs it.
    #[error("{}", cause.kubelet_message(container, mount, sub_path))]
    SubPath {
        /// The container name.
        container: String,
        /// The volume mount's name (the volume's).
        mount: String,
        /// The subPath (expanded, for `subPathExpr`).
        sub_path: String,
        /// Why.
        cause: Box<SubPathError>,
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

/// Why a subPath was refused (see [`Error::SubPath`]).
#[derive(Debug, thiserror::Error)]
pub enum SubPathError {
    /// The subPath is an absolute path.
    #[error("the subPath must not be an absolute path")]
    Absolute,
    /// The subPath has a `..` component.
    #[error("the subPath must not contain '..'")]
    Backsteps,
    /// The subPath did not exist and its directory could not be created inside the volume.
    #[error("creating the missing subPath directory")]
    MakeDir(#[source] SubPathFault),
    /// The subPath could not be opened inside the volume and bind-mounted for the container.
    #[error("bind-mounting the subPath")]
    Bind(#[source] SubPathFault),
}

impl SubPathError {
    /// kubelet's message for the subPath `sub_path` of volume mount `mount` of `container`.
    pub fn kubelet_message(&self, container: &str, mount: &str, sub_path: &str) -> String {
        match self {
            SubPathError::Absolute => {
                format!("error SubPath `{sub_path}` must not be an absolute path")
            }
            SubPathError::Backsteps => {
                format!("unable to provision SubPath `{sub_path}`: must not contain '..'")
            }
            SubPathError::MakeDir(_) => format!(
                "failed to create subPath directory for volumeMount {mount:?} of container {container:?}"
            ),
            SubPathError::Bind(_) => format!(
                "failed to prepare subPath for volumeMount {mount:?} of container {container:?}"
            ),
        }
    }
}

/// What went wrong opening, creating or bind-mounting a subPath inside its volume (paths are
/// the node's).
#[derive(Debug, thiserror::Error)]
pub enum SubPathFault {
    /// With its symbolic links resolved, the path leaves the volume.
    #[error("{} resolves to {}, outside the volume {}", path.display(), resolved.display(), volume.display())]
    Escapes {
        /// The path (volume and subPath joined).
        path: PathBuf,
        /// Where it leads.
        resolved: PathBuf,
        /// The volume, its links resolved.
        volume: PathBuf,
    },
    /// A component of the subPath is a symbolic link to nothing: it is not followed to create
    /// what it names (outside the volume, or not).
    #[error(
        "{} is a symbolic link to {}, which does not exist{}",
        path.display(),
        target.display(),
        if *outside { " and is outside the volume" } else { "" }
    )]
    DanglingLink {
        /// The link.
        path: PathBuf,
        /// Its target, as written.
        target: PathBuf,
        /// Whether the target is outside the volume.
        outside: bool,
    },
    /// A component turned out to be a symbolic link while the path was opened one component
    /// at a time (it was swapped in after the path was resolved).
    #[error("{} is a symbolic link, not followed", path.display())]
    Symlink {
        /// The component's path.
        path: PathBuf,
    },
    /// The subPath exists and is not a directory where one is needed.
    #[error("{} exists and is not a directory", path.display())]
    NotADirectory {
        /// The path.
        path: PathBuf,
    },
    /// A file-system call failed.
    #[error("{action} {}", path.display())]
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

impl kube_support::error::IoContext for SubPathFault {
    fn from_io(action: &'static str, path: PathBuf, source: std::io::Error) -> Self {
        SubPathFault::Io {
            action,
            path,
            source,
        }
    }
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

    pub(crate) fn sub_path(
        container: &str,
        mount: &str,
        sub_path: &str,
    ) -> impl FnOnce(SubPathError) -> Self {
        let (container, mount, sub_path) = (container.into(), mount.into(), sub_path.into());
        move |cause| Error::SubPath {
            container,
            mount,
            sub_path,
            cause: Box::new(cause),
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

impl kube_support::error::IoContext for Error {
    fn from_io(action: &'static str, path: PathBuf, source: std::io::Error) -> Self {
        Error::Io {
            action,
            path,
            source,
        }
    }
}
