//! `topology`: provisioning that follows where the pod runs.

use harness::driver_spec::Capability;

use super::node_of;
use super::provisioning::{access_mode, is_manila};
use crate::conformance::{DriverConfig, Needs, TestCase, TestContext, TestError, TestResult};
use crate::e2e::workload::{claim, pod_with_claim};
use crate::{ensure, ensure_eq, test_case};

const SUITE: &str = "topology";

/// The suite's tests.
pub fn tests() -> Vec<TestCase> {
    vec![test_case!(
        SUITE,
        "should provision a WaitForFirstConsumer claim in the zone of its first pod's node",
        Needs::capabilities(&[Capability::Topology, Capability::Exec])
            .nodes(2)
            .driver(DriverConfig::Topology),
        wait_for_first_consumer
    )]
}

async fn wait_for_first_consumer(ctx: &TestContext<'_>) -> TestResult {
    let key = ctx
        .spec()
        .driver_info
        .topology_keys
        .first()
        .cloned()
        .ok_or_else(|| TestError::skip("the driver spec lists no TopologyKeys"))?;
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
        .storage_class_with("wffc", |class| {
            class.volume_binding_mode = Some("WaitForFirstConsumer".into());
            if class.provisioner.ends_with(crate::e2e::DRIVER_NAME) {
                class
                    .parameters
                    .get_or_insert_with(Default::default)
                    .insert("autoTopology".into(), "true".into());
            }
        })
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
    if let Ok(cloud) = ctx.cloud() {
        let name = format!("pvc-{}", pending.metadata.uid.clone().unwrap_or_default());
        let shares = cloud.shares_named(&name).await?;
        ensure!(
            shares.is_empty(),
            "a share {name} exists before any consumer: {shares:?}"
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
    let terms = zonal
        .volume
        .spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref())
        .map(|r| r.node_selector_terms.clone())
        .unwrap_or_default();
    let zones: Vec<(String, Vec<String>)> = terms
        .iter()
        .flat_map(|t| t.match_expressions.clone().unwrap_or_default())
        .map(|e| (e.key, e.values.unwrap_or_default()))
        .collect();
    ensure_eq!(
        zones,
        [(key.clone(), vec![zone.clone()])],
        "the PV's node affinity"
    );
    if let (Ok(cloud), true) = (ctx.cloud(), is_manila(ctx)) {
        let share = cloud
            .share(&zonal.share_id)
            .await?
            .ok_or_else(|| TestError::failed("the PV's share is not in the cloud"))?;
        ensure_eq!(
            share.availability_zone.as_deref(),
            Some(zone.as_str()),
            "the share's zone"
        );
    }
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
