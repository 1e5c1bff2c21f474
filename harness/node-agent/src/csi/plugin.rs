//! Registering one plugin found in `plugins_registry`: GetInfo, validation, NodeGetInfo, the
//! API updates, and NotifyRegistrationStatus with the outcome.

use std::path::{Path, PathBuf};
use std::time::Duration;

use csi_proto::Endpoint;
use csi_proto::registration::CSI_PLUGIN_TYPE;
use csi_proto::registration::v1::registration_client::RegistrationClient;
use csi_proto::registration::v1::{InfoRequest, PluginInfo, RegistrationStatus};
use csi_proto::v1::NodeGetInfoRequest;
use csi_proto::v1::node_client::NodeClient;
use kube::Client;

use super::csinode::{self, DriverNodeInfo};
use super::error::{Error, Result};
use super::{PluginPaths, RegisteredDriver};

/// How long each gRPC call to a plugin may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Registers the plugin behind `socket`, tells it the outcome, and returns the driver.
pub(super) async fn register(
    client: &Client,
    node_name: &str,
    paths: &PluginPaths,
    socket: &Path,
) -> Result<RegisteredDriver> {
    let endpoint = Endpoint::Unix(socket.to_owned());
    let channel = csi_proto::connect(&endpoint)
        .await
        .map_err(|source| Error::Connect {
            endpoint: endpoint.to_string(),
            source,
        })?;
    let mut registration = RegistrationClient::new(channel);
    let info = call("GetInfo", &endpoint, registration.get_info(InfoRequest {})).await?;
    let outcome = match validate(socket, &info) {
        Ok(version) => install(client, node_name, paths, socket, &info, version)
            .await
            .map_err(|e| {
                format!(
                    "RegisterPlugin error -- plugin registration failed with err: {}",
                    crate::error_chain(&e)
                )
            }),
        Err(e) => Err(format!(
            "RegisterPlugin error -- plugin validation failed with err: {e}"
        )),
    };
    let status = RegistrationStatus {
        plugin_registered: outcome.is_ok(),
        error: outcome.as_ref().err().cloned().unwrap_or_default(),
    };
    if let Err(e) = call(
        "NotifyRegistrationStatus",
        &endpoint,
        registration.notify_registration_status(status),
    )
    .await
    {
        // The plugin may already be gone; the outcome stands.
        tracing::warn!(error = %e, "cannot tell the plugin the registration outcome");
    }
    outcome.map_err(|message| Error::Call {
        call: "RegisterPlugin",
        endpoint: endpoint.to_string(),
        status: tonic::Status::failed_precondition(message),
    })
}

/// Checks the type and picks the highest CSI version the plugin speaks that the agent
/// speaks (1.x), as kubelet's CSI plugin handler does.
fn validate(socket: &Path, info: &PluginInfo) -> Result<String> {
    if info.r#type != CSI_PLUGIN_TYPE {
        return Err(Error::PluginType {
            socket: socket.to_owned(),
            found: info.r#type.clone(),
        });
    }
    if info.name.is_empty() {
        return Err(Error::EmptyName {
            socket: socket.to_owned(),
        });
    }
    info.supported_versions
        .iter()
        .filter_map(|v| parse_version(v).map(|parsed| (parsed, v)))
        .filter(|((major, _, _), _)| *major == 1)
        .max()
        .map(|(_, v)| v.clone())
        .ok_or_else(|| Error::UnsupportedVersions {
            driver: info.name.clone(),
            versions: info.supported_versions.clone(),
        })
}

/// `[v]major[.minor[.patch]]`.
fn parse_version(text: &str) -> Option<(u64, u64, u64)> {
    let text = text.trim().trim_start_matches('v');
    let mut parts = text.splitn(3, '.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next().map_or(Some(0), |p| p.parse().ok())?;
    let patch = parts
        .next()
        .map_or(Some(0), |p| p.split(['-', '+']).next()?.parse().ok())?;
    Some((major, minor, patch))
}

async fn install(
    client: &Client,
    node_name: &str,
    paths: &PluginPaths,
    socket: &Path,
    info: &PluginInfo,
    version: String,
) -> Result<RegisteredDriver> {
    // An empty endpoint means the registration socket itself (kubelet's rule).
    let endpoint_path = if info.endpoint.is_empty() {
        socket.to_owned()
    } else {
        paths.host_path(Path::new(
            Endpoint::parse(&info.endpoint)
                .ok()
                .and_then(|e| e.unix_path().map(Path::to_path_buf))
                .unwrap_or_else(|| PathBuf::from(&info.endpoint))
                .as_path(),
        ))
    };
    let endpoint = Endpoint::Unix(endpoint_path.clone());
    let channel = csi_proto::connect_lazy(&endpoint).map_err(|source| Error::Connect {
        endpoint: endpoint.to_string(),
        source,
    })?;
    let node_info = call(
        "NodeGetInfo",
        &endpoint,
        NodeClient::new(channel.clone()).node_get_info(NodeGetInfoRequest {}),
    )
    .await?;
    if node_info.node_id.is_empty() {
        return Err(Error::EmptyNodeId {
            driver: info.name.clone(),
        });
    }
    let driver_info = DriverNodeInfo {
        driver: info.name.clone(),
        node_id: node_info.node_id.clone(),
        topology: node_info
            .accessible_topology
            .map(|t| t.segments.into_iter().collect())
            .unwrap_or_default(),
        max_volumes: node_info.max_volumes_per_node,
    };
    csinode::install(client, node_name, &driver_info).await?;
    Ok(RegisteredDriver::new(
        info.name.clone(),
        endpoint_path,
        version,
        node_info.node_id,
        channel,
    ))
}

async fn call<T>(
    call: &'static str,
    endpoint: &Endpoint,
    future: impl Future<Output = std::result::Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T> {
    let status = match tokio::time::timeout(CALL_TIMEOUT, future).await {
        Ok(Ok(response)) => return Ok(response.into_inner()),
        Ok(Err(status)) => status,
        Err(_) => tonic::Status::deadline_exceeded(format!("no answer within {CALL_TIMEOUT:?}")),
    };
    Err(Error::Call {
        call,
        endpoint: endpoint.to_string(),
        status,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn info(type_: &str, versions: &[&str]) -> PluginInfo {
        PluginInfo {
            r#type: type_.into(),
            name: "d.example.com".into(),
            endpoint: String::new(),
            supported_versions: versions.iter().map(|v| (*v).to_string()).collect(),
        }
    }

    #[test]
    fn the_highest_1x_version_is_chosen() {
        let chosen = validate(
            Path::new("/r.sock"),
            &info("CSIPlugin", &["0.3.0", "1.0.0", "v1.2.0", "2.0.0", "junk"]),
        )
        .unwrap();
        assert_eq!(chosen, "v1.2.0");
    }

    #[test]
    fn other_plugin_types_and_versions_are_refused_by_name() {
        let error = validate(Path::new("/r.sock"), &info("DevicePlugin", &["1.0.0"]))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("DevicePlugin") && error.contains("/r.sock"),
            "{error}"
        );
        let error = validate(Path::new("/r.sock"), &info("CSIPlugin", &["0.3.0"]))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("0.3.0") && error.contains("d.example.com"),
            "{error}"
        );
    }
}
