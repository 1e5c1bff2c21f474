//! Faults during snapshotting: snapshots in error, stuck, and in error_deleting.

use super::guard::{
    Baseline, Faults, delete_and_ensure_nothing_left, describe_resources, ensure_names,
    ensure_only_share, test_claim, wait_cloud, wait_for_event,
};
use super::{CLAIM, STEP, STUCK_LOOKS_SPAN};
use crate::e2e::cloud::CloudInspector;
use crate::e2e::snapshots;
use crate::e2e::workload::BoundClaim;
use crate::registry::{TestContext, TestError, TestResult};
use crate::{ensure, ensure_eq};
use fakes::{FaultAction, FaultRule, Operation, Times};
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube_support::wait;
use std::time::Duration;

/// The VolumeSnapshot of every snapshot test.
pub(super) const SNAPSHOT: &str = "snap";

/// A string field of a dynamic object, by JSON pointer.
pub(super) fn field(object: &DynamicObject, pointer: &str) -> Option<String> {
    object
        .data
        .pointer(pointer)
        .and_then(|v| v.as_str())
        .map(str::to_string)
}

/// A claim Bound for the snapshot tests, and the class to snapshot with.
pub(super) async fn snapshot_source(ctx: &TestContext<'_>) -> TestResult<(BoundClaim, String)> {
    let class = ctx.storage_class().await?;
    let snapshot_class = ctx.snapshot_class().await?;
    let bound = ctx
        .workload()
        .bound_claim(&test_claim(ctx, CLAIM, &class))
        .await?;
    Ok((bound, snapshot_class))
}

/// Creates the VolumeSnapshot [`SNAPSHOT`] of [`CLAIM`] with `class`.
pub(super) async fn create_snapshot(ctx: &TestContext<'_>, class: &str) -> TestResult {
    ctx.workload()
        .snapshots()
        .create(
            &PostParams::default(),
            &snapshots::volume_snapshot(SNAPSHOT, CLAIM, class),
        )
        .await?;
    ctx.timeline().record(
        "cluster",
        format!("VolumeSnapshot {SNAPSHOT} of claim {CLAIM} created"),
    );
    Ok(())
}

/// Waits until the VolumeSnapshot is ready; returns its content's name and snapshot handle.
pub(super) async fn wait_snapshot_ready(ctx: &TestContext<'_>) -> TestResult<(String, String)> {
    let w = ctx.workload();
    let ready = snapshots::wait_ready(&w.snapshots(), SNAPSHOT, STEP).await;
    let snapshot = w
        .check(&format!("VolumeSnapshot {SNAPSHOT} readyToUse"), ready)
        .await?;
    let content = field(&snapshot, "/status/boundVolumeSnapshotContentName").ok_or_else(|| {
        TestError::failed(format!(
            "VolumeSnapshot {SNAPSHOT} is ready without a bound content: {}",
            snapshot.data["status"]
        ))
    })?;
    let object = snapshots::volume_snapshot_contents(&ctx.client())
        .get(&content)
        .await?;
    let handle = field(&object, "/status/snapshotHandle").ok_or_else(|| {
        TestError::failed(format!(
            "VolumeSnapshotContent {content} has no snapshot handle: {}",
            object.data["status"]
        ))
    })?;
    ctx.timeline().record(
        "cluster",
        format!("VolumeSnapshot {SNAPSHOT} ready: content {content}, snapshot {handle}"),
    );
    Ok((content, handle))
}

/// The cloud holds the claim's share and exactly one new snapshot, `handle`, available.
pub(super) async fn ensure_only_snapshot(
    ctx: &TestContext<'_>,
    baseline: &Baseline,
    bound: &BoundClaim,
    handle: &str,
) -> TestResult {
    ensure_only_share(ctx, baseline, bound, 1).await?;
    let now = baseline.new_in(ctx.fake_cloud()?);
    ensure!(
        now.snapshots.len() == 1
            && now.snapshots[0].id == handle
            && now.snapshots[0].status == "available"
            && now.snapshots[0].share_id.as_deref() == Some(bound.share_id.as_str()),
        "want only snapshot {handle} of share {}, available: {}",
        bound.share_id,
        describe_resources(&now)
    );
    Ok(())
}

