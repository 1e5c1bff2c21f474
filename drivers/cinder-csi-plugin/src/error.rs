//! The driver's error type and its one mapping to gRPC status codes.

use kube_support::claims::ClaimError;
use tonic::{Code, Status};

/// Everything that can go wrong while serving a CSI call or starting the driver. Each
/// variant says when it happens; [`From<Error> for Status`] gives each its gRPC code.
#[derive(Clone, Debug, thiserror::Error)]
pub enum Error {
    /// The request or the configuration is malformed; the message names the culprit.
    #[error("{0}")]
    InvalidArgument(String),
    /// A configuration file (`--cloud-config`) is unreadable or has a bad value.
    #[error("cloud config {file}: {reason}")]
    Config {
        /// The file.
        file: String,
        /// What is wrong, naming the section and key.
        reason: String,
    },
    /// An OpenStack call failed: a service unreachable, credentials refused, an error
    /// status, an answer that does not decode, a service not in the catalog, the metadata
    /// service. Its code is [`openstack_client::Error::grpc_code`].
    #[error(transparent)]
    Cloud(openstack_client::Error),
    /// A volume, snapshot, server or device does not exist.
    #[error("{0}")]
    NotFound(String),
    /// A volume or snapshot of that name exists but does not match the request.
    #[error("{0}")]
    AlreadyExists(String),
    /// Another operation on the same volume or name is still in progress.
    #[error("{0}")]
    Aborted(String),
    /// A resource is in a transient state (a source snapshot still creating).
    #[error("{0}")]
    Unavailable(String),
    /// The resource is not in a state that allows the operation.
    #[error("{0}")]
    FailedPrecondition(String),
    /// A volume or snapshot ended in an error state.
    #[error("{0}")]
    ResourceFailed(String),
    /// Waiting for a status ran past its deadline.
    #[error("{0}")]
    DeadlineExceeded(String),
    /// A size outside the allowed range.
    #[error("{0}")]
    OutOfRange(String),
    /// A quota would be exceeded.
    #[error("{0}")]
    ResourceExhausted(String),
    /// The RPC or feature is not supported.
    #[error("{0}")]
    Unimplemented(String),
    /// A host command (mount, mkfs, blkid, resize2fs …) failed.
    #[error("{command} failed: {reason}")]
    Command {
        /// The command line (no secrets are ever on it).
        command: String,
        /// Exit status and stderr.
        reason: String,
    },
    /// `--pvc-annotations` could not read the claim (FailedPrecondition without a client,
    /// NotFound for a missing claim, Unavailable for a failed read).
    #[error(transparent)]
    Claim(#[from] kube_support::claims::ClaimError),
    /// The CSI endpoint could not be bound or served.
    #[error(transparent)]
    Serve(#[from] csi_proto::plugin_server::PluginServeError),
    /// A bug or an unexpected local condition.
    #[error("{0}")]
    Internal(String),
}

/// Result alias for the driver.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The gRPC code a CSI caller gets for this error.
    pub fn code(&self) -> Code {
        match self {
            Error::InvalidArgument(_) | Error::Config { .. } => Code::InvalidArgument,
            Error::Cloud(error) => error.grpc_code(),
            Error::Internal(_) | Error::Command { .. } => Code::Internal,
            Error::FailedPrecondition(_) => Code::FailedPrecondition,
            Error::NotFound(_) => Code::NotFound,
            Error::Aborted(_) => Code::Aborted,
            Error::Unavailable(_) => Code::Unavailable,
            Error::AlreadyExists(_) => Code::AlreadyExists,
            Error::ResourceFailed(_) => Code::Internal,
            Error::DeadlineExceeded(_) => Code::DeadlineExceeded,
            Error::OutOfRange(_) => Code::OutOfRange,
            Error::ResourceExhausted(_) => Code::ResourceExhausted,
            Error::Unimplemented(_) => Code::Unimplemented,
            Error::Claim(ClaimError::Client(_)) => Code::FailedPrecondition,
            Error::Claim(ClaimError::NotFound { .. }) => Code::NotFound,
            Error::Claim(ClaimError::Read { .. }) => Code::Unavailable,
            Error::Serve(error) => error.code(),
        }
    }

    /// Whether the cloud answered 404 for the request.
    pub fn is_not_found(&self) -> bool {
        match self {
            Error::NotFound(_) => true,
            Error::Cloud(error) => error.is_not_found(),
            _ => false,
        }
    }
}

openstack_client::client_errors_into!(Error);

impl From<csi_proto::in_flight::Busy> for Error {
    fn from(busy: csi_proto::in_flight::Busy) -> Self {
        Error::Aborted(format!(
            "an operation on {} is already in progress",
            busy.what
        ))
    }
}

impl From<openstack_client::wait::Timeout> for Error {
    /// `volume v: still creating after 180s`.
    fn from(timeout: openstack_client::wait::Timeout) -> Self {
        Error::DeadlineExceeded(format!(
            "{}: still {} after {:?}",
            timeout.what, timeout.last_seen, timeout.deadline
        ))
    }
}

impl From<Error> for Status {
    fn from(error: Error) -> Self {
        Status::new(error.code(), error.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(status: u16) -> Error {
        Error::Cloud(openstack_client::Error::Api {
            service: "Cinder",
            method: "POST".into(),
            path: "/volumes".into(),
            status,
            message: "VolumeLimitExceeded: Maximum number of volumes allowed (10) exceeded".into(),
        })
    }

    #[test]
    fn api_errors_map_to_csi_codes_by_http_status() {
        assert_eq!(api(400).code(), Code::InvalidArgument);
        assert_eq!(api(404).code(), Code::NotFound);
        assert_eq!(api(409).code(), Code::FailedPrecondition);
        assert_eq!(api(413).code(), Code::ResourceExhausted);
        assert_eq!(api(503).code(), Code::Unavailable);
        assert_eq!(api(500).code(), Code::Internal);
    }

    #[test]
    fn status_message_names_the_clouds_reason() {
        let status = Status::from(api(413));
        assert!(
            status
                .message()
                .contains("Maximum number of volumes allowed (10) exceeded")
        );
        assert!(status.message().contains("HTTP 413"));
    }

    #[test]
    fn config_errors_are_invalid_argument_naming_the_file() {
        let error = Error::Config {
            file: "/etc/cloud.conf".into(),
            reason: "[Global] auth-url is missing".into(),
        };
        assert_eq!(error.code(), Code::InvalidArgument);
        assert!(error.to_string().contains("/etc/cloud.conf"));
    }

    #[test]
    fn a_second_operation_on_a_key_is_aborted_until_the_first_ends() -> Result<()> {
        let operations = csi_proto::in_flight::InFlight::default();
        let first = operations.begin("vol-1", "volume vol-1")?;
        let error = operations
            .begin("vol-1", "volume vol-1")
            .map_err(Error::from)
            .err();
        assert!(
            matches!(&error, Some(Error::Aborted(m)) if m.contains("volume vol-1")),
            "{error:?}"
        );
        let _other = operations.begin("vol-2", "volume vol-2")?;
        drop(first);
        operations.begin("vol-1", "volume vol-1")?;
        Ok(())
    }

    #[test]
    fn client_errors_keep_their_message_and_code() {
        let error = Error::from(openstack_client::Error::Decode {
            service: "Cinder",
            path: "/volumes".into(),
            reason: "bad".into(),
        });
        assert_eq!(
            error.to_string(),
            "unexpected response from Cinder /volumes: bad"
        );
        assert_eq!(error.code(), Code::Internal);
        let error = Error::from(openstack_client::Error::Metadata {
            url: "http://m".into(),
            reason: "answered HTTP 503".into(),
        });
        assert_eq!(
            error.to_string(),
            "metadata service http://m: answered HTTP 503"
        );
        assert_eq!(error.code(), Code::Unavailable);
        let error = Error::from(openstack_client::Error::NotFound("volume v".into()));
        assert!(matches!(&error, Error::NotFound(m) if m == "volume v"));
        assert!(api(404).is_not_found());
        assert_eq!(api(429).code(), Code::Unavailable);
    }
}
