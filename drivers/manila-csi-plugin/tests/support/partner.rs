//! A fake partner node plugin: Identity + Node on a unix socket, recording every request.

use std::sync::{Arc, Mutex};

use csi_proto::v1::identity_server::{Identity, IdentityServer};
use csi_proto::v1::node_server::{Node, NodeServer};
use csi_proto::v1::node_service_capability::{self, rpc};
use csi_proto::v1::{self, NodeServiceCapability};
use csi_proto::{Endpoint, Listener};
use tokio::sync::oneshot;
use tonic::transport::Server;
use tonic::{Request, Response, Status};

/// A request the partner received.
#[derive(Debug, Clone)]
pub enum Call {
    Stage(v1::NodeStageVolumeRequest),
    Unstage(v1::NodeUnstageVolumeRequest),
    Publish(v1::NodePublishVolumeRequest),
    Unpublish(v1::NodeUnpublishVolumeRequest),
    Stats(v1::NodeGetVolumeStatsRequest),
}

#[derive(Clone)]
struct State {
    calls: Arc<Mutex<Vec<Call>>>,
    capabilities: Vec<rpc::Type>,
}

pub struct FakePartner {
    pub endpoint: String,
    calls: Arc<Mutex<Vec<Call>>>,
    shutdown: Option<oneshot::Sender<()>>,
}

impl FakePartner {
    pub async fn start(socket: &std::path::Path, capabilities: Vec<rpc::Type>) -> Self {
        let endpoint = format!("unix://{}", socket.display());
        let parsed: Endpoint = endpoint.parse().unwrap();
        let listener = Listener::bind(&parsed).await.unwrap();
        let calls = Arc::new(Mutex::new(Vec::new()));
        let state = State {
            calls: calls.clone(),
            capabilities,
        };
        let (tx, rx) = oneshot::channel();
        let router = Server::builder()
            .add_service(IdentityServer::new(state.clone()))
            .add_service(NodeServer::new(state));
        tokio::spawn(async move {
            let _ = csi_proto::serve(router, listener, async {
                let _ = rx.await;
            })
            .await;
        });
        FakePartner {
            endpoint,
            calls,
            shutdown: Some(tx),
        }
    }

    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    pub fn stop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

impl Drop for FakePartner {
    fn drop(&mut self) {
        self.stop();
    }
}

impl State {
    fn record(&self, call: Call) {
        self.calls.lock().unwrap().push(call);
    }
}

#[tonic::async_trait]
impl Identity for State {
    async fn get_plugin_info(
        &self,
        _: Request<v1::GetPluginInfoRequest>,
    ) -> Result<Response<v1::GetPluginInfoResponse>, Status> {
        Ok(Response::new(v1::GetPluginInfoResponse {
            name: "fake.partner".into(),
            vendor_version: "0".into(),
            manifest: Default::default(),
        }))
    }
    async fn get_plugin_capabilities(
        &self,
        _: Request<v1::GetPluginCapabilitiesRequest>,
    ) -> Result<Response<v1::GetPluginCapabilitiesResponse>, Status> {
        Ok(Response::new(v1::GetPluginCapabilitiesResponse {
            capabilities: vec![],
        }))
    }
    async fn probe(
        &self,
        _: Request<v1::ProbeRequest>,
    ) -> Result<Response<v1::ProbeResponse>, Status> {
        Ok(Response::new(v1::ProbeResponse { ready: Some(true) }))
    }
}

#[tonic::async_trait]
impl Node for State {
    async fn node_stage_volume(
        &self,
        request: Request<v1::NodeStageVolumeRequest>,
    ) -> Result<Response<v1::NodeStageVolumeResponse>, Status> {
        self.record(Call::Stage(request.into_inner()));
        Ok(Response::new(v1::NodeStageVolumeResponse {}))
    }
    async fn node_unstage_volume(
        &self,
        request: Request<v1::NodeUnstageVolumeRequest>,
    ) -> Result<Response<v1::NodeUnstageVolumeResponse>, Status> {
        self.record(Call::Unstage(request.into_inner()));
        Ok(Response::new(v1::NodeUnstageVolumeResponse {}))
    }
    async fn node_publish_volume(
        &self,
        request: Request<v1::NodePublishVolumeRequest>,
    ) -> Result<Response<v1::NodePublishVolumeResponse>, Status> {
        self.record(Call::Publish(request.into_inner()));
        Ok(Response::new(v1::NodePublishVolumeResponse {}))
    }
    async fn node_unpublish_volume(
        &self,
        request: Request<v1::NodeUnpublishVolumeRequest>,
    ) -> Result<Response<v1::NodeUnpublishVolumeResponse>, Status> {
        self.record(Call::Unpublish(request.into_inner()));
        Ok(Response::new(v1::NodeUnpublishVolumeResponse {}))
    }
    async fn node_get_volume_stats(
        &self,
        request: Request<v1::NodeGetVolumeStatsRequest>,
    ) -> Result<Response<v1::NodeGetVolumeStatsResponse>, Status> {
        self.record(Call::Stats(request.into_inner()));
        Ok(Response::new(v1::NodeGetVolumeStatsResponse {
            usage: vec![v1::VolumeUsage {
                available: 1,
                total: 2,
                used: 1,
                unit: 1,
            }],
            volume_condition: None,
        }))
    }
    async fn node_expand_volume(
        &self,
        _: Request<v1::NodeExpandVolumeRequest>,
    ) -> Result<Response<v1::NodeExpandVolumeResponse>, Status> {
        Err(Status::unimplemented("fake partner"))
    }
    async fn node_get_capabilities(
        &self,
        _: Request<v1::NodeGetCapabilitiesRequest>,
    ) -> Result<Response<v1::NodeGetCapabilitiesResponse>, Status> {
        Ok(Response::new(v1::NodeGetCapabilitiesResponse {
            capabilities: self
                .capabilities
                .iter()
                .map(|kind| NodeServiceCapability {
                    r#type: Some(node_service_capability::Type::Rpc(
                        node_service_capability::Rpc {
                            r#type: *kind as i32,
                        },
                    )),
                })
                .collect(),
        }))
    }
    async fn node_get_info(
        &self,
        _: Request<v1::NodeGetInfoRequest>,
    ) -> Result<Response<v1::NodeGetInfoResponse>, Status> {
        Ok(Response::new(v1::NodeGetInfoResponse {
            node_id: "partner".into(),
            ..Default::default()
        }))
    }
}
