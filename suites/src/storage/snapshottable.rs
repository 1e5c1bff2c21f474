//! `snapshottable`: VolumeSnapshots of the driver's volumes, and claims restored from them.

use harness::cluster::wait;
use harness::driver_spec::Capability;
use kube::api::{DeleteParams, DynamicObject};

use super::WAIT;
use super::provisioning::{access_mode, is_manila};
use crate::conformance::{Needs, TestCase, TestContext, TestError, TestResult};
use crate::e2e::snapshots;
use crate::e2e::workload::{claim, claim_from_snapshot, pod_with_claim};
use crate::{ensure, ensure_eq, test_case};

const SUITE: &str = "snapshottable";

/// The suite's tests.
pub fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            SUITE,
            "should create a snapshot ready to use, backed by a snapshot in the cloud, and delete both with the VolumeSnapshot",
            Needs::capabilities(&[Capability::SnapshotDataSource]).snapshot_class(),
            snapshot_and_delete
        ),
        test_case!(
            SUITE,
            "should restore a snapshot into a claim holding the data written before it, not after",
            Needs::capabilities(&[Capability::SnapshotDataSource, Capability::Exec])
                .snapshot_class(),
            restore
        ),
    ]
}

/// The VolumeSnapshotContent bound to a snapshot.
fn bound_content(snapshot: &DynamicObject) -> TestResult<String> {
    let status = &snapshot.data["status"];
    status["boundVolumeSnapshotContentName"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| {
            TestError::failed(format!(
                "no bound content in the snapshot's status {status}"
            ))
        })
}

async fn snapshot_and_delete(ctx: &TestContext<'_>) -> TestResult {
    let class = ctx.storage_class().await?;
    let snapshot_class = ctx.snapshot_class().await?;
    let w = ctx.workload();
    let source = w
        .bound_claim(&claim(
            "source",
            Some(&class),
            &ctx.claim_size(),
            access_mode(ctx),
        ))
        .await?;
    let ready = w.ready_snapshot("snap", "source", &snapshot_class).await?;
    let content_name = bound_content(&ready)?;
    let contents = snapshots::volume_snapshot_contents(&ctx.client());
    let content = contents.get(&content_name).await?;
    let handle = content.data["status"]["snapshotHandle"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| {
            TestError::failed(format!("no snapshotHandle in {}", content.data["status"]))
        })?;
    ensure!(
        snapshots::is_ready(&content),
        "content not ready: {}",
        content.data["status"]
    );
    ensure_eq!(
        content.data["spec"]["driver"].as_str(),
        Some(ctx.driver().name.as_str()),
        "the content's driver"
    );

    if let (Ok(cloud), true) = (ctx.cloud(), is_manila(ctx)) {
        let snapshot = cloud
            .snapshot(&handle)
            .await?
            .ok_or_else(|| TestError::failed(format!("no snapshot {handle} in the cloud")))?;
        ensure_eq!(
            snapshot.share_id.as_str(),
            source.share_id.as_str(),
            "the snapshot's share"
        );
        ensure_eq!(
            snapshot.status.as_str(),
            "available",
            "the snapshot's status"
        );
    }

    w.snapshots()
        .delete("snap", &DeleteParams::default())
        .await?;
    let content_gone = wait::wait_for_described(
        &contents,
        &content_name,
        &format!("VolumeSnapshotContent {content_name} deleted"),
        |c: Option<&DynamicObject>| c.is_none(),
        WAIT,
    )
    .await;
    w.check(
        "VolumeSnapshotContent deleted with the snapshot",
        content_gone,
    )
    .await?;
    if let (Ok(cloud), true) = (ctx.cloud(), is_manila(ctx)) {
        let gone = wait::wait_until(format!("snapshot {handle} deleted"), WAIT, || async {
            match cloud.snapshot(&handle).await {
                Ok(None) => Ok(Some(())),
                Ok(Some(s)) => Err(format!("status {}", s.status)),
                Err(e) => Err(e.to_string()),
            }
        })
        .await;
        w.check("snapshot deleted in the cloud", gone).await?;
    }
    Ok(())
}

async fn restore(ctx: &TestContext<'_>) -> TestResult {
    let class = ctx.storage_class().await?;
    let snapshot_class = ctx.snapshot_class().await?;
    let w = ctx.workload();
    let size = ctx.claim_size();
    let mode = access_mode(ctx);
    w.bound_claim(&claim("source", Some(&class), &size, mode))
        .await?;
    w.ready_pod(&pod_with_claim(
        "writer",
        "source",
        None,
        "echo snapshotted > /data/payload && sync",
    ))
    .await?;
    ensure_eq!(
        w.exec("writer", "cat /data/payload").await?,
        "snapshotted\n",
        "the data written"
    );
    w.ready_snapshot("snap", "source", &snapshot_class).await?;
    // Written after the snapshot: must not appear in the restored claim.
    w.exec("writer", "echo later > /data/after-snapshot")
        .await?;

    let restored = w
        .bound_claim(&claim_from_snapshot(
            "restored",
            Some(&class),
            &size,
            mode,
            "snap",
        ))
        .await?;
    if let (Ok(cloud), true) = (ctx.cloud(), is_manila(ctx)) {
        let share = cloud
            .share(&restored.share_id)
            .await?
            .ok_or_else(|| TestError::failed("the restored share is not in the cloud"))?;
        ensure!(
            share.snapshot_id.is_some(),
            "the restored share has no source snapshot: {share:?}"
        );
    }
    w.ready_pod(&pod_with_claim("reader", "restored", None, "true"))
        .await?;
    ensure_eq!(
        w.exec("reader", "cat /data/payload").await?,
        "snapshotted\n",
        "the restored data"
    );
    ensure_eq!(
        w.exec("reader", "ls /data").await?,
        "payload\n",
        "the restored files"
    );
    w.delete_pods(&["writer", "reader"]).await?;
    // The snapshot first: Manila keeps a share that still has snapshots.
    w.snapshots()
        .delete("snap", &DeleteParams::default())
        .await?;
    Ok(())
}
