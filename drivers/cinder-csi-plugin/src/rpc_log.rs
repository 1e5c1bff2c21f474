//! RPC logging with secrets redacted: [`csi_proto::rpc_log::handle`], shared with the other
//! driver, with this crate's [`Error`](crate::Error) as the handlers' error type (so that
//! handlers answering `Ok(…)` need no annotation).

use std::fmt::Debug;
use std::future::Future;

use csi_proto::rpc_log::Redact;
use tonic::{Response, Status};

use crate::error::Result;

/// Runs one RPC handler: see [`csi_proto::rpc_log::handle`].
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
    csi_proto::rpc_log::handle(method, request, handler).await
}
