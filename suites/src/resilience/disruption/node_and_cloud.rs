//! A node agent restarted, and the cloud unreachable, under the writers.

use super::claims::{claim_phase, shares_for_claim, shares_named};
use super::pods::{volumes_in_use, wait_agent_renewed};
use super::scene::{Scene, container_ids, mounts_of, read_through_new_pod};
use super::{CloudRestorer, OUTAGE, with_timeline};
use crate::e2e::workload::claim;
use crate::registry::{TestContext, TestError, TestResult};
use crate::{ensure, ensure_eq};
use std::time::{Instant, SystemTime};

/// The agent of the first node restarts while two writers on it write; their containers and
/// mounts stay; their pods are deleted through the new agent.
pub(super) async fn node_agent_restarted(ctx: &TestContext<'_>) -> TestResult {
    let result = node_agent_restarted_steps(ctx).await;
    with_timeline(ctx.timeline(), result)
}

pub(super) async fn node_agent_restarted_steps(ctx: &TestContext<'_>) -> TestResult {
    if !ctx.cluster().is_embedded() || ctx.cluster().has_node_machines() {
        return Err(TestError::skip(
            "restarts a node agent: needs the embedded cluster started by the harness",
        ));
    }
    let scene = Scene::start(ctx).await?;
    let node = scene.nodes[0].clone();
    let on_node = ["writer-a", "writer-c"];
    let containers_before = container_ids(ctx, &on_node).await?;
    let volumes = scene.volume_names();
    let mounts_before = mounts_of(ctx, &volumes).await?;
    let before = scene.writers.read().await?;
    let since = SystemTime::now();

    let requested = k8s_openapi::jiff::Timestamp::now();
    let restart = Instant::now();
    ctx.cluster().restart_node_agent(&node).await?;
    ctx.timeline().record(
        "inject",
        format!(
            "node agent of {node} restarted ({:.1} s to stop and start it)",
            restart.elapsed().as_secs_f64()
        ),
    );
    wait_agent_renewed(ctx, &node, requested).await?;
    let back = SystemTime::now();
    ctx.timeline().record(
        "cluster",
        format!("the new agent of {node} renewed its Lease"),
    );
    scene.writers.wait_written_since(back).await?;

    let containers_after = container_ids(ctx, &on_node).await?;
    ensure_eq!(
        containers_after,
        containers_before,
        "the containers (id, restarts) of {on_node:?} across the restart of {node}'s agent"
    );
    let mounts_after = mounts_of(ctx, &volumes).await?;
    ensure_eq!(
        mounts_after,
        mounts_before,
        "the mounts of the writers' volumes across the restart of {node}'s agent"
    );
    ctx.timeline().record(
        "check",
        format!(
            "same containers, no restart; {} mount(s) of the writers' volumes unchanged",
            mounts_after.as_ref().map_or(0, Vec::len)
        ),
    );
    // The new agent still counts the volumes in use…
    let in_use = volumes_in_use(ctx, &node).await?;
    for bound in &scene.claims {
        ensure!(
            in_use
                .iter()
                .any(|v| v.ends_with(&format!("^{}", bound.share_id))),
            "Node {node}'s volumesInUse after the restart lacks {} (share {}): {in_use:?}",
            bound.volume_name(),
            bound.share_id
        );
    }
    // … publishes and unpublishes for a new pod, and leaves the writers' mounts alone.
    let lines = read_through_new_pod(ctx, &node).await?;
    let mounts_later = mounts_of(ctx, &volumes).await?;
    ensure_eq!(
        mounts_later,
        mounts_before,
        "the mounts of the writers' volumes after pod reader came and went on {node}"
    );
    ctx.timeline().record(
        "check",
        format!(
            "volumesInUse of {node} lists the writers' volumes; pod reader published there by the new agent saw {lines} lines of writer-a, and was unpublished"
        ),
    );
    scene.check(ctx, since, &before).await?;
    scene.finish(ctx, Vec::new()).await
}

