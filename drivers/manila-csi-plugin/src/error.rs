//! The driver's error type and its one mapping to gRPC status codes.

use kube_support::claims::ClaimError;
use tonic::{Code, Status};

/// Everything that can go wrong while serving a CSI call. Each variant documents when it
/// happens; [`From<Error> for Status`] gives each its gRPC code.
/// Errors are `Clone` so that one failed authentication can be shared with every call that
/// waited for it.
#[derive(Clone, Debug, thiserror::Error)]
pub enum Error {
    /// The request itself is malformed: a missing field, a bad StorageClass parameter, a
    /// missing or unusable secret. The message names the culprit.
    #[error("{0}")]
    InvalidArgument(String),
    /// A share, snapshot or access rule does not exist.
    #[error("{0}")]
    NotFound(String),
    /// A share or snapshot with the requested name exists but does not match the request.
    #[error("{0}")]
    AlreadyExists(String),
    /// Another request for the same volume or snapshot name is still being processed.
    #[error("{0}")]
    Aborted(String),
    /// The resource is in a transient state (for example a snapshot still `creating`).
    #[error("{0}")]
    Unavailable(String),
    /// The resource or the cloud is not in a state that allows the operation.
    #[error("{0}")]
    FailedPrecondition(String),
    /// An OpenStack call failed: a service unreachable, credentials refused, an error
    /// status, an answer that does not decode, a service not in the catalog, the metadata
    /// service. Its code is [`openstack_client::Error::grpc_code`].
    #[error(transparent)]
    Cloud(openstack_client::Error),
    /// Waiting for a share, snapshot or access rule ran past its deadline.
    #[error("{0}")]
    DeadlineExceeded(String),
    /// The share or snapshot ended in an `error` state; `detail_id` is the newest Manila user
    /// message's detail id, which chooses the code.
    #[error("{message}")]
    ResourceFailed {
        /// Human-readable description, naming the share or snapshot.
        message: String,
        /// Manila user-message detail id (`001`…), if any message was found.
        detail_id: Option<String>,
    },
    /// A CreateVolume step failed once its share existed and the share was rolled back
    /// (`outcome` says whether deleting it worked). Reported with the code of `source`.
    #[error("volume {volume:?}: {source}; {outcome}")]
    CreateFailed {
        /// The CSI volume name.
        volume: String,
        /// What failed.
        source: Box<Error>,
        /// What became of the share, as a sentence.
        outcome: String,
    },
    /// A requested size cannot be satisfied within the given limits.
    #[error("{0}")]
    OutOfRange(String),
    /// The cloud refused because a quota would be exceeded.
    #[error("{0}")]
    ResourceExhausted(String),
    /// The RPC or the requested feature is not supported by this driver.
    #[error("{0}")]
    Unimplemented(String),
    /// The partner node plugin answered with an error; its status is passed through.
    #[error("partner node plugin: {0}")]
    Partner(Status),
    /// `--pvc-annotations` could not read the claim (FailedPrecondition without a client,
    /// NotFound for a missing claim, Unavailable for a failed read).
    #[error(transparent)]
    Claim(#[from] kube_support::claims::ClaimError),
    /// The CSI endpoint could not be bound or served.
    #[error(transparent)]
    Serve(#[from] csi_proto::plugin_server::PluginServeError),
    /// A bug or an unexpected condition inside the driver.
    #[error("{0}")]
    Internal(String),
}

/// Result alias for the driver.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The gRPC code this error is reported with.
    pub fn code(&self) -> Code {
        match self {
            Error::InvalidArgument(_) => Code::InvalidArgument,
            Error::Cloud(error) => error.grpc_code(),
            Error::NotFound(_) => Code::NotFound,
            Error::AlreadyExists(_) => Code::AlreadyExists,
            Error::Aborted(_) => Code::Aborted,
            Error::Unavailable(_) => Code::Unavailable,
            Error::FailedPrecondition(_) => Code::FailedPrecondition,
            Error::DeadlineExceeded(_) => Code::DeadlineExceeded,
            Error::ResourceFailed { detail_id, .. } => code_for_detail_id(detail_id.as_deref()),
            Error::CreateFailed { source, .. } => source.code(),
            Error::OutOfRange(_) => Code::OutOfRange,
            Error::ResourceExhausted(_) => Code::ResourceExhausted,
            Error::Unimplemented(_) => Code::Unimplemented,
            Error::Claim(ClaimError::Client(_)) => Code::FailedPrecondition,
            Error::Claim(ClaimError::NotFound { .. }) => Code::NotFound,
            Error::Claim(ClaimError::Read { .. }) => Code::Unavailable,
            Error::Serve(error) => error.code(),
            Error::Partner(status) => status.code(),
            Error::Internal(_) => Code::Internal,
        }
    }

    /// Whether this is an HTTP 404 from the cloud or a [`Error::NotFound`].
    pub fn is_not_found(&self) -> bool {
        match self {
            Error::NotFound(_) => true,
            Error::Cloud(error) => error.is_not_found(),
            _ => false,
        }
    }
}

/// Manila user-message detail ids → gRPC codes, as the upstream driver maps them:
/// 002 (no valid host) and 009 (no valid host for the share size) → OutOfRange,
/// 003/008 (invalid request / driver does not support) → InvalidArgument,
/// 007 (quota) → ResourceExhausted, anything else → Internal.
pub fn code_for_detail_id(detail_id: Option<&str>) -> Code {
    match detail_id {
        Some("002" | "009") => Code::OutOfRange,
        Some("003" | "008") => Code::InvalidArgument,
        Some("007") => Code::ResourceExhausted,
        _ => Code::Internal,
    }
}

openstack_client::client_errors_into!(Error);

impl From<csi_proto::in_flight::Busy> for Error {
    fn from(busy: csi_proto::in_flight::Busy) -> Self {
        Error::Aborted(format!(
            "an operation for {} {:?} is already in progress",
            busy.what, busy.key
        ))
    }
}

impl From<openstack_client::wait::Timeout> for Error {
    fn from(timeout: openstack_client::wait::Timeout) -> Self {
        Error::DeadlineExceeded(timeout.to_string())
    }
}

impl From<Error> for Status {
    fn from(error: Error) -> Self {
        match error {
            Error::Partner(status) => status,
            other => Status::new(other.code(), other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case(Some("002"), Code::OutOfRange)]
    #[case(Some("009"), Code::OutOfRange)]
    #[case(Some("003"), Code::InvalidArgument)]
    #[case(Some("008"), Code::InvalidArgument)]
    #[case(Some("007"), Code::ResourceExhausted)]
    #[case(Some("001"), Code::Internal)]
    #[case(None, Code::Internal)]
    fn detail_ids_map_to_codes(#[case] detail: Option<&str>, #[case] code: Code) {
        assert_eq!(code_for_detail_id(detail), code);
    }

    #[test]
    fn quota_errors_from_the_api_are_resource_exhausted() {
        let error = Error::Cloud(openstack_client::Error::Api {
            service: "Manila",
            method: "POST".into(),
            path: "/shares".into(),
            status: 413,
            message: "Requested share exceeds allowed project/user or share type gigabytes quota."
                .into(),
        });
        let status = Status::from(error);
        assert_eq!(status.code(), Code::ResourceExhausted);
        assert!(status.message().contains("quota"), "{}", status.message());
    }

    #[test]
    fn a_second_request_is_aborted_until_the_first_ends() {
        let inflight = csi_proto::in_flight::InFlight::default();
        let guard = inflight.begin("pvc-1", "volume").map_err(Error::from);
        assert!(guard.is_ok());
        let error = inflight.begin("pvc-1", "volume").map_err(Error::from).err();
        assert!(
            matches!(&error, Some(Error::Aborted(m)) if m.contains("volume \"pvc-1\"")),
            "{error:?}"
        );
        assert!(inflight.begin("pvc-2", "volume").is_ok());
        drop(guard);
        assert!(inflight.begin("pvc-1", "volume").is_ok());
    }

    #[test]
    fn client_errors_keep_their_variant_and_code() {
        let error = Error::from(openstack_client::Error::NotInCatalog("no Manila".into()));
        assert_eq!(error.to_string(), "no Manila");
        assert_eq!(error.code(), Code::FailedPrecondition);
        let error = Error::from(openstack_client::Error::Metadata {
            url: "http://m".into(),
            reason: "answered HTTP 503".into(),
        });
        assert_eq!(
            error.to_string(),
            "metadata service http://m: answered HTTP 503"
        );
        assert_eq!(error.code(), Code::Unavailable);
    }
}
