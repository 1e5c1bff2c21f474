//! A node lost (its machine frozen) under a writer of a ReadWriteOnce volume: only on the
//! containers backend, whose nodes are machines of their own.
//!
//! What Kubernetes does, and the test checks, in order: the node turns NotReady once its
//! Lease is stale; the taint manager evicts the writer (its toleration of the `unreachable`
//! taint is short); its Deployment makes a replacement, which the scheduler puts on another
//! node; the volume stays attached to the lost node (its kubelet never said it unmounted),
//! so the replacement gets the Multi-Attach error and waits. Once the node is back, its
//! kubelet ends the evicted pod and unmounts; the attach/detach controller detaches the
//! volume and attaches it to the replacement's node; the replacement reads every line the
//! writer wrote before the node was lost.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Toleration};
use kube::api::PostParams;

use super::with_timeline;
use crate::e2e::workload::{PodBuilder, claim, describe_pod, pod_is_ready};
use crate::registry::{TestContext, TestError, TestResult};
use crate::{ensure, ensure_eq};
use cluster::NodeAction;
use cluster::embedded::is_node_ready;
use kube::api::{Api, DeleteParams, ListParams};
use kube_support::wait;
use std::time::Duration;

/// The writer's Deployment (its pods are labelled `app=<this>`).
const KEEPER: &str = "keeper";

/// How long the writer tolerates its node being unreachable or not ready before eviction.
const TOLERATION_SECONDS: i64 = 5;

/// How long the node may take to be reported NotReady (40 s of node monitor grace, then
/// the controller's period).
const NOT_READY_WAIT: Duration = Duration::from_secs(120);

/// How long one step may take otherwise (a pod Ready, an eviction, the volume moved).
const WAIT: Duration = crate::storage::WAIT;

pub(super) async fn node_lost(ctx: &TestContext<'_>) -> TestResult {
    let result = node_lost_steps(ctx).await;
    with_timeline(ctx.timeline(), result)
}

/// The writer's Deployment: one replica appending a numbered line every 100 ms to
/// `/data/log`, tolerating an unreachable or not-ready node for [`TOLERATION_SECONDS`].
fn keeper(claim: &str, node: &str) -> Deployment {
    let mut pod = PodBuilder::new(
        KEEPER,
        "i=$(wc -l < /data/log 2>/dev/null || echo 0); \
         while true; do i=$((i+1)); echo \"$i $(hostname)\" >> /data/log; sleep 0.1; done",
    )
    .claim(claim, "/data")
    .build();
    let mut spec = pod.spec.take().unwrap_or_default();
    spec.tolerations = Some(
        [
            "node.kubernetes.io/unreachable",
            "node.kubernetes.io/not-ready",
        ]
        .into_iter()
        .map(|key| Toleration {
            key: Some(key.into()),
            operator: Some("Exists".into()),
            effect: Some("NoExecute".into()),
            toleration_seconds: Some(TOLERATION_SECONDS),
            ..Default::default()
        })
        .collect(),
    );
    // The first pod goes to `node`; the replacement may go anywhere else.
    let template_spec = serde_json::to_value(&spec).unwrap_or_default();
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": KEEPER },
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": { "app": KEEPER } },
            "template": {
                "metadata": { "labels": { "app": KEEPER } },
                "spec": merge_affinity(template_spec, node),
            },
        },
    }))
    .unwrap_or_default()
}

/// `spec` preferring `node` (a soft affinity: the replacement must be free to go elsewhere).
fn merge_affinity(mut spec: serde_json::Value, node: &str) -> serde_json::Value {
    if let Some(object) = spec.as_object_mut() {
        object.insert(
            "affinity".into(),
            serde_json::json!({
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [{
                        "weight": 100,
                        "preference": { "matchExpressions": [{
                            "key": "kubernetes.io/hostname",
                            "operator": "In",
                            "values": [node],
                        }]},
                    }],
                },
            }),
        );
    }
    spec
}

/// The keeper pods: (name, node, being deleted).
async fn keepers(ctx: &TestContext<'_>) -> TestResult<Vec<(String, String, bool)>> {
    let list = ctx
        .workload()
        .pods
        .list(&ListParams::default().labels(&format!("app={KEEPER}")))
        .await?;
    Ok(list
        .items
        .iter()
        .map(|p| {
            (
                p.metadata.name.clone().unwrap_or_default(),
                p.spec
                    .as_ref()
                    .and_then(|s| s.node_name.clone())
                    .unwrap_or_default(),
                p.metadata.deletion_timestamp.is_some(),
            )
        })
        .collect())
}

/// The numbered lines of the log, checked to run 1..=n without a gap; returns n.
fn count_lines(log: &str) -> TestResult<u64> {
    let mut expected = 1;
    for line in log.lines() {
        let number: u64 = line
            .split(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| TestError::failed(format!("a line that is not numbered: {line:?}")))?;
        ensure_eq!(
            number,
            expected,
            "the line numbers (a line lost or repeated)"
        );
        expected += 1;
    }
    Ok(expected - 1)
}