/// The cloud stops listening for [`OUTAGE`] while the writers write and a claim is made;
/// writes go on, the provisioner reports the cloud unreachable, and the claim binds once the
/// cloud is back.
pub(super) async fn cloud_unreachable(ctx: &TestContext<'_>) -> TestResult {
    let result = cloud_unreachable_steps(ctx).await;
    with_timeline(ctx.timeline(), result)
}

pub(super) async fn cloud_unreachable_steps(ctx: &TestContext<'_>) -> TestResult {
    let fake = ctx.fake_cloud()?;
    let scene = Scene::start(ctx).await?;
    let before = scene.writers.read().await?;
    let since = SystemTime::now();

    let restore = CloudRestorer::new(fake, ctx.timeline());
    fake.set_reachable(false).await?;
    let down = Instant::now();
    ctx.timeline().record(
        "inject",
        format!(
            "the cloud is unreachable for {} s: nothing listens on {}",
            OUTAGE.as_secs(),
            fake.address()
        ),
    );
    let during = while_unreachable(ctx, &scene, down).await;
    let back = fake.set_reachable(true).await;
    let up = Instant::now();
    ctx.timeline().record(
        "clear",
        match &back {
            Ok(()) => format!(
                "the cloud is reachable again after {:.1} s",
                down.elapsed().as_secs_f64()
            ),
            Err(e) => format!("making the cloud reachable again failed: {e}"),
        },
    );
    drop(restore);
    during?;
    back?;

    let w = ctx.workload();
    let late = w.wait_bound("late").await?;
    ctx.timeline().record(
        "check",
        format!(
            "claim late Bound to {} (share {}) {:.1} s after the cloud came back",
            late.volume_name(),
            late.share_id,
            up.elapsed().as_secs_f64()
        ),
    );
    let named = shares_named(fake, late.volume_name());
    ensure_eq!(
        named,
        vec![late.share_id.clone()],
        "shares named {} in the cloud",
        late.volume_name()
    );
    let for_claim = shares_for_claim(ctx, "late").await?;
    ensure_eq!(
        for_claim,
        vec![late.share_id.clone()],
        "shares whose metadata names claim {}/late",
        ctx.namespace()
    );
    scene.check(ctx, since, &before).await?;
    scene.finish(ctx, vec![late]).await
}

/// While the cloud is down: the claim `late` is made and the provisioner reports the cloud
/// unreachable; until [`OUTAGE`] has passed, every writer keeps adding lines.
pub(super) async fn while_unreachable(
    ctx: &TestContext<'_>,
    scene: &Scene<'_, '_>,
    down: Instant,
) -> TestResult {
    let w = ctx.workload();
    w.create_claim(&claim(
        "late",
        Some(&scene.class),
        &ctx.claim_size(),
        "ReadWriteMany",
    ))
    .await?;
    ctx.timeline().record(
        "cluster",
        "claim late created while the cloud is unreachable",
    );
    let event = kube_support::wait::wait_event(
        &ctx.client(),
        ctx.namespace(),
        "late",
        "ProvisioningFailed",
        "cannot reach",
        OUTAGE,
    )
    .await?;
    ctx.timeline().record(
        "driver",
        format!(
            "ProvisioningFailed: {}",
            event.message.as_deref().unwrap_or_default()
        ),
    );
    // Writes go on for as long as the cloud is away: each round waits for a new line from
    // every writer.
    let mut rounds = 0;
    while down.elapsed() < OUTAGE {
        scene.writers.wait_written_since(SystemTime::now()).await?;
        rounds += 1;
    }
    let phase = claim_phase(ctx, "late").await?;
    ctx.timeline().record(
        "check",
        format!(
            "while the cloud was away: {rounds} rounds, each with a new line from every writer; claim late {phase}"
        ),
    );
    ensure!(
        phase != "Bound",
        "claim late is Bound although the cloud was unreachable"
    );
    Ok(())
}
