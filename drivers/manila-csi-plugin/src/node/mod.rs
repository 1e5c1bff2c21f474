//! The Node service: every mount operation is forwarded to the partner node plugin with the
//! volume context and secrets replaced by what the protocol needs.

pub mod partner;
mod resolve;
pub mod stage_cache;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use csi_proto::capability::node_rpc;
use csi_proto::v1::node_server::Node;
use csi_proto::v1::node_service_capability::rpc;
use csi_proto::v1::{self, Topology};
use tonic::{Request, Response, Status};

use crate::controller::TOPOLOGY_KEY;
use crate::error::{Error, Result};
use crate::protocol::{PartnerVolume, ShareAdapter};
use crate::rpc_log::handle;
use openstack_client::Connector;
use partner::Partner;
use stage_cache::StageCache;

/// Settings of the node service.
#[derive(Debug, Clone)]
pub struct NodeSettings {
    /// NodeGetInfo's node id.
    pub node_id: String,
    /// NodeGetInfo's zone (only reported with topology).
    pub zone: Option<String>,
    /// `--runtime-config-file`.
    pub runtime_config_file: Option<PathBuf>,
}

/// The Node service.
#[derive(Debug, Clone)]
pub struct NodeService {
    settings: NodeSettings,
    partner: Partner,
    partner_capabilities: Arc<Vec<rpc::Type>>,
    connector: Arc<Connector>,
    adapter: Arc<dyn ShareAdapter>,
    cache: StageCache,
}

impl NodeService {
    /// Waits for the partner to answer Probe (up to `probe_timeout`), then mirrors its Node
    /// capabilities. Fails with a clear error when the partner never answers.
    pub async fn start(
        settings: NodeSettings,
        partner: Partner,
        probe_timeout: Duration,
        connector: Arc<Connector>,
        adapter: Arc<dyn ShareAdapter>,
    ) -> Result<Self> {
        partner.wait_ready(probe_timeout).await.map_err(|e| {
            Error::Unavailable(format!(
                "partner node plugin (--fwdendpoint {}) never became ready: {e}",
                partner.endpoint()
            ))
        })?;
        let capabilities = partner.node_capabilities().await?;
        tracing::info!(partner = %partner.endpoint(), ?capabilities, "partner node plugin ready");
        Ok(NodeService {
            settings,
            partner,
            partner_capabilities: Arc::new(capabilities),
            connector,
            adapter,
            cache: StageCache::default(),
        })
    }

    /// The stage cache (for inspection in tests).
    pub fn stage_cache(&self) -> &StageCache {
        &self.cache
    }

    fn partner_has(&self, capability: rpc::Type) -> bool {
        self.partner_capabilities.contains(&capability)
    }

    async fn resolve(
        &self,
        volume_id: &str,
        context: &HashMap<String, String>,
        secrets: &HashMap<String, String>,
    ) -> Result<PartnerVolume> {
        if secrets.is_empty() {
            return Err(Error::InvalidArgument(
                "secrets are required: the request carries no OpenStack credentials (node-stage/node-publish secret)".into(),
            ));
        }
        resolve::partner_volume(
            &self.connector,
            self.adapter.as_ref(),
            self.settings.runtime_config_file.as_deref(),
            volume_id,
            context,
            secrets,
        )
        .await
    }
}

fn require(field: &str, value: &str) -> Result<()> {
    if value.is_empty() {
        Err(Error::InvalidArgument(format!("{field}: required")))
    } else {
        Ok(())
    }
}

#[tonic::async_trait]
impl Node for NodeService {
    async fn node_stage_volume(
        &self,
        request: Request<v1::NodeStageVolumeRequest>,
    ) -> std::result::Result<Response<v1::NodeStageVolumeResponse>, Status> {
        handle(
            "NodeStageVolume",
            request.into_inner(),
            |request| async move {
                require("volume_id", &request.volume_id)?;
                require("staging_target_path", &request.staging_target_path)?;
                if request.volume_capability.is_none() {
                    return Err(Error::InvalidArgument("volume_capability: required".into()));
                }
                let volume = self
                    .resolve(
                        &request.volume_id,
                        &request.volume_context,
                        &request.secrets,
                    )
                    .await?;
                if self.partner_has(rpc::Type::StageUnstageVolume) {
                    let forwarded = v1::NodeStageVolumeRequest {
                        volume_context: volume.context.clone(),
                        secrets: volume.secrets.clone(),
                        ..request.clone()
                    };
                    self.partner
                        .node()
                        .node_stage_volume(forwarded)
                        .await
                        .map_err(Error::Partner)?;
                }
                self.cache.insert(&request.volume_id, volume);
                Ok(v1::NodeStageVolumeResponse {})
            },
        )
        .await
    }

    async fn node_unstage_volume(
        &self,
        request: Request<v1::NodeUnstageVolumeRequest>,
    ) -> std::result::Result<Response<v1::NodeUnstageVolumeResponse>, Status> {
        handle(
            "NodeUnstageVolume",
            request.into_inner(),
            |request| async move {
                require("volume_id", &request.volume_id)?;
                require("staging_target_path", &request.staging_target_path)?;
                if self.partner_has(rpc::Type::StageUnstageVolume) {
                    self.partner
                        .node()
                        .node_unstage_volume(request.clone())
                        .await
                        .map_err(Error::Partner)?;
                }
                self.cache.remove(&request.volume_id);
                Ok(v1::NodeUnstageVolumeResponse {})
            },
        )
        .await
    }

