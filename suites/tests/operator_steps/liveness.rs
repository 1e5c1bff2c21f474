//! The node plugins' liveness sidecars (`--node-health-port`, `--nfs-node-health-port`, free
//! ports per cluster from `suites::e2e`): each node DaemonSet carries the sidecar on its
//! port, and every node's address answers `GET /healthz` on both ports, as the kubelet's
//! liveness probe asks. Where the pods share one network (the embedded cluster) the nodes'
//! sidecars share each port (`SO_REUSEPORT`), so an answer there says some node's plugin
//! answers Probe.

use anyhow::{Context as _, bail, ensure};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use kube_support::wait;
use suites::e2e::{Install, ManilaCsiEnvironment};

use super::WAIT;

/// The Manila node plugin's DaemonSet.
pub const NODE_DAEMON_SET: &str = "openstack-manila-csi-nodeplugin";
/// The NFS node plugin's DaemonSet.
pub const NFS_DAEMON_SET: &str = "csi-nodeplugin-nfsplugin";
/// The sidecar's container name.
pub const LIVENESS_CONTAINER: &str = "csi-liveness-probe";

/// Both node DaemonSets have the sidecar on the port the environment chose, and
/// `/healthz` answers 200 on every node address and both ports.
pub async fn node_plugins_answer_healthz(env: &ManilaCsiEnvironment) -> anyhow::Result<()> {
    let Install::Operator(operator) = &env.options().install else {
        bail!("the environment did not install the operator");
    };
    let (node_port, nfs_port) = operator
        .node_health_ports
        .context("the environment chose no node health ports")?;
    let daemon_sets: Api<DaemonSet> = Api::namespaced(env.client(), env.namespace());
    for (name, port) in [(NODE_DAEMON_SET, node_port), (NFS_DAEMON_SET, nfs_port)] {
        let daemon_set = daemon_sets.get(name).await?;
        let containers = daemon_set
            .spec
            .and_then(|s| s.template.spec)
            .map(|s| s.containers)
            .unwrap_or_default();
        let sidecar = containers
            .iter()
            .find(|c| c.name == LIVENESS_CONTAINER)
            .with_context(|| format!("DaemonSet {name} has no {LIVENESS_CONTAINER} container"))?;
        let endpoint = format!("--http-endpoint=:{port}");
        let args = sidecar.args.clone().unwrap_or_default();
        ensure!(
            args.contains(&endpoint),
            "DaemonSet {name}'s sidecar args {args:?} lack {endpoint}"
        );
    }

    let nodes: Api<Node> = Api::all(env.client());
    let mut addresses: Vec<String> = nodes
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .flat_map(|n| n.status.as_ref().and_then(|s| s.addresses.clone()))
        .flatten()
        .filter(|a| a.type_ == "InternalIP")
        .map(|a| a.address)
        .collect();
    addresses.sort();
    addresses.dedup();
    ensure!(!addresses.is_empty(), "no node has an InternalIP");

    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(std::time::Duration::from_secs(5))
        .build()?;
    for address in &addresses {
        for port in [node_port, nfs_port] {
            let url = format!("http://{address}:{port}/healthz");
            wait::wait_until(&format!("GET {url} answering 200"), WAIT, || {
                let (client, url) = (client.clone(), url.clone());
                async move {
                    let response = client.get(&url).send().await.map_err(|e| e.to_string())?;
                    let status = response.status();
                    let body = response.text().await.unwrap_or_default();
                    if status.is_success() {
                        Ok(Some(()))
                    } else {
                        Err(format!("{status}: {body}"))
                    }
                }
            })
            .await?;
        }
    }
    Ok(())
}
