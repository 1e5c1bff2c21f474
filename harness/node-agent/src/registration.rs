//! The Node object: registration (labels, annotations, capacity, addresses, nodeInfo) and the
//! periodic status post with its conditions' heartbeats, as kubelet 1.20 does them.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeStatus,
    NodeSystemInfo,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use super::config::NodeAgentConfig;
use super::error::{Error, Result};

/// The kubelet version the agent reports.
pub const KUBELET_VERSION: &str = "v1.20.2";
/// The container runtime the agent reports (`nodeInfo.containerRuntimeVersion`).
pub const RUNTIME_VERSION: &str = "pod-sandbox://0.1.0";

/// The Node's labels: hostname, OS, architecture, zone/region (GA and beta keys), extras.
pub fn labels(config: &NodeAgentConfig) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::from([
        (
            "kubernetes.io/hostname".to_string(),
            config.node_name.clone(),
        ),
        ("kubernetes.io/os".to_string(), "linux".to_string()),
        ("kubernetes.io/arch".to_string(), go_arch().to_string()),
        ("beta.kubernetes.io/os".to_string(), "linux".to_string()),
        ("beta.kubernetes.io/arch".to_string(), go_arch().to_string()),
    ]);
    if let Some(zone) = &config.zone {
        labels.insert("topology.kubernetes.io/zone".into(), zone.clone());
        labels.insert(
            "failure-domain.beta.kubernetes.io/zone".into(),
            zone.clone(),
        );
    }
    if let Some(region) = &config.region {
        labels.insert("topology.kubernetes.io/region".into(), region.clone());
        labels.insert(
            "failure-domain.beta.kubernetes.io/region".into(),
            region.clone(),
        );
    }
    labels.extend(config.labels.clone());
    labels
}

/// Kubernetes' (Go's) name of this machine's architecture.
pub fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

fn annotations() -> BTreeMap<String, String> {
    BTreeMap::from([(
        "volumes.kubernetes.io/controller-managed-attach-detach".to_string(),
        "true".to_string(),
    )])
}

/// The Node's status now; `previous` conditions keep their transition times.
pub fn status(config: &NodeAgentConfig, previous: Option<&NodeStatus>) -> NodeStatus {
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let condition = |type_: &str, status: &str, reason: &str, message: &str| {
        let since = previous
            .and_then(|p| p.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == type_ && c.status == status))
            .and_then(|c| c.last_transition_time.clone())
            .unwrap_or_else(|| now.clone());
        NodeCondition {
            type_: type_.into(),
            status: status.into(),
            reason: Some(reason.into()),
            message: Some(message.into()),
            last_heartbeat_time: Some(now.clone()),
            last_transition_time: Some(since),
        }
    };
    let capacity = BTreeMap::from([
        ("cpu".to_string(), Quantity(config.capacity.cpu.clone())),
        (
            "memory".to_string(),
            Quantity(config.capacity.memory.clone()),
        ),
        (
            "pods".to_string(),
            Quantity(config.capacity.pods.to_string()),
        ),
        (
            "ephemeral-storage".to_string(),
            Quantity(config.capacity.ephemeral_storage.clone()),
        ),
    ]);
    NodeStatus {
        capacity: Some(capacity.clone()),
        allocatable: Some(capacity),
        conditions: Some(vec![
            condition(
                "MemoryPressure",
                "False",
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available",
            ),
            condition(
                "DiskPressure",
                "False",
                "KubeletHasNoDiskPressure",
                "kubelet has no disk pressure",
            ),
            condition(
                "PIDPressure",
                "False",
                "KubeletHasSufficientPID",
                "kubelet has sufficient PID available",
            ),
            condition(
                "Ready",
                "True",
                "KubeletReady",
                "kubelet is posting ready status",
            ),
        ]),
        addresses: Some(vec![
            NodeAddress {
                type_: "InternalIP".into(),
                address: config.node_ip.to_string(),
            },
            NodeAddress {
                type_: "Hostname".into(),
                address: config
                    .hostname_address
                    .clone()
                    .unwrap_or_else(|| config.node_name.clone()),
            },
        ]),
        daemon_endpoints: Some(NodeDaemonEndpoints {
            kubelet_endpoint: Some(DaemonEndpoint {
                port: i32::from(config.kubelet_port()),
            }),
        }),
        node_info: Some(system_info(&config.node_name)),
        ..NodeStatus::default()
    }
}

