//! The connections and advertised capabilities of a run ([`Session`]), fetched once and
//! shared by every case.

use csi_proto::v1::controller_client::ControllerClient;
use csi_proto::v1::identity_client::IdentityClient;
use csi_proto::v1::node_client::NodeClient;
use csi_proto::v1::plugin_capability::{self, service};
use csi_proto::v1::{
    self, PluginCapability, controller_service_capability, node_service_capability,
};
use tonic::Code;
use tonic::transport::Channel;

use super::config::SanityConfig;
use super::error::{Error, Result};
use super::verdict::describe_status;

/// A controller RPC capability.
pub type ControllerCap = controller_service_capability::rpc::Type;
/// A node RPC capability.
pub type NodeCap = node_service_capability::rpc::Type;

/// Whether a service is there, and what it advertises.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Service<T> {
    /// Served, with these RPC capabilities.
    Available(Vec<T>),
    /// Not offered by the plugin (its cases are skipped with this reason).
    Absent(String),
    /// Offered but its GetCapabilities failed (its cases fail with this).
    Broken(String),
}

impl<T: PartialEq> Service<T> {
    pub(crate) fn has(&self, capability: &T) -> bool {
        matches!(self, Service::Available(caps) if caps.contains(capability))
    }
}

/// Connections and capabilities, fetched once per run.
#[derive(Debug)]
pub struct Session {
    pub(crate) config: SanityConfig,
    pub(crate) node_channel: Channel,
    pub(crate) controller_channel: Channel,
    /// Plugin capabilities advertised on the (node) endpoint.
    pub plugin_capabilities: Vec<PluginCapability>,
    /// The Controller service.
    pub controller: Service<ControllerCap>,
    /// The Node service.
    pub node: Service<NodeCap>,
    /// Appended to every name the run gives (volumes, snapshots), like csi-sanity's.
    pub suffix: String,
}

fn endpoint_error(endpoint: &csi_proto::Endpoint, reason: String) -> Error {
    Error::Endpoint {
        endpoint: endpoint.to_string(),
        reason,
    }
}

fn advertises_controller(capabilities: &[PluginCapability]) -> bool {
    capabilities.iter().any(|c| {
        matches!(&c.r#type, Some(plugin_capability::Type::Service(s))
            if s.r#type == service::Type::ControllerService as i32)
    })
}

impl Session {
    /// Connects to the endpoint(s) and asks for their capabilities. Fails only when the
    /// endpoint cannot be reached or its Identity service does not answer.
    pub async fn connect(config: SanityConfig) -> Result<Self> {
        config.validate()?;
        let node_channel = csi_proto::connect(&config.endpoint)
            .await
            .map_err(|e| endpoint_error(&config.endpoint, e.to_string()))?;
        let controller_channel = match &config.controller_endpoint {
            None => node_channel.clone(),
            Some(endpoint) => csi_proto::connect(endpoint)
                .await
                .map_err(|e| endpoint_error(endpoint, e.to_string()))?,
        };
        let plugin_capabilities = IdentityClient::new(node_channel.clone())
            .get_plugin_capabilities(v1::GetPluginCapabilitiesRequest {})
            .await
            .map_err(|s| {
                endpoint_error(
                    &config.endpoint,
                    format!("GetPluginCapabilities failed: {}", describe_status(&s)),
                )
            })?
            .into_inner()
            .capabilities;
        let controller_offered = match &config.controller_endpoint {
            Some(_) => true,
            None => advertises_controller(&plugin_capabilities),
        };
        let controller = if controller_offered {
            match ControllerClient::new(controller_channel.clone())
                .controller_get_capabilities(v1::ControllerGetCapabilitiesRequest {})
                .await
            {
                Ok(response) => Service::Available(
                    response
                        .into_inner()
                        .capabilities
                        .iter()
                        .filter_map(|c| match &c.r#type {
                            Some(controller_service_capability::Type::Rpc(rpc)) => {
                                ControllerCap::try_from(rpc.r#type).ok()
                            }
                            None => None,
                        })
                        .collect(),
                ),
                Err(status) => Service::Broken(format!(
                    "ControllerGetCapabilities failed: {}",
                    describe_status(&status)
                )),
            }
        } else {
            Service::Absent(
                "the plugin does not advertise CONTROLLER_SERVICE and no controller endpoint was given"
                    .into(),
            )
        };
        let node = match NodeClient::new(node_channel.clone())
            .node_get_capabilities(v1::NodeGetCapabilitiesRequest {})
            .await
        {
            Ok(response) => Service::Available(
                response
                    .into_inner()
                    .capabilities
                    .iter()
                    .filter_map(|c| match &c.r#type {
                        Some(node_service_capability::Type::Rpc(rpc)) => {
                            NodeCap::try_from(rpc.r#type).ok()
                        }
                        None => None,
                    })
                    .collect(),
            ),
            Err(status) if status.code() == Code::Unimplemented => Service::Absent(format!(
                "the endpoint has no Node service (NodeGetCapabilities: {})",
                status.message()
            )),
            Err(status) => Service::Broken(format!(
                "NodeGetCapabilities failed: {}",
                describe_status(&status)
            )),
        };
        let random = uuid::Uuid::new_v4().simple().to_string().to_uppercase();
        Ok(Session {
            suffix: format!("-{}-{}", &random[..8], &random[8..16]),
            config,
            node_channel,
            controller_channel,
            plugin_capabilities,
            controller,
            node,
        })
    }

    /// The run's configuration.
    pub fn config(&self) -> &SanityConfig {
        &self.config
    }

    /// True when the plugin advertises the plugin service capability `kind`.
    pub fn has_plugin_service(&self, kind: service::Type) -> bool {
        self.plugin_capabilities.iter().any(|c| {
            matches!(&c.r#type, Some(plugin_capability::Type::Service(s)) if s.r#type == kind as i32)
        })
    }
}
