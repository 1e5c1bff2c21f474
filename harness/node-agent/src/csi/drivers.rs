//! The drivers registered on a node ([`CsiDrivers`]), what the volume manager needs of each
//! ([`RegisteredDriver`]: a channel and its node capabilities), and node calls with
//! kubelet's timeout and error text ([`node_call`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use csi_proto::v1::node_client::NodeClient;
use csi_proto::v1::node_service_capability::rpc::Type as CapabilityType;
use csi_proto::v1::{NodeGetCapabilitiesRequest, node_service_capability};
use tokio::sync::OnceCell;
use tonic::transport::Channel;

use super::error::{Error, Result};

/// How long one node call to a driver may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// A driver the watcher registered.
#[derive(Debug, Clone)]
pub struct RegisteredDriver {
    /// The driver name (GetInfo's name).
    pub name: String,
    /// Its socket on this machine.
    pub endpoint: PathBuf,
    /// The highest CSI version both sides speak.
    pub version: String,
    /// NodeGetInfo's node id.
    pub node_id: String,
    /// A channel to the driver (connects lazily, reconnects after failures).
    pub channel: Channel,
    /// NodeGetCapabilities' answer, asked on first use and kept for this registration (a
    /// re-registration makes a new `RegisteredDriver`); shared by clones.
    capabilities: Arc<OnceCell<NodeCapabilities>>,
}

impl RegisteredDriver {
    /// A driver registered under `name`, reached through `channel`.
    pub(super) fn new(
        name: String,
        endpoint: PathBuf,
        version: String,
        node_id: String,
        channel: Channel,
    ) -> Self {
        RegisteredDriver {
            name,
            endpoint,
            version,
            node_id,
            channel,
            capabilities: Arc::default(),
        }
    }

    /// A Node service client on the driver's channel.
    pub fn node_client(&self) -> NodeClient<Channel> {
        NodeClient::new(self.channel.clone())
    }

    /// The driver's node capabilities: NodeGetCapabilities the first time, then the answer
    /// kept for this registration (a failed call is tried again next time).
    pub async fn node_capabilities(&self) -> Result<&NodeCapabilities> {
        self.capabilities
            .get_or_try_init(|| async {
                let request = NodeGetCapabilitiesRequest {};
                let response = within_timeout(self.node_client().node_get_capabilities(request))
                    .await
                    .map_err(|status| Error::NodeCapabilities {
                        driver: self.name.clone(),
                        status,
                    })?;
                let capabilities = NodeCapabilities(
                    response
                        .capabilities
                        .into_iter()
                        .filter_map(|c| match c.r#type {
                            Some(node_service_capability::Type::Rpc(rpc)) => {
                                CapabilityType::try_from(rpc.r#type).ok()
                            }
                            _ => None,
                        })
                        .collect(),
                );
                tracing::debug!(driver = %self.name, ?capabilities, "node capabilities");
                Ok(capabilities)
            })
            .await
    }
}

/// The RPC capabilities a driver's Node service announced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeCapabilities(Vec<CapabilityType>);

impl NodeCapabilities {
    /// Whether the driver announced `capability`.
    pub fn has(&self, capability: CapabilityType) -> bool {
        self.0.contains(&capability)
    }
}

/// The drivers registered on a node, by name; cheap to clone and shared.
#[derive(Debug, Clone, Default)]
pub struct CsiDrivers {
    drivers: Arc<RwLock<BTreeMap<String, RegisteredDriver>>>,
}

impl CsiDrivers {
    /// The driver called `name`, if registered.
    pub fn get(&self, name: &str) -> Option<RegisteredDriver> {
        self.read().get(name).cloned()
    }

    /// The names of the registered drivers, sorted.
    pub fn names(&self) -> Vec<String> {
        self.read().keys().cloned().collect()
    }

    pub(super) fn insert(&self, driver: RegisteredDriver) {
        self.drivers
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(driver.name.clone(), driver);
    }