/// Waits until the `kind` object `name` is gone.
pub(super) async fn wait_dynamic_gone(
    ctx: &TestContext<'_>,
    api: &Api<DynamicObject>,
    kind: &str,
    name: &str,
) -> TestResult {
    let what = format!("{kind} {name} deleted");
    let gone = wait::wait_for_described(
        api,
        name,
        &what,
        |o: Option<&DynamicObject>| o.is_none(),
        STEP,
    )
    .await;
    ctx.workload().check(&what, gone).await?;
    ctx.timeline().record("cluster", what);
    Ok(())
}

/// Deletes the VolumeSnapshot and waits until it and its content are gone.
pub(super) async fn delete_snapshot(ctx: &TestContext<'_>, content: &str) -> TestResult {
    let w = ctx.workload();
    w.snapshots()
        .delete(SNAPSHOT, &DeleteParams::default())
        .await?;
    ctx.timeline()
        .record("cluster", format!("deleting VolumeSnapshot {SNAPSHOT}"));
    wait_dynamic_gone(ctx, &w.snapshots(), "VolumeSnapshot", SNAPSHOT).await?;
    let contents = snapshots::volume_snapshot_contents(&ctx.client());
    wait_dynamic_gone(ctx, &contents, "VolumeSnapshotContent", content).await?;
    Ok(())
}

/// Every snapshot ends in `error` until cleared: the user sees Manila's message on the
/// VolumeSnapshot, the driver deletes each failed snapshot, and once cleared one snapshot
/// is taken and ready.
pub(super) async fn snapshot_ends_in_error(ctx: &TestContext<'_>) -> TestResult {
    let cloud = ctx.fake_cloud()?;
    let faults = Faults::new(ctx)?;
    let baseline = Baseline::of(cloud);
    let (bound, class) = snapshot_source(ctx).await?;
    let w = ctx.workload();
    let message = "the backend could not take the snapshot";
    faults.inject(
        FaultRule::new(
            Operation::SnapshotCreate,
            FaultAction::Error {
                detail_id: "001".into(),
                message: Some(message.into()),
            },
        )
        .times(Times::ALWAYS),
    )?;
    create_snapshot(ctx, &class).await?;
    let event = wait_for_event(
        ctx,
        "snapshotter",
        w.namespace(),
        SNAPSHOT,
        "SnapshotCreationFailed",
        message,
        STEP,
    )
    .await?;
    ensure_names(
        "SnapshotCreationFailed",
        &event,
        &["status error", "rollback"],
    )?;
    let snapshot = w.snapshots().get(SNAPSHOT).await?;
    ensure!(
        !snapshots::is_ready(&snapshot),
        "VolumeSnapshot {SNAPSHOT} is ready although every snapshot failed: {}",
        snapshot.data["status"]
    );
    faults.clear();
    let (content, handle) = wait_snapshot_ready(ctx).await?;
    ensure_only_snapshot(ctx, &baseline, &bound, &handle).await?;
    delete_snapshot(ctx, &content).await?;
    delete_and_ensure_nothing_left(ctx, &baseline, &[CLAIM]).await
}

