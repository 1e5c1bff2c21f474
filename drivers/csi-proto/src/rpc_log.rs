//! Logging of every RPC of a CSI plugin with its secrets stripped (Probe, which liveness
//! probes call constantly, only at debug level), and the one place where a handler's error
//! becomes a `tonic::Status`. Shared by the workspace's drivers.

use std::fmt::Debug;
use std::future::Future;
use std::time::Instant;

use tonic::{Response, Status};

use crate::v1;

/// A request message whose `secrets` must not be logged.
pub trait Redact: Debug {
    /// A copy fit for logs: secret values replaced, keys kept.
    fn redacted(&self) -> Self;
}

/// What a secret value is replaced with in logs.
pub const REDACTED: &str = "[redacted]";

macro_rules! redact_secrets {
    ($($message:ty),* $(,)?) => {$(
        impl Redact for $message {
            fn redacted(&self) -> Self {
                let mut copy = self.clone();
                for value in copy.secrets.values_mut() {
                    *value = REDACTED.into();
                }
                copy
            }
        }
    )*};
}

macro_rules! no_secrets {
    ($($message:ty),* $(,)?) => {$(
        impl Redact for $message {
            fn redacted(&self) -> Self {
                self.clone()
            }
        }
    )*};
}

redact_secrets!(
    v1::CreateVolumeRequest,
    v1::DeleteVolumeRequest,
    v1::ControllerPublishVolumeRequest,
    v1::ControllerUnpublishVolumeRequest,
    v1::ValidateVolumeCapabilitiesRequest,
    v1::ListSnapshotsRequest,
    v1::CreateSnapshotRequest,
    v1::DeleteSnapshotRequest,
    v1::ControllerExpandVolumeRequest,
    v1::ControllerModifyVolumeRequest,
    v1::NodeStageVolumeRequest,
    v1::NodePublishVolumeRequest,
    v1::NodeExpandVolumeRequest,
);

no_secrets!(
    v1::GetCapacityRequest,
    v1::GetPluginInfoRequest,
    v1::GetPluginCapabilitiesRequest,
    v1::ProbeRequest,
    v1::ListVolumesRequest,
    v1::ControllerGetVolumeRequest,
    v1::ControllerGetCapabilitiesRequest,
    v1::NodeUnstageVolumeRequest,
    v1::NodeUnpublishVolumeRequest,
    v1::NodeGetVolumeStatsRequest,
    v1::NodeGetCapabilitiesRequest,
    v1::NodeGetInfoRequest,
);

/// Runs one RPC handler: logs the call (redacted), its outcome and duration (`Probe` at
/// debug level, everything else at info; errors at warn), and maps the handler's error to a
/// status.
pub async fn handle<Req, Resp, E, Fut>(
    method: &'static str,
    request: Req,
    handler: impl FnOnce(Req) -> Fut,
) -> Result<Response<Resp>, Status>
where
    Req: Redact,
    Resp: Debug,
    E: Into<Status>,
    Fut: Future<Output = Result<Resp, E>>,
{
    let quiet = method == "Probe";
    if quiet {
        tracing::debug!(method, request = ?request.redacted(), "gRPC call");
    } else {
        tracing::info!(method, request = ?request.redacted(), "gRPC call");
    }
    let started = Instant::now();
    let outcome = handler(request).await;
    let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
    match outcome {
        Ok(response) => {
            if quiet {
                tracing::debug!(method, elapsed_ms, "gRPC ok");
            } else {
                tracing::info!(method, elapsed_ms, response = ?response, "gRPC ok");
            }
            Ok(Response::new(response))
        }
        Err(error) => {
            let status: Status = error.into();
            tracing::warn!(method, elapsed_ms, code = ?status.code(), message = status.message(), "gRPC error");
            Err(status)
        }
    }
}

/// Defines `handle` in the invoking module: [`handle`] with the handlers' error type fixed
/// to the given one (so that handlers answering `Ok(…)` need no annotation). A driver
/// invokes it once with its own error type, e.g. `csi_proto::rpc_handle_for!(crate::Error);`
/// (the invoking crate depends on `tonic`).
#[macro_export]
macro_rules! rpc_handle_for {
    ($error:ty) => {
        /// Runs one RPC handler: see [`csi_proto::rpc_log::handle`].
        pub async fn handle<Req, Resp, Fut>(
            method: &'static str,
            request: Req,
            handler: impl FnOnce(Req) -> Fut,
        ) -> ::std::result::Result<::tonic::Response<Resp>, ::tonic::Status>
        where
            Req: $crate::rpc_log::Redact,
            Resp: ::std::fmt::Debug,
            Fut: ::std::future::Future<Output = ::std::result::Result<Resp, $error>>,
        {
            $crate::rpc_log::handle(method, request, handler).await
        }
    };
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use tonic::Code;

    use super::*;

    #[test]
    fn secret_values_are_replaced_and_keys_kept() {
        let request = v1::NodeStageVolumeRequest {
            volume_id: "vol-1".into(),
            secrets: HashMap::from([("os-password".to_string(), "hunter2".to_string())]),
            ..Default::default()
        };
        let logged = format!("{:?}", request.redacted());
        assert!(!logged.contains("hunter2"), "{logged}");
        assert!(logged.contains("os-password") && logged.contains(REDACTED));
        assert!(logged.contains("vol-1"));
    }

    #[tokio::test]
    async fn the_handlers_error_becomes_its_status() {
        let ok = handle("NodeGetInfo", v1::NodeGetInfoRequest {}, |_| async {
            Ok::<_, Status>(v1::NodeGetInfoResponse::default())
        })
        .await;
        assert!(ok.is_ok());
        let failed = handle("Probe", v1::ProbeRequest {}, |_| async {
            Err::<v1::ProbeResponse, _>(Status::unavailable("not yet"))
        })
        .await;
        let status = failed.err().map(|s| (s.code(), s.message().to_string()));
        assert_eq!(status, Some((Code::Unavailable, "not yet".to_string())));
    }
}
