//! `volumeLimits` (upstream `volumelimits.go`): every CSINode reports how many of the
//! driver's volumes its node takes (the `max_volumes_per_node` of NodeGetInfo, published by
//! the node-driver-registrar), and the scheduler keeps a pod off a node whose count is full.
//! Only for drivers whose spec claims `volumeLimits`.

use driver_spec::Capability;
use k8s_openapi::api::core::v1::{PersistentVolume, Pod};
use k8s_openapi::api::storage::v1::CSINode;
use kube::api::{Api, DeleteParams};
use kube_support::wait;

use super::provisioning::access_mode;
use super::{WAIT, nodes};
use crate::e2e::workload::{PodBuilder, claim, describe_pod};
use crate::registry::{Needs, TestCase, TestContext, TestError, TestResult};
use crate::{ensure, ensure_eq, test_case};

const SUITE: &str = "volumeLimits";

/// The largest limit the test fills: each volume is a claim, a cloud volume and a pod.
const MAX_FILLED: i32 = 32;

/// What the scheduler's NodeVolumeLimits plugin says about a full node (upstream matches
/// `max.+volume.+count`).
const LIMIT_REASON: &str = "exceed max volume count";

const VOLUME_LIMITS: &[Capability] = &[Capability::VolumeLimits];

/// The suite's tests.
pub fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            SUITE,
            "should support volume limits",
            // Other tests' volumes on the node would count against its limit.
            Needs::capabilities(VOLUME_LIMITS).exclusive(),
            support_volume_limits
        ),
        test_case!(
            SUITE,
            "should verify that all csinodes have volume limits",
            Needs::capabilities(VOLUME_LIMITS),
            all_csinodes_have_limits
        ),
    ]
}

/// The allocatable volume count of the driver `driver` on the CSINode `node`: `Err` when the
/// CSINode or the driver's entry is missing, `Ok(None)` when the entry has no count.
async fn allocatable(csinodes: &Api<CSINode>, node: &str, driver: &str) -> TestResult<Option<i32>> {
    let csinode = csinodes
        .get_opt(node)
        .await?
        .ok_or_else(|| TestError::failed(format!("node {node} has no CSINode")))?;
    let entry = csinode
        .spec
        .drivers
        .iter()
        .find(|d| d.name == driver)
        .ok_or_else(|| {
            TestError::failed(format!(
                "the CSINode of node {node} does not list driver {driver}: {:?}",
                csinode
                    .spec
                    .drivers
                    .iter()
                    .map(|d| d.name.as_str())
                    .collect::<Vec<_>>()
            ))
        })?;
    Ok(entry.allocatable.as_ref().and_then(|a| a.count))
}

/// Every schedulable node's CSINode lists the driver with an allocatable count above zero.
async fn all_csinodes_have_limits(ctx: &TestContext<'_>) -> TestResult {
    let csinodes: Api<CSINode> = Api::all(ctx.client());
    let driver = ctx.driver().name.clone();
    for node in ctx.nodes() {
        let count = allocatable(&csinodes, &node.name, &driver).await?;
        match count {
            Some(count) => ensure!(
                count > 0,
                "the CSINode of node {} allows {count} volumes of {driver}",
                node.name
            ),
            None => {
                return Err(TestError::failed(format!(
                    "the CSINode of node {} has no volume limit for {driver} \
                     (allocatable.count unset: NodeGetInfo's max_volumes_per_node is 0)",
                    node.name
                )));
            }
        }
    }
    Ok(())
}

/// Whether the pod's PodScheduled condition says the node's volume count is full.
fn unschedulable_by_limit(pod: &Pod) -> Result<String, String> {
    let condition = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled"));
    match condition {
        Some(c)
            if c.status == "False"
                && c.reason.as_deref() == Some("Unschedulable")
                && c.message
                    .as_deref()
                    .is_some_and(|m| m.contains(LIMIT_REASON)) =>
        {
            Ok(c.message.clone().unwrap_or_default())
        }
        _ => Err(describe_pod(pod)),
    }
}

