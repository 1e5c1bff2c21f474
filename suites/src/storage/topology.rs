//! `topology` (upstream `topology.go`): provisioning that follows where pods run:
//! WaitForFirstConsumer in the zone of the pod's node, AllowedTopologies honoured, and a pod
//! whose node affinity conflicts with them refused by the scheduler, with Immediate and with
//! delayed (WaitForFirstConsumer) binding.

use driver_spec::Capability;
use k8s_openapi::api::core::v1::{
    PersistentVolume, TopologySelectorLabelRequirement, TopologySelectorTerm,
};
use k8s_openapi::api::storage::v1::StorageClass;

use super::node_of;
use super::provisioning::{access_mode, is_manila};
use crate::e2e::workload::{PodBuilder, claim, pod_with_claim};
use crate::registry::{DriverConfig, Needs, TestCase, TestContext, TestError, TestResult};
use crate::{ensure, ensure_eq, test_case};

const SUITE: &str = "topology";

/// What every test here needs: a driver with topology and nodes in two places.
const TOPOLOGY: Needs = Needs::capabilities(&[Capability::Topology, Capability::Exec])
    .nodes(2)
    .driver(DriverConfig::Topology);

/// The suite's tests.
pub fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            SUITE,
            "should provision a WaitForFirstConsumer claim in the zone of its first pod's node",
            TOPOLOGY,
            wait_for_first_consumer
        ),
        test_case!(
            SUITE,
            "should provision a volume and schedule a pod with AllowedTopologies (Immediate binding)",
            TOPOLOGY,
            allowed_immediate
        ),
        test_case!(
            SUITE,
            "should provision a volume and schedule a pod with AllowedTopologies (delayed binding)",
            TOPOLOGY,
            allowed_delayed
        ),
        test_case!(
            SUITE,
            "should fail to schedule a pod which has topologies that conflict with AllowedTopologies (Immediate binding)",
            TOPOLOGY,
            conflict_immediate
        ),
        test_case!(
            SUITE,
            "should fail to schedule a pod which has topologies that conflict with AllowedTopologies (delayed binding)",
            TOPOLOGY,
            conflict_delayed
        ),
    ]
}

/// The first topology key of the spec file.
fn topology_key(ctx: &TestContext<'_>) -> TestResult<String> {
    ctx.spec()
        .driver_info
        .topology_keys
        .first()
        .cloned()
        .ok_or_else(|| TestError::skip("the driver spec lists no TopologyKeys"))
}

/// Two different zones with nodes (the first is the zone of the first node).
fn two_zones(ctx: &TestContext<'_>) -> TestResult<(String, String)> {
    let mut zones: Vec<String> = ctx.nodes().iter().filter_map(|n| n.zone.clone()).collect();
    zones.dedup();
    let first = zones
        .first()
        .cloned()
        .ok_or_else(|| TestError::skip("no node has a zone label"))?;
    let second = zones
        .iter()
        .find(|z| **z != first)
        .cloned()
        .ok_or_else(|| TestError::skip("needs nodes in two zones; all are in one"))?;
    Ok((first, second))
}

/// Makes `class` bind as `mode`, and on the Manila driver ask for the share in the zone the
/// provisioner prefers (`autoTopology`).
fn binding(class: &mut StorageClass, mode: &str) {
    class.volume_binding_mode = Some(mode.into());
    if class.provisioner.ends_with(crate::e2e::DRIVER_NAME) {
        class
            .parameters
            .get_or_insert_with(Default::default)
            .insert("autoTopology".into(), "true".into());
    }
}

/// Restricts `class` to `key` = `zone`.
fn allow_only(class: &mut StorageClass, key: &str, zone: &str) {
    class.allowed_topologies = Some(vec![TopologySelectorTerm {
        match_label_expressions: Some(vec![TopologySelectorLabelRequirement {
            key: key.into(),
            values: vec![zone.into()],
        }]),
    }]);
}

/// The `(key, values)` of a PV's required node affinity.
fn volume_zones(volume: &PersistentVolume) -> Vec<(String, Vec<String>)> {
    volume
        .spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref())
        .map(|r| r.node_selector_terms.clone())
        .unwrap_or_default()
        .iter()
        .flat_map(|t| t.match_expressions.clone().unwrap_or_default())
        .map(|e| (e.key, e.values.unwrap_or_default()))
        .collect()
}

