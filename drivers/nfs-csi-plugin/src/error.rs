//! The plugin's error type and its mapping to gRPC statuses (in one place).

use std::path::PathBuf;

use tonic::{Code, Status};

/// Everything a Node or Identity call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// A required request field is empty; names the field (`volume_context.server`, …).
    #[error("{0} is required")]
    MissingField(&'static str),
    /// A request field has a value this plugin does not accept.
    #[error("{0}")]
    InvalidArgument(String),
    /// Another call for the same volume is still running.
    #[error("an operation on volume {0} is already in progress")]
    InProgress(String),
    /// The volume path of a stats call does not exist.
    #[error("volume path {} does not exist", .0.display())]
    VolumePathNotFound(PathBuf),
    /// The local mounter found no directory for the export.
    #[error("export directory {} for {export} does not exist", dir.display())]
    ExportNotFound {
        /// `server:share`.
        export: String,
        /// Where the local mounter looked for it.
        dir: PathBuf,
    },
    /// The local mounter was asked to mount an export of another host.
    #[error(
        "the local mounter only mounts exports of this host, and server {server:?} is not a \
         local address ({detail}); use --mounter=kernel for remote NFS servers"
    )]
    ServerNotLocal {
        /// The server from the volume context.
        server: String,
        /// What it resolved to.
        detail: String,
    },
    /// The chosen mounter cannot work on this machine.
    #[error("the {mounter} mounter cannot work here: {reason}")]
    MounterUnusable {
        /// `kernel` or `local`.
        mounter: &'static str,
        /// Why.
        reason: String,
    },
    /// Mounting failed. The mount options are left out on purpose: they may be sensitive.
    #[error("mounting {export} at {} failed: {detail}", target.display())]
    MountFailed {
        /// `server:share`.
        export: String,
        /// The target path.
        target: PathBuf,
        /// The system's answer.
        detail: String,
    },
    /// Unmounting failed.
    #[error("unmounting {} failed: {detail}", target.display())]
    UnmountFailed {
        /// The target path.
        target: PathBuf,
        /// The system's answer.
        detail: String,
    },
    /// A file-system operation failed.
    #[error("cannot {action} {}: {detail}", path.display())]
    Io {
        /// What was being done ("create target directory", …).
        action: &'static str,
        /// On which path.
        path: PathBuf,
        /// The system's answer.
        detail: std::io::Error,
    },
}

/// Result alias for this crate.
pub type Result<T, E = NodeError> = std::result::Result<T, E>;

impl NodeError {
    /// The gRPC code this error answers with.
    pub fn code(&self) -> Code {
        match self {
            Self::MissingField(_) | Self::InvalidArgument(_) => Code::InvalidArgument,
            Self::InProgress(_) => Code::Aborted,
            Self::VolumePathNotFound(_) | Self::ExportNotFound { .. } => Code::NotFound,
            Self::ServerNotLocal { .. } | Self::MounterUnusable { .. } => Code::FailedPrecondition,
            Self::MountFailed { .. } | Self::UnmountFailed { .. } | Self::Io { .. } => {
                Code::Internal
            }
        }
    }

    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        detail: std::io::Error,
    ) -> Self {
        Self::Io {
            action,
            path: path.into(),
            detail,
        }
    }
}

impl From<NodeError> for Status {
    fn from(error: NodeError) -> Self {
        Status::new(error.code(), error.to_string())
    }
}
