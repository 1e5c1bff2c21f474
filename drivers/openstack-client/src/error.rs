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

#[cfg(feature = "grpc")]
impl Error {
    /// The gRPC code a CSI driver reports this error with: transport failures and
    /// throttling are Unavailable, HTTP statuses map as upstream's drivers map them.
    pub fn grpc_code(&self) -> tonic::Code {
        use tonic::Code;
        match self {
            Error::InvalidArgument(_) => Code::InvalidArgument,
            Error::Unreachable { .. } | Error::Metadata { .. } => Code::Unavailable,
            Error::Unauthenticated(_) => Code::Unauthenticated,
            Error::Api {
                status, message, ..
            } => match status {
                400 => Code::InvalidArgument,
                401 => Code::Unauthenticated,
                // Manila answers 403 both for policy denials and for "Invalid share/snapshot:
                // status must be …" state errors.
                403 if message.starts_with("Invalid") => Code::FailedPrecondition,
                403 => Code::PermissionDenied,
                404 => Code::NotFound,
                409 => Code::FailedPrecondition,
                // Manila and Cinder answer 413 for quota errors.
                413 => Code::ResourceExhausted,
                429 | 503 => Code::Unavailable,
                _ => Code::Internal,
            },
            Error::Decode { .. } | Error::Internal(_) => Code::Internal,
            Error::NotFound(_) => Code::NotFound,
            Error::FailedPrecondition(_) | Error::NotInCatalog(_) => Code::FailedPrecondition,
            Error::DeadlineExceeded(_) => Code::DeadlineExceeded,
        }
    }
}

impl From<crate::wait::Timeout> for Error {
    fn from(timeout: crate::wait::Timeout) -> Self {
        Error::DeadlineExceeded(timeout.to_string())
    }
}

/// Implements `From<openstack_client::Error>` for a caller's error enum that has the variants
/// `InvalidArgument`, `NotFound`, `FailedPrecondition`, `DeadlineExceeded` and `Internal`
/// (each holding a `String`) and `Cloud(openstack_client::Error)`: those five keep their
/// variant (so the caller's own matches on them see the client's too), every other client
/// error is `Cloud`.
///
/// ```ignore
/// openstack_client::client_errors_into!(Error);
/// ```
#[macro_export]
macro_rules! client_errors_into {
    ($target:ident) => {
        impl From<$crate::Error> for $target {
            fn from(error: $crate::Error) -> Self {
                use $crate::Error as Client;
                match error {
                    Client::InvalidArgument(message) => $target::InvalidArgument(message),
                    Client::NotFound(message) => $target::NotFound(message),
                    Client::FailedPrecondition(message) => $target::FailedPrecondition(message),
                    Client::DeadlineExceeded(message) => $target::DeadlineExceeded(message),
                    Client::Internal(message) => $target::Internal(message),
                    other => $target::Cloud(other),
                }
            }
        }
    };
}