async fn wait_for_first_consumer(ctx: &TestContext<'_>) -> TestResult {
    let key = topology_key(ctx)?;
    // A node that is alone in its zone, so the zone can only come from the pod's node.
    let node = ctx
        .nodes()
        .iter()
        .find(|n| n.zone.is_some() && ctx.nodes().iter().filter(|m| m.zone == n.zone).count() == 1)
        .or_else(|| ctx.nodes().iter().find(|n| n.zone.is_some()))
        .cloned()
        .ok_or_else(|| TestError::skip("no node has a zone label"))?;
    let zone = node.zone.clone().unwrap_or_default();
    let class = ctx
        .storage_class_with("wffc", |class| binding(class, "WaitForFirstConsumer"))
        .await?;
    let w = ctx.workload();
    w.create_claim(&claim(
        "zonal",
        Some(&class),
        &ctx.claim_size(),
        access_mode(ctx),
    ))
    .await?;
    // No consumer yet: the claim waits, and no volume is made.
    w.wait_event("zonal", "WaitForFirstConsumer", "").await?;
    let pending = w.claims.get("zonal").await?;
    ensure_eq!(
        pending.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Pending"),
        "the claim's phase before a consumer"
    );
    // The cloud client looks at Manila shares only.
    if let (Ok(cloud), true) = (ctx.cloud(), is_manila(ctx)) {
        let name = format!("pvc-{}", pending.metadata.uid.clone().unwrap_or_default());
        let volumes = cloud.volumes_named(&name).await?;
        ensure!(
            volumes.is_empty(),
            "a {} {name} exists before any consumer: {volumes:?}",
            cloud.volume_noun()
        );
    }
    w.create_pod(&pod_with_claim(
        "consumer",
        "zonal",
        Some(&node.name),
        "echo zonal > /data/z",
    ))
    .await?;
    let zonal = w.wait_bound("zonal").await?;
    ensure_eq!(
        volume_zones(&zonal.volume),
        [(key.clone(), vec![zone.clone()])],
        "the PV's node affinity"
    );
    check_share_zone(ctx, &zonal.share_id, &zone).await?;
    let consumer = w.wait_ready("consumer").await?;
    ensure_eq!(
        node_of(&consumer).as_deref(),
        Some(node.name.as_str()),
        "the consumer's node"
    );
    ensure_eq!(
        w.exec("consumer", "cat /data/z").await?,
        "zonal\n",
        "the data written"
    );
    w.delete_pods(&["consumer"]).await?;
    Ok(())
}

/// On a Manila driver with the cloud at hand: the share is in `zone`.
async fn check_share_zone(ctx: &TestContext<'_>, share_id: &str, zone: &str) -> TestResult {
    if let (Ok(cloud), true) = (ctx.cloud(), is_manila(ctx)) {
        let share = cloud
            .share(share_id)
            .await?
            .ok_or_else(|| TestError::failed("the PV's share is not in the cloud"))?;
        ensure_eq!(
            share.availability_zone.as_deref(),
            Some(zone),
            "the share's zone"
        );
    }
    Ok(())
}

/// AllowedTopologies naming the second zone: the volume is made there and the pod, free to go
/// anywhere, is scheduled to a node of that zone.
async fn allowed(ctx: &TestContext<'_>, mode: &str) -> TestResult {
    let key = topology_key(ctx)?;
    let (_, zone) = two_zones(ctx)?;
    let class = ctx
        .storage_class_with("allowed", |class| {
            binding(class, mode);
            allow_only(class, &key, &zone);
        })
        .await?;
    let w = ctx.workload();
    w.create_claim(&claim(
        "data",
        Some(&class),
        &ctx.claim_size(),
        access_mode(ctx),
    ))
    .await?;
    w.create_pod(
        &PodBuilder::new("user", "echo ok > /data/ok")
            .claim("data", "/data")
            .build(),
    )
    .await?;
    let bound = w.wait_bound("data").await?;
    ensure_eq!(
        volume_zones(&bound.volume),
        [(key.clone(), vec![zone.clone()])],
        "the PV's node affinity"
    );
    check_share_zone(ctx, &bound.share_id, &zone).await?;
    let pod = w.wait_ready("user").await?;
    let node = node_of(&pod).unwrap_or_default();
    ensure_eq!(
        ctx.zone_of(&node),
        Some(zone.as_str()),
        "the zone of the pod's node {node}"
    );
    w.delete_pods(&["user"]).await?;
    Ok(())
}

async fn allowed_immediate(ctx: &TestContext<'_>) -> TestResult {
    allowed(ctx, "Immediate").await
}

async fn allowed_delayed(ctx: &TestContext<'_>) -> TestResult {
    allowed(ctx, "WaitForFirstConsumer").await
}

/// AllowedTopologies naming one zone, and a pod whose node affinity names the other: the
/// scheduler refuses the pod (FailedScheduling) and it stays Pending.
async fn conflict(ctx: &TestContext<'_>, mode: &str) -> TestResult {
    let key = topology_key(ctx)?;
    let (allowed_zone, other_zone) = two_zones(ctx)?;
    let class = ctx
        .storage_class_with("conflict", |class| {
            binding(class, mode);
            allow_only(class, &key, &allowed_zone);
        })
        .await?;
    let w = ctx.workload();
    w.create_claim(&claim(
        "data",
        Some(&class),
        &ctx.claim_size(),
        access_mode(ctx),
    ))
    .await?;
    w.create_pod(
        &PodBuilder::new("misplaced", "true")
            .claim("data", "/data")
            .node_selector(&key, &other_zone)
            .build(),
    )
    .await?;
    w.wait_event("misplaced", "FailedScheduling", "").await?;
    let pod = w.pods.get("misplaced").await?;
    ensure_eq!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Pending"),
        "the misplaced pod's phase"
    );
    ensure_eq!(node_of(&pod), None, "the misplaced pod's node");
    w.delete_pods(&["misplaced"]).await?;
    Ok(())
}

async fn conflict_immediate(ctx: &TestContext<'_>) -> TestResult {
    conflict(ctx, "Immediate").await
}

async fn conflict_delayed(ctx: &TestContext<'_>) -> TestResult {
    conflict(ctx, "WaitForFirstConsumer").await
}
