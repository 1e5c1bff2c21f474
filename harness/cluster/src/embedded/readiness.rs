//! Waiting for a cluster to be ready, for every backend: its nodes registered and Ready
//! ([`wait_nodes_ready_checking`], [`is_node_ready`]), then usable as a user's first commands
//! need it ([`wait_usable`]).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Node, ServiceAccount};
use kube::api::{Api, ListParams};

use crate::error::{Error, Result};
use kube_support::error::error_chain;
use kube_support::wait;

/// Waits until every node in `names` is registered and Ready; `check` fails the wait early
/// (e.g. when a node's agent has exited).
pub(crate) async fn wait_nodes_ready_checking(
    client: &kube::Client,
    names: &[String],
    timeout: Duration,
    mut check: impl FnMut() -> Result<()>,
) -> Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let deadline = Instant::now() + timeout;
    let mut last_seen;
    let mut reported = 0;
    loop {
        check()?;
        match nodes.list(&ListParams::default()).await {
            Ok(list) => {
                let ready: Vec<&str> = list
                    .items
                    .iter()
                    .filter(|n| is_node_ready(n))
                    .filter_map(|n| n.metadata.name.as_deref())
                    .filter(|n| names.iter().any(|want| want == n))
                    .collect();
                if ready.len() > reported {
                    reported = ready.len();
                    tracing::info!("{}/{} nodes Ready", ready.len(), names.len());
                }
                if ready.len() == names.len() {
                    return Ok(());
                }
                last_seen = list
                    .items
                    .iter()
                    .map(|n| {
                        format!(
                            "{}: {}",
                            n.metadata.name.as_deref().unwrap_or("?"),
                            if is_node_ready(n) {
                                "Ready"
                            } else {
                                "NotReady"
                            }
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", ");
                if last_seen.is_empty() {
                    last_seen = "no Node registered yet".into();
                }
            }
            Err(e) => last_seen = format!("listing nodes: {}", error_chain(&e)),
        }
        if Instant::now() >= deadline {
            return Err(Error::NodesNotReady {
                want: names.len(),
                timeout,
                last_seen,
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until what a user's first commands need is there, as kind does before it returns:
/// the `default` ServiceAccount of the `default` namespace (without it the ServiceAccount
/// admission plugin refuses every pod there), the `kube-root-ca.crt` ConfigMap (which
/// in-cluster clients mount) and every node's kubelet API answering `/healthz` through the
/// apiserver (`kubectl logs` and `exec` go that way).
pub(crate) async fn wait_usable(
    client: &kube::Client,
    nodes: &[String],
    timeout: Duration,
) -> Result<()> {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    wait::wait_until(
        "the default ServiceAccount and kube-root-ca.crt in namespace default",
        timeout,
        || async {
            let account = accounts.get_opt("default").await.map_err(|e| {
                format!(
                    "reading ServiceAccount default/default: {}",
                    error_chain(&e)
                )
            })?;
            let ca = config_maps.get_opt("kube-root-ca.crt").await.map_err(|e| {
                format!(
                    "reading ConfigMap default/kube-root-ca.crt: {}",
                    error_chain(&e)
                )
            })?;
            match (account, ca) {
                (Some(_), Some(_)) => Ok(Some(())),
                (None, _) => Err("no ServiceAccount default/default yet".to_string()),
                (_, None) => Err("no ConfigMap default/kube-root-ca.crt yet".to_string()),
            }
        },
    )
    .await?;
    for node in nodes {
        let path = format!("/api/v1/nodes/{node}/proxy/healthz");
        wait::wait_until(
            format!("the kubelet API of {node} answering through the apiserver"),
            timeout,
            || async {
                let request = http::Request::get(&path)
                    .body(Vec::new())
                    .map_err(|e| e.to_string())?;
                match client.request_text(request).await {
                    Ok(body) if body.trim() == "ok" => Ok(Some(())),
                    Ok(body) => Err(format!("GET {path}: {body:?}")),
                    Err(e) => Err(format!("GET {path}: {}", error_chain(&e))),
                }
            },
        )
        .await?;
    }
    Ok(())
}

/// Whether a Node's `Ready` condition is `True`.
pub fn is_node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        })
}
