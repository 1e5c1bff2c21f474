//! The partner node plugin (`--fwdendpoint`) the Node RPCs are forwarded to.

use std::time::Duration;

use csi_proto::Endpoint;
use csi_proto::v1::identity_client::IdentityClient;
use csi_proto::v1::node_client::NodeClient;
use csi_proto::v1::node_service_capability::{self, rpc};
use csi_proto::v1::{NodeGetCapabilitiesRequest, ProbeRequest};
use tonic::transport::Channel;

use crate::error::{Error, Result};
use crate::wait::{Progress, WaitPolicy};

/// How long one Probe of the partner may take.
const PROBE_CALL_TIMEOUT: Duration = Duration::from_secs(3);

/// A (lazily connected, reconnecting) channel to the partner.
#[derive(Debug, Clone)]
pub struct Partner {
    endpoint: Endpoint,
    channel: Channel,
}

impl Partner {
    /// A channel to `endpoint` that connects on first use.
    pub fn lazy(endpoint: &str) -> Result<Self> {
        let endpoint: Endpoint = endpoint.parse().map_err(|e: csi_proto::Error| {
            Error::InvalidArgument(format!("--fwdendpoint {endpoint:?}: {e}"))
        })?;
        let channel = csi_proto::connect_lazy(&endpoint)
            .map_err(|e| Error::InvalidArgument(format!("--fwdendpoint {endpoint}: {e}")))?;
        Ok(Partner { endpoint, channel })
    }

    /// The partner's endpoint.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// A Node client on the partner channel.
    pub fn node(&self) -> NodeClient<Channel> {
        NodeClient::new(self.channel.clone())
    }

    /// One Probe: ready, or the reason it is not.
    pub async fn probe(&self) -> Result<()> {
        let mut client = IdentityClient::new(self.channel.clone());
        let mut request = tonic::Request::new(ProbeRequest {});
        request.set_timeout(PROBE_CALL_TIMEOUT);
        let response = client.probe(request).await.map_err(Error::Partner)?;
        match response.into_inner().ready {
            Some(false) => Err(Error::Unavailable(
                "the partner answered Probe with ready=false".into(),
            )),
            _ => Ok(()),
        }
    }

    /// Probes until the partner is ready or `timeout` passes (upstream waits 15 s); the
    /// error says which endpoint never answered and the last failure seen.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<()> {
        let policy = WaitPolicy::with_deadline(timeout).with_max_delay(Duration::from_millis(500));
        let what = format!(
            "the partner node plugin at {} to answer Probe",
            self.endpoint
        );
        policy
            .wait(&what, || async {
                Ok(match self.probe().await {
                    Ok(()) => Progress::Done(()),
                    Err(Error::Partner(status)) => {
                        Progress::Pending(format!("{:?}: {}", status.code(), status.message()))
                    }
                    Err(other) => Progress::Pending(other.to_string()),
                })
            })
            .await
    }

    /// The partner's Node RPC capabilities.
    pub async fn node_capabilities(&self) -> Result<Vec<rpc::Type>> {
        let response = self
            .node()
            .node_get_capabilities(NodeGetCapabilitiesRequest {})
            .await
            .map_err(Error::Partner)?;
        Ok(response
            .into_inner()
            .capabilities
            .into_iter()
            .filter_map(|c| match c.r#type {
                Some(node_service_capability::Type::Rpc(rpc)) => {
                    rpc::Type::try_from(rpc.r#type).ok()
                }
                None => None,
            })
            .collect())
    }
}
