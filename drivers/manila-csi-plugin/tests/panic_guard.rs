//! The panic guard over a real unix socket: a handler that panics answers Internal naming
//! the method and the panic, and the connection keeps serving; without the guard the same
//! handler resets the stream and the caller learns nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use csi_proto::panic_guard::PanicGuard;
use csi_proto::v1::identity_client::IdentityClient;
use csi_proto::v1::identity_server::{Identity, IdentityServer};
use csi_proto::v1::{self};
use csi_proto::{Endpoint, Listener};
use tokio::sync::oneshot;
use tonic::transport::{Channel, Server};
use tonic::{Code, Request, Response, Status};

/// An Identity service whose GetPluginInfo has a bug.
#[derive(Clone)]
struct Buggy;

#[tonic::async_trait]
impl Identity for Buggy {
    async fn get_plugin_info(
        &self,
        _request: Request<v1::GetPluginInfoRequest>,
    ) -> Result<Response<v1::GetPluginInfoResponse>, Status> {
        let sizes: Vec<u64> = Vec::new();
        // An out-of-bounds index: the kind of bug the guard is for.
        let first = sizes[0];
        Ok(Response::new(v1::GetPluginInfoResponse {
            name: format!("size-{first}"),
            ..Default::default()
        }))
    }

    async fn get_plugin_capabilities(
        &self,
        _request: Request<v1::GetPluginCapabilitiesRequest>,
    ) -> Result<Response<v1::GetPluginCapabilitiesResponse>, Status> {
        Ok(Response::new(v1::GetPluginCapabilitiesResponse::default()))
    }

    async fn probe(
        &self,
        _request: Request<v1::ProbeRequest>,
    ) -> Result<Response<v1::ProbeResponse>, Status> {
        Ok(Response::new(v1::ProbeResponse { ready: Some(true) }))
    }
}

/// Serves `Buggy` on a unix socket in `dir`, guarded or not; a client and the shutdown.
async fn serve(
    dir: &std::path::Path,
    guarded: bool,
) -> (IdentityClient<Channel>, oneshot::Sender<()>) {
    let endpoint: Endpoint = format!("unix://{}", dir.join("csi.sock").display())
        .parse()
        .unwrap();
    let listener = Listener::bind(&endpoint).await.unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let shutdown = async {
        let _ = stopped.await;
    };
    if guarded {
        let router = Server::builder().add_service(PanicGuard::new(IdentityServer::new(Buggy)));
        tokio::spawn(async move { csi_proto::serve(router, listener, shutdown).await });
    } else {
        let router = Server::builder().add_service(IdentityServer::new(Buggy));
        tokio::spawn(async move { csi_proto::serve(router, listener, shutdown).await });
    }
    let channel = csi_proto::connect(&endpoint).await.unwrap();
    (IdentityClient::new(channel), stop)
}

#[tokio::test]
async fn a_panicking_handler_answers_internal_and_the_connection_keeps_serving() {
    let dir = tempfile::Builder::new()
        .prefix("panic-guard-")
        .tempdir()
        .unwrap();
    let (mut client, stop) = serve(dir.path(), true).await;
    for _ in 0..2 {
        let error = client
            .get_plugin_info(v1::GetPluginInfoRequest {})
            .await
            .unwrap_err();
        assert_eq!(error.code(), Code::Internal, "{error:?}");
        assert!(
            error
                .message()
                .contains("panicked serving /csi.v1.Identity/GetPluginInfo")
                && error.message().contains("index out of bounds"),
            "{}",
            error.message()
        );
        // The same channel (and connection) still serves.
        let probe = client.probe(v1::ProbeRequest {}).await.unwrap();
        assert_eq!(probe.into_inner().ready, Some(true));
    }
    let _ = stop.send(());
}

#[tokio::test]
async fn without_the_guard_the_caller_learns_nothing() {
    let dir = tempfile::Builder::new()
        .prefix("panic-guard-")
        .tempdir()
        .unwrap();
    let (mut client, stop) = serve(dir.path(), false).await;
    let error = client
        .get_plugin_info(v1::GetPluginInfoRequest {})
        .await
        .unwrap_err();
    assert_ne!(error.code(), Code::Internal, "{error:?}");
    assert!(!error.message().contains("panicked"), "{error:?}");
    let _ = stop.send(());
}
