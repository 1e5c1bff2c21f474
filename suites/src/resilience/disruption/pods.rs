//! The driver's pods and the nodes: deleting pods and waiting for their replacements, node
//! registrations and Leases.

use super::NODE_LEASES;
use crate::e2e::workload::{describe_pod, pod_is_ready};
use crate::registry::{TestContext, TestError, TestResult};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::storage::v1::CSINode;
use kube::api::{Api, DeleteParams, ListParams};
use kube_support::wait;
use std::time::Instant;

/// The namespace of the driver's pods, or a skip.
pub(super) fn driver_namespace<'c>(ctx: &'c TestContext<'_>) -> TestResult<&'c str> {
    ctx.driver().namespace.as_deref().ok_or_else(|| {
        TestError::skip(format!(
            "deletes the driver's pods: the namespace of {}'s pods is not known",
            ctx.driver().name
        ))
    })
}

pub(super) fn pod_uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

pub(super) fn pod_name(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

pub(super) fn pod_node(pod: &Pod) -> Option<String> {
    pod.spec.as_ref().and_then(|s| s.node_name.clone())
}

/// Pods of the driver that were deleted, and gone.
pub(super) struct Deleted {
    pub(super) what: &'static str,
    pub(super) selector: &'static str,
    /// One replacement on each of their nodes (a DaemonSet's), else as many anywhere.
    pub(super) per_node: bool,
    pub(super) uids: Vec<String>,
    pub(super) nodes: Vec<String>,
    /// When the delete was sent.
    pub(super) at: Instant,
}

/// Deletes every pod of the driver matching `selector` (`what` names them) and waits until
/// they are gone (their containers ended).
pub(super) async fn delete_driver_pods(
    ctx: &TestContext<'_>,
    selector: &'static str,
    what: &'static str,
    per_node: bool,
) -> TestResult<Deleted> {
    let namespace = driver_namespace(ctx)?;
    let api: Api<Pod> = Api::namespaced(ctx.client(), namespace);
    let old = api
        .list(&ListParams::default().labels(selector))
        .await?
        .items;
    if old.is_empty() {
        return Err(TestError::skip(format!(
            "no {what} pod of the driver matches {selector} in namespace {namespace}"
        )));
    }
    let at = Instant::now();
    for pod in &old {
        api.delete(&pod_name(pod), &DeleteParams::default()).await?;
    }
    ctx.timeline().record(
        "inject",
        format!(
            "deleted the {what} pod(s) {}",
            old.iter()
                .map(|p| format!(
                    "{} on {}",
                    pod_name(p),
                    pod_node(p).unwrap_or_else(|| "?".into())
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    for pod in &old {
        wait::wait_deleted(&api, &pod_name(pod), ctx.workload().timeouts().pod_deleted).await?;
    }
    ctx.timeline().record(
        "cluster",
        format!(
            "the old {what} pod(s) gone after {:.1} s",
            at.elapsed().as_secs_f64()
        ),
    );
    Ok(Deleted {
        what,
        selector,
        per_node,
        uids: old.iter().map(pod_uid).collect(),
        nodes: old.iter().filter_map(pod_node).collect(),
        at,
    })
}

/// Waits until new Ready pods replaced the `deleted` ones; the new pods.
pub(super) async fn wait_replaced(
    ctx: &TestContext<'_>,
    deleted: &Deleted,
) -> TestResult<Vec<Pod>> {
    let namespace = driver_namespace(ctx)?;
    let api: Api<Pod> = Api::namespaced(ctx.client(), namespace);
    let listed = ListParams::default().labels(deleted.selector);
    let (api, listed) = (&api, &listed);
    let what = deleted.what;
    let new = wait::wait_until(
        format!(
            "new {what} pods Ready in place of the {} deleted",
            deleted.uids.len()
        ),
        ctx.workload().timeouts().pod_ready,
        || async move {
            let pods = api.list(listed).await.map_err(|e| e.to_string())?.items;
            let fresh: Vec<Pod> = pods
                .into_iter()
                .filter(|p| !deleted.uids.contains(&pod_uid(p)))
                .collect();
            let ready: Vec<&Pod> = fresh.iter().filter(|p| pod_is_ready(p)).collect();
            let covered = if deleted.per_node {
                deleted
                    .nodes
                    .iter()
                    .all(|n| ready.iter().any(|p| pod_node(p).as_ref() == Some(n)))
            } else {
                ready.len() >= deleted.uids.len()
            };
            if covered {
                Ok(Some(fresh))
            } else {
                Err(format!(
                    "new pods: [{}]",
                    fresh
                        .iter()
                        .map(describe_pod)
                        .collect::<Vec<_>>()
                        .join("; ")
                ))
            }
        },
    )
    .await;
    let new = ctx
        .workload()
        .check(&format!("new {what} pods Ready"), new)
        .await?;
    ctx.timeline().record(
        "cluster",
        format!(
            "new {what} pod(s) Ready ({:.1} s after the delete): {}",
            deleted.at.elapsed().as_secs_f64(),
            new.iter()
                .map(|p| format!(
                    "{} on {}",
                    pod_name(p),
                    pod_node(p).unwrap_or_else(|| "?".into())
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    Ok(new)
}

/// Waits until the CSINode of each of `nodes` lists the driver.
pub(super) async fn wait_registered(ctx: &TestContext<'_>, nodes: &[String]) -> TestResult {
    let csinodes: Api<CSINode> = Api::all(ctx.client());
    let driver = ctx.driver().name.as_str();
    for node in nodes {
        let csinodes = &csinodes;
        wait::wait_until(
            format!("CSINode {node} to list {driver}"),
            ctx.workload().timeouts().pod_ready,
            || async move {
                let found = csinodes.get_opt(node).await.map_err(|e| e.to_string())?;
                let drivers: Vec<String> = found
                    .map(|c| c.spec.drivers.into_iter().map(|d| d.name).collect())
                    .unwrap_or_default();
                if drivers.iter().any(|d| d == driver) {
                    Ok(Some(()))
                } else {
                    Err(format!("drivers {drivers:?}"))
                }
            },
        )
        .await?;
    }
    ctx.timeline().record(
        "cluster",
        format!("{driver} registered again on {}", nodes.join(", ")),
    );
    Ok(())
}

/// The Node's `status.volumesInUse`.
pub(super) async fn volumes_in_use(ctx: &TestContext<'_>, node: &str) -> TestResult<Vec<String>> {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(ctx.client());
    Ok(nodes
        .get(node)
        .await?
        .status
        .and_then(|s| s.volumes_in_use)
        .unwrap_or_default())
}

/// Waits until `node`'s agent renewed its Lease after `after`.
pub(super) async fn wait_agent_renewed(
    ctx: &TestContext<'_>,
    node: &str,
    after: k8s_openapi::jiff::Timestamp,
) -> TestResult {
    let leases: Api<Lease> = Api::namespaced(ctx.client(), NODE_LEASES);
    let leases = &leases;
    wait::wait_until(
        format!("the agent of {node} to renew its Lease after {after}"),
        ctx.workload().timeouts().pod_ready,
        || async move {
            let lease = leases.get_opt(node).await.map_err(|e| e.to_string())?;
            let renewed = lease
                .and_then(|l| l.spec)
                .and_then(|s| s.renew_time)
                .map(|t| t.0);
            match renewed {
                Some(t) if t > after => Ok(Some(())),
                other => Err(format!("renewed {other:?}")),
            }
        },
    )
    .await?;
    Ok(())
}