/// A snapshot stays `creating`: the VolumeSnapshot stays not ready, without an error, over
/// several of the snapshotter's checks; once Manila finishes it (an operator's reset), it is
/// ready, with that very snapshot.
pub(super) async fn snapshot_stuck_creating(ctx: &TestContext<'_>) -> TestResult {
    let cloud = ctx.fake_cloud()?;
    let faults = Faults::new(ctx)?;
    let admin = CloudInspector::new(cloud)?;
    let baseline = Baseline::of(cloud);
    let (bound, class) = snapshot_source(ctx).await?;
    let w = ctx.workload();
    faults.inject(FaultRule::new(
        Operation::SnapshotCreate,
        FaultAction::Stuck { status: None },
    ))?;
    create_snapshot(ctx, &class).await?;
    let stuck = wait_cloud(ctx, &baseline, "one snapshot creating", STEP, |now| {
        now.snapshots.len() == 1 && now.snapshots[0].status == "creating"
    })
    .await?;
    let stuck_id = stuck.snapshots[0].id.clone();
    // The snapshotter asks again, backing off: the snapshot is still not ready after looks
    // spread over seconds.
    let path = format!("/snapshots/{stuck_id}");
    let looks = wait::wait_until(
        format!("the driver to look at snapshot {stuck_id} over {STUCK_LOOKS_SPAN:?}"),
        STEP,
        || {
            let times: Vec<chrono::DateTime<chrono::FixedOffset>> = cloud
                .journal()
                .iter()
                .filter(|e| e.method == "GET" && e.path.ends_with(&path))
                .filter_map(|e| chrono::DateTime::parse_from_rfc3339(&e.at).ok())
                .collect();
            let span = match (times.first(), times.last()) {
                (Some(first), Some(last)) => (*last - *first).to_std().unwrap_or_default(),
                _ => Duration::ZERO,
            };
            let seen = format!("{} looks over {span:?}", times.len());
            std::future::ready(if times.len() >= 3 && span >= STUCK_LOOKS_SPAN {
                Ok(Some(seen))
            } else {
                Err(seen)
            })
        },
    )
    .await;
    let looks = w.check("the driver's looks at the snapshot", looks).await?;
    let snapshot = w.snapshots().get(SNAPSHOT).await?;
    ctx.timeline().record(
        "cluster",
        format!(
            "after {looks} VolumeSnapshot {SNAPSHOT} status: {}",
            snapshot.data["status"]
        ),
    );
    ensure!(
        !snapshots::is_ready(&snapshot),
        "VolumeSnapshot {SNAPSHOT} is ready although its snapshot is creating: {}",
        snapshot.data["status"]
    );
    ensure!(
        snapshot.data["status"]["error"].is_null(),
        "a snapshot still creating is reported as an error: {}",
        snapshot.data["status"]["error"]
    );
    faults.clear();
    admin
        .reset_status("snapshots", &stuck_id, "available")
        .await?;
    ctx.timeline().record(
        "clear",
        format!("an operator reset snapshot {stuck_id} to available (the backend finished)"),
    );
    let (content, handle) = wait_snapshot_ready(ctx).await?;
    ensure_eq!(
        handle.as_str(),
        stuck_id.as_str(),
        "the snapshot of the VolumeSnapshot"
    );
    ensure_only_snapshot(ctx, &baseline, &bound, &handle).await?;
    delete_snapshot(ctx, &content).await?;
    delete_and_ensure_nothing_left(ctx, &baseline, &[CLAIM]).await
}

/// Deleting a snapshot ends in `error_deleting`: the user sees Manila's message on the
/// content (the snapshot and content stay); once Manila can delete it again (an operator's
/// reset), the driver's retry deletes it.
pub(super) async fn snapshot_error_deleting(ctx: &TestContext<'_>) -> TestResult {
    let cloud = ctx.fake_cloud()?;
    let faults = Faults::new(ctx)?;
    let admin = CloudInspector::new(cloud)?;
    let baseline = Baseline::of(cloud);
    let (bound, class) = snapshot_source(ctx).await?;
    let w = ctx.workload();
    create_snapshot(ctx, &class).await?;
    let (content, handle) = wait_snapshot_ready(ctx).await?;
    let message = "the backend could not delete the snapshot";
    faults.inject(FaultRule::new(
        Operation::SnapshotDelete,
        FaultAction::Error {
            detail_id: "001".into(),
            message: Some(message.into()),
        },
    ))?;
    w.snapshots()
        .delete(SNAPSHOT, &DeleteParams::default())
        .await?;
    ctx.timeline()
        .record("cluster", format!("deleting VolumeSnapshot {SNAPSHOT}"));
    // The snapshotter reports about the (cluster-scoped) content, hence in `default`.
    let event = wait_for_event(
        ctx,
        "snapshotter",
        "default",
        &content,
        "SnapshotDeleteError",
        "error_deleting",
        STEP,
    )
    .await?;
    ensure_names("SnapshotDeleteError", &event, &[&handle, message])?;
    let during = baseline.new_in(cloud);
    ensure!(
        during
            .snapshots
            .iter()
            .any(|s| s.id == handle && s.status == "error_deleting"),
        "want snapshot {handle} in error_deleting: {}",
        describe_resources(&during)
    );
    let contents = snapshots::volume_snapshot_contents(&ctx.client());
    ensure!(
        contents.get_opt(&content).await?.is_some(),
        "VolumeSnapshotContent {content} went although its snapshot could not be deleted"
    );
    faults.clear();
    admin
        .reset_status("snapshots", &handle, "available")
        .await?;
    ctx.timeline().record(
        "clear",
        format!("an operator reset snapshot {handle} to available"),
    );
    wait_dynamic_gone(ctx, &w.snapshots(), "VolumeSnapshot", SNAPSHOT).await?;
    wait_dynamic_gone(ctx, &contents, "VolumeSnapshotContent", &content).await?;
    ensure_only_share(ctx, &baseline, &bound, 0).await?;
    delete_and_ensure_nothing_left(ctx, &baseline, &[CLAIM]).await
}
