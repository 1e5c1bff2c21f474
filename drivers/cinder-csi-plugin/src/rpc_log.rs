//! Logging of every RPC with secrets stripped (Probe kept quiet), and the one place where a
//! handler's [`Error`](crate::Error) becomes a `tonic::Status`.

use std::fmt::Debug;
use std::future::Future;
use std::time::Instant;

use csi_proto::v1;
use tonic::{Response, Status};

use crate::error::Result;

/// A request message whose `secrets` must not be logged.
pub trait Redact: Debug {
    /// A copy fit for logs: secret values replaced, keys kept.
    fn redacted(&self) -> Self;
}

macro_rules! redact {
    (secrets: $($with:ty),* ; none: $($without:ty),* $(,)?) => {
        $(impl Redact for $with {
            fn redacted(&self) -> Self {
                let mut copy = self.clone();
                for value in copy.secrets.values_mut() {
                    *value = "[redacted]".into();
                }
                copy
            }
        })*
        $(impl Redact for $without {
            fn redacted(&self) -> Self {
                self.clone()
            }
        })*
    };
}

redact!(
    secrets: v1::CreateVolumeRequest, v1::DeleteVolumeRequest,
    v1::ControllerPublishVolumeRequest, v1::ControllerUnpublishVolumeRequest,
    v1::ValidateVolumeCapabilitiesRequest, v1::ListSnapshotsRequest,
    v1::CreateSnapshotRequest, v1::DeleteSnapshotRequest, v1::ControllerExpandVolumeRequest,
    v1::ControllerModifyVolumeRequest, v1::NodeStageVolumeRequest,
    v1::NodePublishVolumeRequest, v1::NodeExpandVolumeRequest;
    none: v1::GetCapacityRequest, v1::GetPluginInfoRequest, v1::GetPluginCapabilitiesRequest,
    v1::ProbeRequest, v1::ListVolumesRequest, v1::ControllerGetVolumeRequest,
    v1::ControllerGetCapabilitiesRequest, v1::NodeUnstageVolumeRequest,
    v1::NodeUnpublishVolumeRequest, v1::NodeGetVolumeStatsRequest,
    v1::NodeGetCapabilitiesRequest, v1::NodeGetInfoRequest,
);

/// Runs one handler: logs the call and its outcome, maps the error to a status.
pub async fn handle<Req, Resp, Fut>(
    method: &'static str,
    request: Req,
    handler: impl FnOnce(Req) -> Fut,
) -> std::result::Result<Response<Resp>, Status>
where
    Req: Redact,
    Resp: Debug,
    Fut: Future<Output = Result<Resp>>,
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
            if !quiet {
                tracing::info!(method, elapsed_ms, response = ?response, "gRPC ok");
            }
            Ok(Response::new(response))
        }
        Err(error) => {
            let status = Status::from(error);
            tracing::warn!(method, elapsed_ms, code = ?status.code(), message = status.message(), "gRPC error");
            Err(status)
        }
    }
}
