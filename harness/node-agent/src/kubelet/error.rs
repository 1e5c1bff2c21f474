//! The kubelet API's errors (starting the server; requests answer with HTTP statuses).

use std::path::{Path, PathBuf};

/// What can keep the kubelet API from being served.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A certificate, key or CA file is unusable.
    #[error("kubelet API TLS: {}: {reason}", path.display())]
    Tls {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The listening socket could not be bound.
    #[error("binding the kubelet API to {address}")]
    Bind {
        /// The address.
        address: std::net::SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// The kubelet API's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn tls(path: &Path, reason: impl std::fmt::Display) -> Self {
        Error::Tls {
            path: path.to_path_buf(),
            reason: reason.to_string(),
        }
    }
}
