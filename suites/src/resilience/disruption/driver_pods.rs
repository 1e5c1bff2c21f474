//! The driver's pods deleted under the writers: the node plugins', and the controller's during
//! CreateVolume and DeleteVolume.

use super::super::writers::wall;
use super::claims::{
    claim_phase, describe_shares, is_pending, share_status, shares_for_claim, shares_named,
    volume_name_of, volumes_of_claim, wait_share_gone,
};
use super::pods::{delete_driver_pods, driver_namespace, pod_node, wait_registered, wait_replaced};
use super::scene::{Scene, read_through_new_pod};
use super::{CREATE_HELD, CloudRestorer, millis, with_timeline};
use crate::e2e::workload::claim;
use crate::e2e::{CONTROLLER_SELECTOR, NODE_PLUGIN_SELECTOR};
use crate::registry::{TestContext, TestResult};
use crate::{ensure, ensure_eq};
use fakes::{FaultAction, FaultRule, Operation, Times};
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::{Api, DeleteParams};
use kube_support::wait;
use std::time::{Instant, SystemTime};

/// The node plugin pods of every node are deleted; the DaemonSets recreate them; writes go
/// on; a new pod publishes through the new plugins; the writers' unpublish works.
pub(super) async fn node_plugins_deleted(ctx: &TestContext<'_>) -> TestResult {
    let result = node_plugins_deleted_steps(ctx).await;
    with_timeline(ctx.timeline(), result)
}

pub(super) async fn node_plugins_deleted_steps(ctx: &TestContext<'_>) -> TestResult {
    driver_namespace(ctx)?;
    let scene = Scene::start(ctx).await?;
    let before = scene.writers.read().await?;
    let since = SystemTime::now();

    let deleted = delete_driver_pods(ctx, NODE_PLUGIN_SELECTOR, "node plugin", true).await?;
    let replaced = wait_replaced(ctx, &deleted).await?;
    let nodes: Vec<String> = replaced.iter().filter_map(pod_node).collect();
    wait_registered(ctx, &nodes).await?;
    let recreated = SystemTime::now();
    scene.writers.wait_written_since(recreated).await?;
    ctx.timeline().record(
        "check",
        format!(
            "every writer wrote after the new node plugins registered ({})",
            wall(recreated)
        ),
    );
    scene.check(ctx, since, &before).await?;

    // The new plugins publish a volume for a new pod…
    let lines = read_through_new_pod(ctx, &scene.nodes[1]).await?;
    ctx.timeline().record(
        "check",
        format!(
            "pod reader on {} (published by the new node plugin, then unpublished) saw {lines} lines of writer-a",
            scene.nodes[1],
        ),
    );
    // … and unpublish the writers' volumes.
    scene.finish(ctx, Vec::new()).await
}

/// The controller pod is deleted while the cloud holds its answer to the share create of a
/// CreateVolume; the new controller's CreateVolume completes with the same share.
pub(super) async fn controller_deleted_during_create(ctx: &TestContext<'_>) -> TestResult {
    let result = controller_deleted_during_create_steps(ctx).await;
    with_timeline(ctx.timeline(), result)
}