fn system_info(node_name: &str) -> NodeSystemInfo {
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    let os_image = read("/etc/os-release")
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_string())
        .unwrap_or_else(|| "Linux".into());
    // Distinct per node (several nodes share this machine), stable across restarts.
    let machine_id = format!("{:032x}", fnv1a(node_name.as_bytes()));
    let system_uuid = format!(
        "{}-{}-{}-{}-{}",
        &machine_id[0..8],
        &machine_id[8..12],
        &machine_id[12..16],
        &machine_id[16..20],
        &machine_id[20..32]
    );
    NodeSystemInfo {
        architecture: go_arch().into(),
        boot_id: read("/proc/sys/kernel/random/boot_id"),
        container_runtime_version: RUNTIME_VERSION.into(),
        kernel_version: read("/proc/sys/kernel/osrelease"),
        kube_proxy_version: KUBELET_VERSION.into(),
        kubelet_version: KUBELET_VERSION.into(),
        machine_id,
        operating_system: "linux".into(),
        os_image,
        system_uuid,
        ..NodeSystemInfo::default()
    }
}

/// A 128-bit FNV-1a hash: stable ids from names (not for security).
fn fnv1a(bytes: &[u8]) -> u128 {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013B;
    bytes
        .iter()
        .fold(OFFSET, |h, b| (h ^ u128::from(*b)).wrapping_mul(PRIME))
}

/// Creates the Node (or, when it exists, reconciles its labels and annotations) and posts its
/// status. Returns the Node as the API server has it.
pub async fn register(nodes: &Api<Node>, config: &NodeAgentConfig) -> Result<Node> {
    let name = &config.node_name;
    let node = Node {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some(labels(config)),
            annotations: Some(annotations()),
            ..ObjectMeta::default()
        },
        status: Some(status(config, None)),
        ..Node::default()
    };
    match nodes.create(&PostParams::default(), &node).await {
        Ok(created) => {
            tracing::info!(node = %name, "registered the node");
            Ok(created)
        }
        Err(e) if Error::is_conflict(&e) => {
            let patch =
                json!({"metadata": {"labels": labels(config), "annotations": annotations()}});
            nodes
                .patch(name, &PatchParams::default(), &Patch::Strategic(patch))
                .await
                .map_err(Error::api(format!("updating the labels of Node {name:?}")))?;
            let existing = nodes
                .get(name)
                .await
                .map_err(Error::api(format!("reading Node {name:?}")))?;
            tracing::info!(node = %name, "the node was already registered");
            post_status(nodes, config, existing.status.as_ref()).await
        }
        Err(e) => Err(Error::api(format!("creating Node {name:?}"))(e)),
    }
}

/// Posts the Node's status (conditions with a fresh heartbeat).
pub async fn post_status(
    nodes: &Api<Node>,
    config: &NodeAgentConfig,
    previous: Option<&NodeStatus>,
) -> Result<Node> {
    let name = &config.node_name;
    let patch = json!({ "status": status(config, previous) });
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .map_err(Error::api(format!("posting the status of Node {name:?}")))
}

/// Posts the status every `interval` forever (errors are logged and retried).
pub async fn heartbeat(nodes: Api<Node>, config: NodeAgentConfig, mut last: Option<NodeStatus>) {
    let interval = config.timings.node_status_interval;
    loop {
        let wait = match post_status(&nodes, &config, last.as_ref()).await {
            Ok(node) => {
                last = node.status;
                interval
            }
            Err(e) => {
                tracing::warn!(node = %config.node_name, error = %crate::error_chain(&e), "node status update failed");
                interval.min(Duration::from_secs(1))
            }
        };
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn zone_and_region_labels_include_the_beta_keys() {
        let mut config = NodeAgentConfig::new("node-a", "/kc", "/run", 6443, "/ca");
        config.zone = Some("zone-1".into());
        config.region = Some("region-1".into());
        let labels = labels(&config);
        assert_eq!(labels["kubernetes.io/hostname"], "node-a");
        assert_eq!(labels["topology.kubernetes.io/zone"], "zone-1");
        assert_eq!(labels["failure-domain.beta.kubernetes.io/zone"], "zone-1");
        assert_eq!(labels["topology.kubernetes.io/region"], "region-1");
        assert_eq!(
            labels["failure-domain.beta.kubernetes.io/region"],
            "region-1"
        );
    }

    #[test]
    fn machine_ids_differ_per_node() {
        assert_ne!(
            system_info("node-a").machine_id,
            system_info("node-b").machine_id
        );
    }
}