    async fn node_publish_volume(
        &self,
        request: Request<v1::NodePublishVolumeRequest>,
    ) -> std::result::Result<Response<v1::NodePublishVolumeResponse>, Status> {
        handle("NodePublishVolume", request.into_inner(), |request| async move {
            require("volume_id", &request.volume_id)?;
            require("target_path", &request.target_path)?;
            if request.volume_capability.is_none() {
                return Err(Error::InvalidArgument("volume_capability: required".into()));
            }
            let volume = match self.cache.get(&request.volume_id) {
                Some(volume) => volume,
                None => {
                    // Upstream rebuilds too (e.g. after a restart of this plugin).
                    tracing::warn!(volume_id = %request.volume_id, "not in the stage cache; resolving again");
                    require("staging_target_path", &request.staging_target_path)?;
                    let volume =
                        self.resolve(&request.volume_id, &request.volume_context, &request.secrets).await?;
                    self.cache.insert(&request.volume_id, volume.clone());
                    volume
                }
            };
            let staging_target_path = if self.partner_has(rpc::Type::StageUnstageVolume) {
                request.staging_target_path.clone()
            } else {
                String::new()
            };
            let forwarded = v1::NodePublishVolumeRequest {
                volume_context: volume.context,
                secrets: volume.secrets,
                staging_target_path,
                ..request
            };
            self.partner.node().node_publish_volume(forwarded).await.map_err(Error::Partner)?;
            Ok(v1::NodePublishVolumeResponse {})
        })
        .await
    }

    async fn node_unpublish_volume(
        &self,
        request: Request<v1::NodeUnpublishVolumeRequest>,
    ) -> std::result::Result<Response<v1::NodeUnpublishVolumeResponse>, Status> {
        handle(
            "NodeUnpublishVolume",
            request.into_inner(),
            |request| async move {
                require("volume_id", &request.volume_id)?;
                require("target_path", &request.target_path)?;
                self.partner
                    .node()
                    .node_unpublish_volume(request)
                    .await
                    .map_err(Error::Partner)?;
                Ok(v1::NodeUnpublishVolumeResponse {})
            },
        )
        .await
    }

    async fn node_get_volume_stats(
        &self,
        request: Request<v1::NodeGetVolumeStatsRequest>,
    ) -> std::result::Result<Response<v1::NodeGetVolumeStatsResponse>, Status> {
        handle(
            "NodeGetVolumeStats",
            request.into_inner(),
            |request| async move {
                if !self.partner_has(rpc::Type::GetVolumeStats) {
                    return Err(Error::Unimplemented(
                        "NodeGetVolumeStats: the partner node plugin does not support it".into(),
                    ));
                }
                require("volume_id", &request.volume_id)?;
                require("volume_path", &request.volume_path)?;
                let response = self
                    .partner
                    .node()
                    .node_get_volume_stats(request)
                    .await
                    .map_err(Error::Partner)?;
                Ok(response.into_inner())
            },
        )
        .await
    }

    async fn node_expand_volume(
        &self,
        _request: Request<v1::NodeExpandVolumeRequest>,
    ) -> std::result::Result<Response<v1::NodeExpandVolumeResponse>, Status> {
        Err(Status::unimplemented(
            "NodeExpandVolume is not supported: shares grow on the server",
        ))
    }

    async fn node_get_capabilities(
        &self,
        request: Request<v1::NodeGetCapabilitiesRequest>,
    ) -> std::result::Result<Response<v1::NodeGetCapabilitiesResponse>, Status> {
        handle("NodeGetCapabilities", request.into_inner(), |_| async {
            // Staging is always advertised: NodeStage is where the share is resolved. The
            // partner's other capabilities are mirrored, except node expansion.
            let mut kinds = vec![rpc::Type::StageUnstageVolume];
            for kind in self.partner_capabilities.iter() {
                if !kinds.contains(kind) && *kind != rpc::Type::ExpandVolume {
                    kinds.push(*kind);
                }
            }
            Ok(v1::NodeGetCapabilitiesResponse {
                capabilities: kinds.into_iter().map(node_rpc).collect(),
            })
        })
        .await
    }

    async fn node_get_info(
        &self,
        request: Request<v1::NodeGetInfoRequest>,
    ) -> std::result::Result<Response<v1::NodeGetInfoResponse>, Status> {
        handle("NodeGetInfo", request.into_inner(), |_| async {
            Ok(v1::NodeGetInfoResponse {
                node_id: self.settings.node_id.clone(),
                max_volumes_per_node: 0,
                accessible_topology: self.settings.zone.as_ref().map(|zone| Topology {
                    segments: HashMap::from([(TOPOLOGY_KEY.to_string(), zone.clone())]),
                }),
            })
        })
        .await
    }
}