pub(super) async fn controller_deleted_during_create_steps(ctx: &TestContext<'_>) -> TestResult {
    let fake = ctx.fake_cloud()?;
    driver_namespace(ctx)?;
    let scene = Scene::start(ctx).await?;
    let before = scene.writers.read().await?;
    let since = SystemTime::now();
    let journal_from = fake.journal().last().map_or(0, |e| e.seq);

    let _restore = CloudRestorer::new(fake, ctx.timeline());
    let held = fake.add_fault(
        FaultRule::new(
            Operation::ShareCreate,
            FaultAction::Latency {
                ms: millis(CREATE_HELD),
            },
        )
        .times(Times::Count(1)),
    )?;
    ctx.timeline().record(
        "inject",
        format!(
            "the cloud holds its answer to the next share create for {} s",
            CREATE_HELD.as_secs()
        ),
    );
    let w = ctx.workload();
    w.create_claim(&claim(
        "late",
        Some(&scene.class),
        &ctx.claim_size(),
        "ReadWriteMany",
    ))
    .await?;
    let volume = volume_name_of(ctx, "late").await?;
    ctx.timeline().record(
        "check",
        format!("claim late created; its volume will be {volume}"),
    );

    // The cloud received the share create: the share exists, its answer is held.
    let (share_id, status) = wait::wait_until(
        format!("the cloud to receive the share create of {volume}"),
        w.timeouts().claim_bound,
        || async {
            let shares = fake.leftovers().shares;
            match shares.iter().find(|s| s.name.as_deref() == Some(&volume)) {
                Some(share) => Ok(Some((share.id.clone(), share.status.clone()))),
                None => Err(format!("shares: {}", describe_shares(fake))),
            }
        },
    )
    .await?;
    let received = Instant::now();
    ensure!(
        !is_pending(fake, held),
        "the share create of {volume} did not consume the fault rule holding its answer: {:?}",
        fake.faults()
    );
    ctx.timeline().record(
        "cloud",
        format!(
            "share {share_id} ({volume}) created, status {status}; CreateVolume waits for the answer"
        ),
    );

    let deleted = delete_driver_pods(ctx, CONTROLLER_SELECTOR, "controller", false).await?;
    let interrupted = received.elapsed();
    let phase = claim_phase(ctx, "late").await?;
    ctx.timeline().record(
        "check",
        format!(
            "the old controller ended {:.1} s after the cloud received its share create, before the held answer ({} s); claim late {phase} then",
            interrupted.as_secs_f64(),
            CREATE_HELD.as_secs()
        ),
    );
    ensure!(
        interrupted < CREATE_HELD,
        "the old controller pod took {:.1} s to go after the cloud received the share create, longer than the cloud held its answer ({} s): the test did not interrupt CreateVolume",
        interrupted.as_secs_f64(),
        CREATE_HELD.as_secs()
    );
    wait_replaced(ctx, &deleted).await?;

    let bound = w.wait_bound("late").await?;
    ctx.timeline().record(
        "check",
        format!(
            "claim late Bound to {} (share {}) {:.1} s after the cloud received the first create",
            bound.volume_name(),
            bound.share_id,
            received.elapsed().as_secs_f64()
        ),
    );
    ensure_eq!(bound.volume_name(), volume.as_str(), "the PV of claim late");
    let volumes = volumes_of_claim(ctx, "late").await?;
    ensure_eq!(
        volumes,
        vec![volume.clone()],
        "PVs whose claimRef is claim late"
    );
    let named = shares_named(fake, &volume);
    ensure_eq!(
        named,
        vec![share_id.clone()],
        "shares named {volume} in the cloud (one create held, the controller deleted, the claim provisioned again)"
    );
    ensure_eq!(
        bound.share_id,
        share_id,
        "the PV's volume handle (the share the first, interrupted CreateVolume made)"
    );
    let for_claim = shares_for_claim(ctx, "late").await?;
    ensure_eq!(
        for_claim,
        vec![share_id.clone()],
        "shares whose metadata names claim {}/late",
        ctx.namespace()
    );
    let creates = fake
        .journal()
        .iter()
        .filter(|e| e.seq > journal_from && e.method == "POST" && e.path.ends_with("/shares"))
        .count();
    ctx.timeline().record(
        "cloud",
        format!("{creates} share create request(s) since the test began; one share for claim late"),
    );

    scene.check(ctx, since, &before).await?;
    scene.finish(ctx, vec![bound]).await
}

/// The controller pod is deleted while DeleteVolume waits for a share whose delete the cloud
/// accepted but dropped; the new controller deletes it.
pub(super) async fn controller_deleted_during_delete(ctx: &TestContext<'_>) -> TestResult {
    let result = controller_deleted_during_delete_steps(ctx).await;
    with_timeline(ctx.timeline(), result)
}

