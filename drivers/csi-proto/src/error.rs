//! The crate's error type.

use std::path::PathBuf;

/// Errors from parsing, binding, serving or connecting to a CSI endpoint.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The endpoint string is not `unix://…`, `unix:…`, a path, or `tcp://host:port`.
    #[error("invalid CSI endpoint {endpoint:?}: {reason}")]
    InvalidEndpoint {
        /// The endpoint as given.
        endpoint: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The directory that should hold the unix socket does not exist.
    #[error("cannot listen on {}: directory {} does not exist", socket.display(), dir.display())]
    SocketDirMissing {
        /// The socket path.
        socket: PathBuf,
        /// Its parent directory.
        dir: PathBuf,
    },
    /// Something other than a socket exists at the socket path; it is left alone.
    #[error("cannot listen on {}: the path exists and is not a socket", socket.display())]
    NotASocket {
        /// The socket path.
        socket: PathBuf,
    },
    /// An I/O operation on the endpoint failed (removing a stale socket, binding).
    #[error("{action} {endpoint}: {detail}")]
    Io {
        /// What was being done, e.g. "cannot bind".
        action: &'static str,
        /// The endpoint concerned.
        endpoint: String,
        /// The underlying error.
        detail: std::io::Error,
    },
    /// The gRPC transport failed (connecting or serving).
    #[error("{action} {endpoint}: {detail}")]
    Transport {
        /// What was being done, e.g. "cannot connect to".
        action: &'static str,
        /// The endpoint concerned.
        endpoint: String,
        /// The transport error with its whole chain of causes (tonic's own message
        /// alone is often just "transport error").
        detail: String,
    },
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Formats an error with its chain of sources, `outer: inner: innermost`.
pub(crate) fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
