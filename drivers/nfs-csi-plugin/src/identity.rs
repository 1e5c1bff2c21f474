//! The Identity service.

use csi_proto::v1::{
    GetPluginCapabilitiesRequest, GetPluginCapabilitiesResponse, GetPluginInfoRequest,
    GetPluginInfoResponse, ProbeRequest, ProbeResponse, identity_server::Identity,
};
use tonic::{Request, Response, Status};

/// Names the plugin and reports it ready. A node-only plugin advertises no plugin
/// capabilities (no Controller service, no topology).
#[derive(Debug, Clone)]
pub struct IdentityService {
    name: String,
}

impl IdentityService {
    /// `name` is what GetPluginInfo returns (`--drivername`).
    pub fn new(name: impl Into<String>) -> Self {
        Self { name: name.into() }
    }
}

#[tonic::async_trait]
impl Identity for IdentityService {
    async fn get_plugin_info(
        &self,
        _: Request<GetPluginInfoRequest>,
    ) -> Result<Response<GetPluginInfoResponse>, Status> {
        Ok(Response::new(GetPluginInfoResponse {
            name: self.name.clone(),
            vendor_version: env!("CARGO_PKG_VERSION").to_owned(),
            manifest: Default::default(),
        }))
    }

    async fn get_plugin_capabilities(
        &self,
        _: Request<GetPluginCapabilitiesRequest>,
    ) -> Result<Response<GetPluginCapabilitiesResponse>, Status> {
        Ok(Response::new(GetPluginCapabilitiesResponse::default()))
    }

    async fn probe(&self, _: Request<ProbeRequest>) -> Result<Response<ProbeResponse>, Status> {
        // The mounter was checked at start-up; nothing can become unready later.
        Ok(Response::new(ProbeResponse { ready: Some(true) }))
    }
}
