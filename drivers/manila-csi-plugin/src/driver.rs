//! Assembling the services from a [`Config`] and serving them on the CSI endpoint.

use std::future::Future;
use std::sync::Arc;

use csi_proto::Listener;
use csi_proto::plugin_server::{bind_endpoint, serve_plugin};
use openstack_client::Connector;

use crate::config::Config;
use crate::controller::{Controller, ControllerSettings};
use crate::error::Result;
use crate::identity::{IdentityService, identity_service};
use crate::metadata::node_identity;
use crate::node::partner::Partner;
use crate::node::{NodeService, NodeSettings};
use crate::protocol::adapter_for;
use crate::pvc::ClaimReader;
use crate::wait::WaitPolicy;

/// The driver's services, ready to serve.
#[derive(Debug)]
pub struct Driver {
    identity: IdentityService,
    controller: Option<Controller>,
    node: Option<NodeService>,
}

impl Driver {
    /// Builds the services. With the node service on, this waits for the partner node
    /// plugin (`--partner-probe-timeout`) and fails if it never answers.
    pub async fn new(config: &Config) -> Result<Self> {
        config.validate()?;
        let claims = if config.pvc_annotations && config.provide_controller_service {
            Some(
                ClaimReader::connect(config.master.as_deref(), config.kubeconfig.as_deref())
                    .await?,
            )
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
        let controller = config.provide_controller_service.then(|| {
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
        let node = match (&partner, config.provide_node_service) {
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
            config.provide_controller_service,
            config.with_topology,
            partner,
        );
        Ok(Driver {
            identity,
            controller,
            node,
        })
    }

    /// Binds `endpoint` (replacing a stale unix socket).
    pub async fn bind(endpoint: &str) -> Result<Listener> {
        Ok(bind_endpoint(endpoint).await?)
    }

    /// Serves until `shutdown` resolves, each service behind a panic guard.
    pub async fn serve(self, listener: Listener, shutdown: impl Future<Output = ()>) -> Result<()> {
        Ok(serve_plugin(
            self.identity,
            self.controller,
            self.node,
            listener,
            shutdown,
        )
        .await?)
    }
}