pub(super) async fn controller_deleted_during_delete_steps(ctx: &TestContext<'_>) -> TestResult {
    let fake = ctx.fake_cloud()?;
    driver_namespace(ctx)?;
    let scene = Scene::start(ctx).await?;
    let w = ctx.workload();
    let late = w
        .bound_claim(&claim(
            "late",
            Some(&scene.class),
            &ctx.claim_size(),
            "ReadWriteMany",
        ))
        .await?;
    let volume = late.volume_name().to_string();
    let share_id = late.share_id.clone();
    let before = scene.writers.read().await?;
    let since = SystemTime::now();
    let journal_from = fake.journal().last().map_or(0, |e| e.seq);

    let _restore = CloudRestorer::new(fake, ctx.timeline());
    let dropped = fake.add_fault(
        FaultRule::new(
            Operation::ShareDelete,
            FaultAction::Stuck {
                status: Some("available".into()),
            },
        )
        .for_resource(&share_id)
        .times(Times::Count(1)),
    )?;
    ctx.timeline().record(
        "inject",
        format!(
            "the cloud accepts the next delete of share {share_id} but leaves the share available"
        ),
    );
    w.claims.delete("late", &DeleteParams::default()).await?;
    ctx.timeline()
        .record("cluster", format!("claim late ({volume}) deleted"));

    // DeleteVolume is in flight: the cloud accepted the delete, the driver waits for the
    // share to go.
    wait::wait_until(
        format!("the cloud to receive the delete of share {share_id}"),
        w.timeouts().claim_bound,
        || async {
            if !is_pending(fake, dropped) {
                Ok(Some(()))
            } else {
                Err(format!(
                    "fault rule not fired yet; share {share_id} {}",
                    share_status(fake, &share_id).unwrap_or_else(|| "gone".into())
                ))
            }
        },
    )
    .await?;
    let status = share_status(fake, &share_id);
    ensure_eq!(
        status.as_deref(),
        Some("available"),
        "the status of share {share_id} after the dropped delete"
    );
    ctx.timeline().record(
        "cloud",
        format!("delete of share {share_id} accepted and dropped; DeleteVolume waits for it"),
    );

    let deleted = delete_driver_pods(ctx, CONTROLLER_SELECTOR, "controller", false).await?;
    ctx.timeline().record(
        "cloud",
        format!(
            "share {share_id} when the old controller pod was gone: {}",
            share_status(fake, &share_id).as_deref().unwrap_or("gone")
        ),
    );
    wait_replaced(ctx, &deleted).await?;

    let volumes: Api<PersistentVolume> = Api::all(ctx.client());
    let ready = Instant::now();
    wait::wait_deleted(&volumes, &volume, w.timeouts().claim_bound).await?;
    wait_share_gone(ctx, &share_id).await?;
    ctx.timeline().record(
        "check",
        format!(
            "PV {volume} and share {share_id} gone {:.1} s after the new controller was ready",
            ready.elapsed().as_secs_f64()
        ),
    );
    // The share went by a delete after the dropped one, from another client (another
    // token): the new controller's.
    let share_path = format!("/shares/{share_id}");
    let deletes: Vec<fakes::JournalEntry> = fake
        .journal()
        .into_iter()
        .filter(|e| e.seq > journal_from && e.method == "DELETE" && e.path.ends_with(&share_path))
        .collect();
    let mut clients: Vec<Option<String>> = Vec::new();
    let described: Vec<String> = deletes
        .iter()
        .map(|e| {
            let client = match clients.iter().position(|t| *t == e.token) {
                Some(index) => index + 1,
                None => {
                    clients.push(e.token.clone());
                    clients.len()
                }
            };
            format!("{} answered {} (client {client})", e.at, e.status)
        })
        .collect();
    ctx.timeline().record(
        "cloud",
        format!(
            "deletes of share {share_id}, a client being a token: {}",
            described.join("; ")
        ),
    );
    let dropped_by = deletes.first().map(|e| e.token.clone());
    let redone = deletes
        .iter()
        .skip(1)
        .any(|e| e.status == 202 && Some(&e.token) != dropped_by.as_ref());
    ensure!(
        redone,
        "the cloud saw no accepted delete of share {share_id} from another client after the dropped one of the interrupted DeleteVolume: {}",
        described.join("; ")
    );

    scene.check(ctx, since, &before).await?;
    scene.finish(ctx, Vec::new()).await
}
