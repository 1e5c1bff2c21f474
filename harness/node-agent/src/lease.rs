//! The node's Lease in `kube-node-lease`: created owned by the Node, renewed every
//! [`Timings::lease_renew_interval`](super::Timings::lease_renew_interval).

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
use kube::Client;
use kube::api::{Api, PostParams};

use super::config::NodeAgentConfig;
use super::error::{Error, Result};

/// The namespace of node leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";

/// Renews the Lease forever (errors are logged and retried after a second).
pub async fn renew_forever(client: Client, config: NodeAgentConfig, node: Node) {
    let leases: Api<Lease> = Api::namespaced(client, LEASE_NAMESPACE);
    loop {
        let wait = match renew(&leases, &config, &node).await {
            Ok(()) => config.timings.lease_renew_interval,
            Err(e) => {
                tracing::warn!(node = %config.node_name, error = %super::error_chain(&e), "lease renewal failed");
                Duration::from_secs(1).min(config.timings.lease_renew_interval)
            }
        };
        tokio::time::sleep(wait).await;
    }
}

/// Creates the Lease or renews it once.
pub async fn renew(leases: &Api<Lease>, config: &NodeAgentConfig, node: &Node) -> Result<()> {
    let name = &config.node_name;
    let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
    let duration = i32::try_from(config.timings.lease_duration.as_secs()).unwrap_or(i32::MAX);
    match leases
        .get_opt(name)
        .await
        .map_err(Error::api(format!("reading Lease {name:?}")))?
    {
        Some(mut lease) => {
            let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
            spec.holder_identity = Some(name.clone());
            spec.lease_duration_seconds = Some(duration);
            spec.renew_time = Some(now);
            leases
                .replace(name, &PostParams::default(), &lease)
                .await
                .map_err(Error::api(format!("renewing Lease {name:?}")))?;
        }
        None => {
            let owner = node.metadata.uid.clone().map(|uid| OwnerReference {
                api_version: "v1".into(),
                kind: "Node".into(),
                name: name.clone(),
                uid,
                ..OwnerReference::default()
            });
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(LEASE_NAMESPACE.into()),
                    owner_references: owner.map(|o| vec![o]),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(name.clone()),
                    lease_duration_seconds: Some(duration),
                    renew_time: Some(now),
                    ..LeaseSpec::default()
                }),
            };
            leases
                .create(&PostParams::default(), &lease)
                .await
                .map_err(Error::api(format!("creating Lease {name:?}")))?;
        }
    }
    Ok(())
}