async fn node_lost_steps(ctx: &TestContext<'_>) -> TestResult {
    if !ctx.cluster().has_node_machines() {
        return Err(TestError::skip(
            "loses a node: needs the containers backend (--backend containers), whose nodes \
             are machines of their own",
        ));
    }
    let nodes = crate::storage::nodes(ctx, 2)?;
    let lost = nodes[1].clone();
    let class = ctx.storage_class().await?;
    let w = ctx.workload();
    w.bound_claim(&claim(
        "data",
        Some(&class),
        &ctx.claim_size(),
        "ReadWriteOnce",
    ))
    .await?;
    let deployments: Api<Deployment> = Api::namespaced(w.client(), w.namespace());
    deployments
        .create(&PostParams::default(), &keeper("data", &lost))
        .await?;
    let first = wait::wait_until("the keeper running and writing", WAIT, || async {
        let pods = keepers(ctx).await.map_err(|e| e.to_string())?;
        let Some((name, node, _)) = pods.first().cloned() else {
            return Err("no keeper pod yet".to_string());
        };
        let ready = w.pods.get(&name).await.map_err(|e| e.to_string())?;
        if !pod_is_ready(&ready) {
            return Err(describe_pod(&ready));
        }
        let log = w
            .exec(&name, "cat /data/log")
            .await
            .map_err(|e| e.to_string())?;
        Ok((log.lines().count() >= 10).then_some((name, node)))
    })
    .await
    .map_err(|e| TestError::failed(e.to_string()))?;
    let (first, first_node) = first;
    ensure_eq!(first_node, lost, "the keeper's node (it prefers {lost})");
    ctx.timeline()
        .record("cluster", format!("keeper {first} writing on {lost}"));

    // What the writer has written so far; every line must still be there at the end.
    let written_before = count_lines(&w.exec(&first, "cat /data/log").await?)?;
    // The node is lost: frozen, as a hung machine.
    ctx.cluster().node_action(&lost, NodeAction::Pause).await?;
    ctx.timeline().record(
        "inject",
        format!("{lost} frozen ({written_before} lines written)"),
    );
    let result = while_lost(ctx, &lost, &first).await;
    ctx.cluster()
        .node_action(&lost, NodeAction::Unpause)
        .await?;
    ctx.timeline().record("inject", format!("{lost} thawed"));
    result?;

    // Back: the evicted pod ends, the volume moves, the replacement runs and reads all.
    let nodes_api: Api<Node> = Api::all(w.client());
    wait::wait_for(
        &nodes_api,
        &lost,
        |n: Option<&Node>| n.is_some_and(is_node_ready),
        NOT_READY_WAIT,
    )
    .await
    .map_err(|e| TestError::failed(e.to_string()))?;
    let replacement = wait::wait_until(
        "the replacement Ready on another node",
        WAIT * 2,
        || async {
            let pods = keepers(ctx).await.map_err(|e| e.to_string())?;
            let live: Vec<&(String, String, bool)> = pods.iter().filter(|p| !p.2).collect();
            match live.as_slice() {
                [(name, node, _)] if *name != first => {
                    let pod = w.pods.get(name).await.map_err(|e| e.to_string())?;
                    if pod_is_ready(&pod) {
                        Ok(Some((name.clone(), node.clone())))
                    } else {
                        Err(describe_pod(&pod))
                    }
                }
                _ => Err(format!("keeper pods: {pods:?}")),
            }
        },
    )
    .await
    .map_err(|e| TestError::failed(e.to_string()))?;
    ctx.timeline().record(
        "cluster",
        format!("replacement {} Ready on {}", replacement.0, replacement.1),
    );
    ensure!(
        replacement.1 != lost,
        "the replacement runs on the lost node {lost}"
    );
    let log = w.exec(&replacement.0, "cat /data/log").await?;
    let lines = count_lines(&log)?;
    ensure!(
        lines > written_before,
        "the replacement sees {lines} lines, the writer had written {written_before} before its node was lost"
    );
    let first_gone = keepers(ctx).await?.iter().all(|(name, ..)| *name != first);
    ensure!(first_gone, "the evicted pod {first} is still there");
    deployments.delete(KEEPER, &DeleteParams::default()).await?;
    Ok(())
}

/// While `lost` is frozen (nothing may be asked of it: its kubelet API hangs): NotReady,
/// `first` evicted, a replacement elsewhere refused the volume with the Multi-Attach error.
async fn while_lost(ctx: &TestContext<'_>, lost: &str, first: &str) -> TestResult {
    let w = ctx.workload();
    let nodes_api: Api<Node> = Api::all(w.client());
    wait::wait_for(
        &nodes_api,
        lost,
        |n: Option<&Node>| n.is_some_and(|n| !is_node_ready(n)),
        NOT_READY_WAIT,
    )
    .await
    .map_err(|e| TestError::failed(e.to_string()))?;
    ctx.timeline().record("cluster", format!("{lost} NotReady"));
    let replacement = wait::wait_until("the keeper evicted and replaced", WAIT, || async {
        let pods = keepers(ctx).await.map_err(|e| e.to_string())?;
        let evicted = pods
            .iter()
            .any(|(name, _, deleting)| name == first && *deleting);
        let other = pods
            .iter()
            .find(|(name, node, _)| name != first && !node.is_empty());
        match (evicted, other) {
            (true, Some((name, node, _))) => Ok(Some((name.clone(), node.clone()))),
            _ => Err(format!("keeper pods: {pods:?}")),
        }
    })
    .await
    .map_err(|e| TestError::failed(e.to_string()))?;
    ctx.timeline().record(
        "cluster",
        format!(
            "{first} evicted; replacement {} on {}",
            replacement.0, replacement.1
        ),
    );
    ensure!(
        replacement.1 != lost,
        "the replacement was put on the lost node"
    );
    // The volume is not freed while the node is gone: Kubernetes cannot know it unmounted.
    w.wait_event(&replacement.0, "FailedAttachVolume", "Multi-Attach error")
        .await?;
    let pod = w.pods.get(&replacement.0).await?;
    ensure!(
        !pod_is_ready(&pod),
        "the replacement is Ready while the volume is attached to the lost node: {}",
        describe_pod(&pod)
    );
    ctx.timeline().record(
        "cluster",
        format!(
            "{} refused the volume (Multi-Attach) while {lost} is lost",
            replacement.0
        ),
    );
    Ok(())
}
