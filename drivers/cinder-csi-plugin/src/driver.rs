//! Assembling the services from a [`Config`] and the cloud config, and serving them on the
//! CSI endpoint.

use std::sync::Arc;
use std::time::Duration;

use csi_proto::plugin_server::PluginServices;

use crate::cloud_config::CloudConfig;
use crate::config::Config;
use crate::controller::{Controller, ControllerSettings, TOPOLOGY_ZONE_KEY};
use crate::error::{Error, Result};
use crate::identity::{IdentityService, identity_service};
use crate::node::{NodeService, NodeSettings, device};
use crate::wait::WaitPolicy;

/// How long reading the instance metadata may take at start-up.
const METADATA_TIMEOUT: Duration = Duration::from_secs(10);

/// The driver's services, ready to serve ([`PluginServices::bind`], [`PluginServices::serve`]).
pub type Driver = PluginServices<IdentityService, Controller, NodeService>;

/// Builds the services: reads the cloud config, and for the node service the node id
/// and zone (`--nodeid`, else the instance metadata).
pub async fn build(config: &Config) -> Result<Driver> {
    config.validate()?;
    let cloud_config = CloudConfig::load(&config.cloud_config)?;
    let controller = if config.services.provide_controller_service {
        let claims = config.claims.reader().await?;
        let cloud = Arc::new(crate::cloud::connect(cloud_config.global.clone())?);
        Some(Controller::new(
            cloud,
            ControllerSettings {
                cluster: config.cluster.clone(),
                with_topology: config.with_topology,
                ignore_volume_az: cloud_config.block_storage.ignore_volume_az,
                wait: WaitPolicy::default(),
                claims,
            },
        ))
    } else {
        None
    };
    let node = if config.services.provide_node_service {
        let nodeid = config.nodeid.clone().filter(|n| !n.is_empty());
        let (node_id, zone) = match (nodeid, config.with_topology) {
            (Some(id), false) => (id, None),
            (nodeid, with_topology) => {
                let metadata = crate::metadata::fetch(
                    &cloud_config.search_order,
                    &config.metadata_url,
                    METADATA_TIMEOUT,
                )
                .await?;
                let id = nodeid.unwrap_or(metadata.uuid);
                if id.is_empty() {
                    return Err(Error::NotFound(
                        "the instance metadata has no uuid and --nodeid is not given".into(),
                    ));
                }
                let zone = (with_topology && !metadata.availability_zone.is_empty())
                    .then_some(metadata.availability_zone);
                (id, zone)
            }
        };
        tracing::info!(node_id, zone = ?zone, key = TOPOLOGY_ZONE_KEY, "node identity");
        Some(NodeService::new(NodeSettings {
            node_id,
            zone,
            additional_topology: config.additional_topology(),
            max_volumes_per_node: cloud_config.block_storage.node_volume_attach_limit,
            disk_dir: device::disk_by_id_dir_from_env(),
            rescan_on_resize: cloud_config.block_storage.rescan_on_resize,
        }))
    } else {
        None
    };
    Ok(Driver {
        identity: identity_service(controller.is_some(), config.with_topology),
        controller,
        node,
    })
}
