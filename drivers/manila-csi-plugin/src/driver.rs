//! Assembling the services from a [`Config`] and serving them on the CSI endpoint.

use std::sync::Arc;

use csi_proto::plugin_server::PluginServices;
use openstack_client::Connector;

use crate::config::Config;
use crate::controller::{Controller, ControllerSettings};
use crate::error::Result;
use crate::identity::{IdentityService, identity_service};
use crate::metadata::node_identity;
use crate::node::partner::Partner;
use crate::node::{NodeService, NodeSettings};
use crate::protocol::adapter_for;
use crate::wait::WaitPolicy;

/// The driver's services, ready to serve ([`PluginServices::bind`], [`PluginServices::serve`]).
pub type Driver = PluginServices<IdentityService, Controller, NodeService>;

/// Builds the services. With the node service on, this waits for the partner node
/// plugin (`--partner-probe-timeout`) and fails if it never answers.
pub async fn build(config: &Config) -> Result<Driver> {
    config.validate()?;
    let claims = if config.services.provide_controller_service {
        config.claims.reader().await?
    } else {
        None
    };
    let mut user_agent = format!("manila-csi-plugin/{}", env!("CARGO_PKG_VERSION"));
    for extra in &config.user_agent {
        user_agent.push(' ');
        user_agent.push_str(extra);
    }
    let connector = Arc::new(Connector::new(user_agent).with_auth_timeout(config.auth_timeout));
    let adapter = adapter_for(config.share_protocol_selector);
    let partner = match config.fwdendpoint.as_deref().filter(|e| !e.is_empty()) {
        Some(endpoint) => Some(Partner::lazy(endpoint)?),
        None => None,
    };
    let controller = config.services.provide_controller_service.then(|| {
        Controller::new(
            connector.clone(),
            adapter.clone(),
            ControllerSettings {
                driver_name: config.drivername.clone(),
                cluster_id: config.cluster_id.clone(),
                with_topology: config.with_topology,
                runtime_config_file: config.runtime_config_file.clone(),
                wait: WaitPolicy::with_deadline(config.share_wait_timeout),
                claims,
            },
        )
    });
    let node = match (&partner, config.services.provide_node_service) {
        (Some(partner), true) => {
            let identity = node_identity(
                config.nodeid.as_deref(),
                config.nodeaz.as_deref(),
                config.with_topology,
                &config.metadata_url,
                config.metadata_timeout,
            )
            .await?;
            tracing::info!(node_id = %identity.node_id, zone = ?identity.zone, "node identity");
            Some(
                NodeService::start(
                    NodeSettings {
                        node_id: identity.node_id,
                        zone: identity.zone,
                        runtime_config_file: config.runtime_config_file.clone(),
                    },
                    partner.clone(),
                    config.partner_probe_timeout,
                    connector.clone(),
                    adapter.clone(),
                )
                .await?,
            )
        }
        _ => None,
    };
    let identity = identity_service(
        config.drivername.clone(),
        config.services.provide_controller_service,
        config.with_topology,
        partner,
    );
    Ok(Driver {
        identity,
        controller,
        node,
    })
}
