//! The client's error type. Callers map it into their own (the drivers into gRPC codes);
//! each variant says when it happens.

/// Everything that can go wrong talking to OpenStack. Errors are `Clone` so that one failed
/// authentication can be shared with every call that waited for it.
#[derive(Clone, Debug, thiserror::Error)]
pub enum Error {
    /// The input is malformed: a missing or unusable secret key, a bad clouds.yaml, an id
    /// that cannot be put in a URL. The message names the culprit.
    #[error("{0}")]
    InvalidArgument(String),
    /// A service (Keystone, Manila, Cinder, Nova) could not be reached at all.
    #[error("cannot reach {service} at {url}: {reason}")]
    Unreachable {
        /// `Keystone`, `Manila`, `Cinder` or `Nova`.
        service: &'static str,
        /// The URL that was tried.
        url: String,
        /// The transport error, flattened to text.
        reason: String,
    },
    /// Keystone refused the credentials (or a service kept answering 401 after
    /// re-authentication).
    #[error("authentication failed: {0}")]
    Unauthenticated(String),
    /// An OpenStack API answered with an error status.
    #[error("{service} {method} {path} failed with HTTP {status}: {message}")]
    Api {
        /// The service.
        service: &'static str,
        /// HTTP method.
        method: String,
        /// Request path (no query secrets are ever put in paths).
        path: String,
        /// HTTP status code.
        status: u16,
        /// The error message from the body, if any.
        message: String,
    },
    /// An OpenStack response could not be decoded.
    #[error("unexpected response from {service} {path}: {reason}")]
    Decode {
        /// The service.
        service: &'static str,
        /// Request path.
        path: String,
        /// What was wrong with it.
        reason: String,
    },
    /// A share or snapshot does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The cloud is not in a state that allows the operation (a Manila too old).
    #[error("{0}")]
    FailedPrecondition(String),
    /// The Keystone catalog lists no endpoint of a service usable with the credentials'
    /// region and interface.
    #[error("{0}")]
    NotInCatalog(String),
    /// A wait ran past its deadline (see [`crate::wait::Timeout`]).
    #[error("{0}")]
    DeadlineExceeded(String),
    /// The instance metadata service could not tell the document (unreachable, an error
    /// status, or not a metadata document).
    #[error("metadata service {url}: {reason}")]
    Metadata {
        /// The document's URL.
        url: String,
        /// What went wrong.
        reason: String,
    },
    /// A bug or an unexpected local condition (a poisoned lock, an HTTP client that cannot
    /// be built).
    #[error("{0}")]
    Internal(String),
}

/// Result alias of the client.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Whether this is an HTTP 404 from the cloud or a [`Error::NotFound`].
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound(_) | Error::Api { status: 404, .. })
    }
}

impl From<crate::wait::Timeout> for Error {
    fn from(timeout: crate::wait::Timeout) -> Self {
        Error::DeadlineExceeded(timeout.to_string())
    }
}

/// Implements `From<openstack_client::Error>` for a caller's error enum that mirrors the
/// client's variants (same names and fields: `InvalidArgument`, `Unreachable`,
/// `Unauthenticated`, `Api`, `Decode`, `NotFound`, `FailedPrecondition`, `NotInCatalog`,
/// `DeadlineExceeded`, `Internal`), so that each keeps its variant (and the caller's wording
/// and code for it). `metadata` says what a metadata-service failure becomes, from its `url`
/// and `reason`:
///
/// ```ignore
/// openstack_client::mirror_client_errors!(Error, metadata: |url, reason| Error::Metadata { url, reason });
/// ```
#[macro_export]
macro_rules! mirror_client_errors {
    ($target:ident, metadata: |$url:ident, $reason:ident| $metadata:expr) => {
        impl From<$crate::Error> for $target {
            fn from(error: $crate::Error) -> Self {
                use $crate::Error as Client;
                match error {
                    Client::InvalidArgument(message) => $target::InvalidArgument(message),
                    Client::Unreachable {
                        service,
                        url,
                        reason,
                    } => $target::Unreachable {
                        service,
                        url,
                        reason,
                    },
                    Client::Unauthenticated(message) => $target::Unauthenticated(message),
                    Client::Api {
                        service,
                        method,
                        path,
                        status,
                        message,
                    } => $target::Api {
                        service,
                        method,
                        path,
                        status,
                        message,
                    },
                    Client::Decode {
                        service,
                        path,
                        reason,
                    } => $target::Decode {
                        service,
                        path,
                        reason,
                    },
                    Client::NotFound(message) => $target::NotFound(message),
                    Client::FailedPrecondition(message) => $target::FailedPrecondition(message),
                    Client::NotInCatalog(message) => $target::NotInCatalog(message),
                    Client::DeadlineExceeded(message) => $target::DeadlineExceeded(message),
                    Client::Metadata {
                        url: $url,
                        reason: $reason,
                    } => $metadata,
                    Client::Internal(message) => $target::Internal(message),
                }
            }
        }
    };
}