    pub(super) fn remove(&self, name: &str) {
        self.drivers
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, RegisteredDriver>> {
        self.drivers.read().unwrap_or_else(|e| e.into_inner())
    }
}

/// A node call with kubelet's timeout; a failure is [`Error::Rpc`] (`rpc error: code = …
/// desc = …`).
pub(super) async fn node_call<T>(
    future: impl Future<Output = std::result::Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T> {
    within_timeout(future)
        .await
        .map_err(|status| Error::Rpc { status })
}

/// The answer of a call, or `DeadlineExceeded` after [`CALL_TIMEOUT`].
pub(super) async fn within_timeout<T>(
    future: impl Future<Output = std::result::Result<tonic::Response<T>, tonic::Status>>,
) -> std::result::Result<T, tonic::Status> {
    match tokio::time::timeout(CALL_TIMEOUT, future).await {
        Ok(answer) => answer.map(tonic::Response::into_inner),
        Err(_) => Err(tonic::Status::deadline_exceeded(format!(
            "no answer within {CALL_TIMEOUT:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::sync::atomic::{AtomicUsize, Ordering};

    use csi_proto::v1::node_server::{Node, NodeServer};
    use csi_proto::v1::{NodeGetCapabilitiesResponse, NodeServiceCapability};
    use csi_proto::{Endpoint, Listener};
    use tonic::{Request, Response, Status};

    use super::*;

    /// Answers NodeGetCapabilities (STAGE_UNSTAGE_VOLUME), counting the calls.
    #[derive(Clone, Default)]
    struct CountingNode {
        calls: Arc<AtomicUsize>,
    }

    #[tonic::async_trait]
    impl Node for CountingNode {
        async fn node_get_capabilities(
            &self,
            _: Request<NodeGetCapabilitiesRequest>,
        ) -> std::result::Result<Response<NodeGetCapabilitiesResponse>, Status> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            Ok(Response::new(NodeGetCapabilitiesResponse {
                capabilities: vec![NodeServiceCapability {
                    r#type: Some(node_service_capability::Type::Rpc(
                        node_service_capability::Rpc {
                            r#type: CapabilityType::StageUnstageVolume.into(),
                        },
                    )),
                }],
            }))
        }
    }

    async fn driver_at(socket: PathBuf) -> RegisteredDriver {
        let endpoint = Endpoint::Unix(socket.clone());
        let channel = csi_proto::connect_lazy(&endpoint).unwrap();
        RegisteredDriver::new("d".into(), socket, "1.0.0".into(), "n".into(), channel)
    }

    #[tokio::test]
    async fn node_capabilities_are_asked_once_per_registration() {
        let dir = tempfile::Builder::new()
            .prefix("drivers-")
            .tempdir()
            .unwrap();
        let socket = dir.path().join("csi.sock");
        let node = CountingNode::default();
        let listener = Listener::bind(&Endpoint::Unix(socket.clone()))
            .await
            .unwrap();
        let router = tonic::transport::Server::builder().add_service(NodeServer::new(node.clone()));
        tokio::spawn(csi_proto::serve(router, listener, std::future::pending()));

        let driver = driver_at(socket.clone()).await;
        let copy = driver.clone();
        for registered in [&driver, &copy, &driver] {
            let capabilities = registered.node_capabilities().await.unwrap();
            assert!(capabilities.has(CapabilityType::StageUnstageVolume));
            assert!(!capabilities.has(CapabilityType::ExpandVolume));
        }
        assert_eq!(node.calls.load(Ordering::SeqCst), 1);

        // A new registration asks again.
        let again = driver_at(socket).await;
        again.node_capabilities().await.unwrap();
        assert_eq!(node.calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_failed_capabilities_call_is_kubelets_message_and_is_not_kept() {
        let dir = tempfile::Builder::new()
            .prefix("drivers-")
            .tempdir()
            .unwrap();
        let driver = driver_at(dir.path().join("absent.sock")).await;
        for _ in 0..2 {
            let error = driver.node_capabilities().await.unwrap_err().to_string();
            assert!(
                error.starts_with("kubernetes.io/csi: NodeGetCapabilities of driver \"d\": rpc error: code = Unavailable"),
                "{error}"
            );
        }
        assert!(driver.capabilities.get().is_none());
    }
}
