//! The CSI Identity service.

use csi_proto::v1::identity_server::Identity;
use csi_proto::v1::plugin_capability::{self, service, volume_expansion};
use csi_proto::v1::{self, PluginCapability};
use tonic::{Request, Response, Status};

use crate::config::DRIVER_NAME;
use crate::rpc_log::handle;

/// Identity: plugin info, capabilities and an always-ready Probe.
#[derive(Debug, Clone)]
pub struct IdentityService {
    controller: bool,
    with_topology: bool,
}

impl IdentityService {
    /// The capabilities follow the services served and `--with-topology`.
    pub fn new(controller: bool, with_topology: bool) -> Self {
        IdentityService {
            controller,
            with_topology,
        }
    }
}

fn service(kind: service::Type) -> PluginCapability {
    PluginCapability {
        r#type: Some(plugin_capability::Type::Service(
            plugin_capability::Service {
                r#type: kind as i32,
            },
        )),
    }
}

#[tonic::async_trait]
impl Identity for IdentityService {
    async fn get_plugin_info(
        &self,
        request: Request<v1::GetPluginInfoRequest>,
    ) -> Result<Response<v1::GetPluginInfoResponse>, Status> {
        handle("GetPluginInfo", request.into_inner(), |_| async {
            Ok(v1::GetPluginInfoResponse {
                name: DRIVER_NAME.into(),
                vendor_version: env!("CARGO_PKG_VERSION").into(),
                manifest: Default::default(),
            })
        })
        .await
    }

    async fn get_plugin_capabilities(
        &self,
        request: Request<v1::GetPluginCapabilitiesRequest>,
    ) -> Result<Response<v1::GetPluginCapabilitiesResponse>, Status> {
        handle("GetPluginCapabilities", request.into_inner(), |_| async {
            let mut capabilities = Vec::new();
            if self.controller {
                capabilities.push(service(service::Type::ControllerService));
            }
            capabilities.push(PluginCapability {
                r#type: Some(plugin_capability::Type::VolumeExpansion(
                    plugin_capability::VolumeExpansion {
                        r#type: volume_expansion::Type::Online as i32,
                    },
                )),
            });
            if self.with_topology {
                capabilities.push(service(service::Type::VolumeAccessibilityConstraints));
            }
            Ok(v1::GetPluginCapabilitiesResponse { capabilities })
        })
        .await
    }

    async fn probe(
        &self,
        request: Request<v1::ProbeRequest>,
    ) -> Result<Response<v1::ProbeResponse>, Status> {
        handle("Probe", request.into_inner(), |_| async {
            Ok(v1::ProbeResponse { ready: Some(true) })
        })
        .await
    }
}
