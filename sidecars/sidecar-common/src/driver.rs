//! The CSI driver a sidecar talks to: connect, wait until Probe says ready, read its name
//! and capabilities once.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use csi_proto::Endpoint;
use csi_proto::v1::controller_service_capability::{self, rpc};
use csi_proto::v1::identity_client::IdentityClient;
use csi_proto::v1::plugin_capability::{self, service};
use csi_proto::v1::{
    ControllerGetCapabilitiesRequest, GetPluginCapabilitiesRequest, GetPluginInfoRequest,
    ProbeRequest, controller_client::ControllerClient,
};
use tonic::transport::Channel;

use crate::error::{CsiCallError, Error, Result};

/// First pause between Probe attempts; doubles up to [`PROBE_MAX_PAUSE`].
const PROBE_FIRST_PAUSE: Duration = Duration::from_millis(20);
const PROBE_MAX_PAUSE: Duration = Duration::from_secs(1);

/// What the driver says about itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriverInfo {
    /// GetPluginInfo name, e.g. `manila.csi.openstack.org`.
    pub name: String,
    /// GetPluginInfo vendor version.
    pub vendor_version: String,
    /// Plugin service capabilities (CONTROLLER_SERVICE, VOLUME_ACCESSIBILITY_CONSTRAINTS, …).
    pub plugin_services: BTreeSet<i32>,
    /// Controller RPC capabilities (empty without a controller service).
    pub controller_rpcs: BTreeSet<i32>,
}

impl DriverInfo {
    /// Whether the plugin advertises the plugin-level service capability `kind`.
    pub fn has_plugin_service(&self, kind: service::Type) -> bool {
        self.plugin_services.contains(&(kind as i32))
    }

    /// Whether the controller advertises the RPC capability `kind`.
    pub fn has_controller_rpc(&self, kind: rpc::Type) -> bool {
        self.controller_rpcs.contains(&(kind as i32))
    }
}

/// A connected, ready driver.
#[derive(Clone, Debug)]
pub struct Driver {
    /// The gRPC channel (cheap to clone).
    pub channel: Channel,
    /// Where it listens.
    pub endpoint: Endpoint,
    /// Its name and capabilities, read at connection time.
    pub info: DriverInfo,
}

impl Driver {
    /// Connects to `address` (a path or `unix://…`), waits up to `timeout` for Probe to
    /// answer ready, then reads GetPluginInfo and the capabilities.
    pub async fn connect(address: &str, timeout: Duration) -> Result<Driver> {
        let endpoint = Endpoint::parse(address).map_err(|source| Error::Endpoint {
            endpoint: address.into(),
            source,
        })?;
        let channel = csi_proto::connect_lazy(&endpoint).map_err(|source| Error::Endpoint {
            endpoint: address.into(),
            source,
        })?;
        wait_ready(&channel, &endpoint, timeout).await?;
        let info = read_info(&channel, timeout).await?;
        tracing::info!(driver = %info.name, version = %info.vendor_version, %endpoint, "CSI driver ready");
        Ok(Driver {
            channel,
            endpoint,
            info,
        })
    }
}

/// Probes until the driver answers ready (an absent `ready` counts as ready, as the spec
/// says), pausing 20 ms doubling to 1 s; fails after `timeout` naming the last answer.
pub async fn wait_ready(channel: &Channel, endpoint: &Endpoint, timeout: Duration) -> Result<()> {
    let started = Instant::now();
    let mut pause = PROBE_FIRST_PAUSE;
    loop {
        let mut identity = IdentityClient::new(channel.clone());
        let last = match tokio::time::timeout(timeout, identity.probe(ProbeRequest {})).await {
            Ok(Ok(response)) if response.get_ref().ready.unwrap_or(true) => return Ok(()),
            Ok(Ok(_)) => "ready: false".to_string(),
            Ok(Err(status)) => status.to_string(),
            Err(_) => format!("no answer within {timeout:?}"),
        };
        if started.elapsed() >= timeout {
            return Err(Error::DriverNotReady {
                endpoint: endpoint.to_string(),
                waited: started.elapsed(),
                last,
            });
        }
        tracing::debug!(%endpoint, %last, "CSI driver not ready yet");
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(PROBE_MAX_PAUSE);
    }
}

/// GetPluginInfo, GetPluginCapabilities and (with a controller service)
/// ControllerGetCapabilities.
pub async fn read_info(channel: &Channel, timeout: Duration) -> Result<DriverInfo> {
    let mut identity = IdentityClient::new(channel.clone());
    let info = with_timeout(
        "GetPluginInfo",
        timeout,
        identity.get_plugin_info(GetPluginInfoRequest {}),
    )
    .await?;
    let capabilities = with_timeout(
        "GetPluginCapabilities",
        timeout,
        identity.get_plugin_capabilities(GetPluginCapabilitiesRequest {}),
    )
    .await?;
    let plugin_services: BTreeSet<i32> = capabilities
        .capabilities
        .iter()
        .filter_map(|c| match &c.r#type {
            Some(plugin_capability::Type::Service(s)) => Some(s.r#type),
            _ => None,
        })
        .collect();
    let mut controller_rpcs = BTreeSet::new();
    if plugin_services.contains(&(service::Type::ControllerService as i32)) {
        let mut controller = ControllerClient::new(channel.clone());
        let answer = with_timeout(
            "ControllerGetCapabilities",
            timeout,
            controller.controller_get_capabilities(ControllerGetCapabilitiesRequest {}),
        )
        .await?;
        controller_rpcs = answer
            .capabilities
            .iter()
            .filter_map(|c| match &c.r#type {
                Some(controller_service_capability::Type::Rpc(r)) => Some(r.r#type),
                _ => None,
            })
            .collect();
    }
    if info.name.is_empty() {
        return Err(Error::Csi {
            call: "GetPluginInfo",
            status: tonic::Status::internal("the driver reported an empty name"),
        });
    }
    Ok(DriverInfo {
        name: info.name,
        vendor_version: info.vendor_version,
        plugin_services,
        controller_rpcs,
    })
}

/// Runs one CSI call with a deadline, mapping both failures to [`Error::Csi`].
pub async fn with_timeout<T>(
    call: &'static str,
    timeout: Duration,
    future: impl Future<Output = std::result::Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T> {
    Ok(timed(call, timeout, future).await?)
}

/// Runs one CSI call with a deadline: the answer, the driver's error, or DeadlineExceeded
/// when it did not answer within `timeout`. The one place CSI calls are timed; see
/// [`crate::context::SidecarContext::call`] for the metered version reconciles use.
pub async fn timed<T>(
    call: &'static str,
    timeout: Duration,
    future: impl Future<Output = std::result::Result<tonic::Response<T>, tonic::Status>>,
) -> std::result::Result<T, CsiCallError> {
    match tokio::time::timeout(timeout, future).await {
        Ok(Ok(response)) => Ok(response.into_inner()),
        Ok(Err(status)) => Err(CsiCallError { call, status }),
        Err(_) => Err(CsiCallError {
            call,
            status: tonic::Status::deadline_exceeded(format!("no answer within {timeout:?}")),
        }),
    }
}