/// Upstream's "should support volume limits": one node is filled with pods each using a
/// volume of its own, as many as its CSINode allows; one more such pod for that node stays
/// Pending, the scheduler saying the volume count is exceeded; once the pods and claims are
/// deleted every volume goes.
async fn support_volume_limits(ctx: &TestContext<'_>) -> TestResult {
    let node = nodes(ctx, 1)?.remove(0);
    let driver = ctx.driver().name.clone();
    let csinodes: Api<CSINode> = Api::all(ctx.client());
    let limit = match allocatable(&csinodes, &node, &driver).await? {
        None => {
            return Err(TestError::skip(format!(
                "driver {driver} reports no volume limit on node {node}"
            )));
        }
        Some(limit) if limit > MAX_FILLED => {
            return Err(TestError::skip(format!(
                "node {node} takes {limit} volumes of {driver}: too many to fill in a test \
                 (at most {MAX_FILLED})"
            )));
        }
        Some(limit) => limit,
    };
    let class = ctx.storage_class().await?;
    let w = ctx.workload();
    let size = ctx.claim_size();
    let mode = access_mode(ctx);
    let names: Vec<String> = (0..limit).map(|i| format!("vol-{i}")).collect();
    // All claims and pods at once: a late binding class provisions them as the pods land.
    for name in &names {
        w.create_claim(&claim(name, Some(&class), &size, mode))
            .await?;
        w.create_pod(
            &PodBuilder::new(name, "true")
                .claim(name, "/mnt/volume1")
                .node(&node)
                .build(),
        )
        .await?;
    }
    let mut volumes = Vec::new();
    for name in &names {
        w.wait_ready(name).await?;
        volumes.push(w.wait_bound(name).await?.volume_name().to_string());
    }

    let extra = "vol-extra";
    w.create_claim(&claim(extra, Some(&class), &size, mode))
        .await?;
    w.create_pod(
        &PodBuilder::new(extra, "true")
            .claim(extra, "/mnt/volume1")
            .node(&node)
            .build(),
    )
    .await?;
    let pods = w.pods.clone();
    let refused = wait::wait_until(
        format!("pod {extra} unschedulable for the volume limit of node {node}"),
        w.timeouts().pod_ready,
        || {
            let pods = pods.clone();
            async move {
                let pod = pods.get(extra).await.map_err(|e| e.to_string())?;
                unschedulable_by_limit(&pod).map(Some)
            }
        },
    )
    .await;
    let message = w
        .check("the pod beyond the limit refused by the scheduler", refused)
        .await?;
    tracing::info!(namespace = w.namespace(), node, limit, %message, "pod beyond the volume limit unschedulable");
    let seen = w.pods.get(extra).await?;
    ensure_eq!(
        seen.spec.as_ref().and_then(|s| s.node_name.as_deref()),
        None,
        "the node of the pod beyond the limit ({})",
        describe_pod(&seen)
    );

    // Everything goes: pods, claims, and the volumes behind them.
    let mut all: Vec<&str> = names.iter().map(String::as_str).collect();
    all.push(extra);
    w.delete_pods(&all).await?;
    for name in &all {
        w.claims.delete(name, &DeleteParams::default()).await?;
    }
    let pvs: Api<PersistentVolume> = Api::all(ctx.client());
    for volume in &volumes {
        let gone = wait::wait_deleted(&pvs, volume, WAIT).await;
        w.check(&format!("PV {volume} deleted with its claim"), gone)
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};

    use super::*;

    fn pod_with(condition: Option<(&str, &str, &str)>) -> Pod {
        Pod {
            status: Some(PodStatus {
                conditions: condition.map(|(status, reason, message)| {
                    vec![PodCondition {
                        type_: "PodScheduled".into(),
                        status: status.into(),
                        reason: Some(reason.into()),
                        message: Some(message.into()),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn only_the_volume_count_reason_counts() {
        let full = "0/3 nodes are available: 1 node(s) exceed max volume count, 2 node(s) \
                    didn't match Pod's node affinity/selector.";
        assert_eq!(
            unschedulable_by_limit(&pod_with(Some(("False", "Unschedulable", full)))),
            Ok(full.to_string())
        );
        let other = "0/3 nodes are available: 3 Insufficient cpu.";
        assert!(
            unschedulable_by_limit(&pod_with(Some(("False", "Unschedulable", other)))).is_err()
        );
        assert!(unschedulable_by_limit(&pod_with(Some(("True", "", "")))).is_err());
        assert!(unschedulable_by_limit(&pod_with(None)).is_err());
    }
}
