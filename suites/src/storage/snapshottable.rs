//! `snapshottable` (upstream `snapshottable.go`): VolumeSnapshots of the driver's volumes,
//! dynamic and pre-provisioned, with deletion policy Delete and Retain: the snapshot's and
//! content's fields and references, the snapshot in the cloud, a restore that holds the data
//! as it was when the snapshot was taken, and what deleting the snapshot deletes.

use driver_spec::Capability;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube_support::wait;

use super::WAIT;
use super::bind_claim;
use super::data::{check_seeded, write_seeded};
use super::provisioning::{access_mode, is_manila};
use crate::e2e::snapshots;
use crate::e2e::workload::{PodBuilder, claim, claim_from_snapshot};
use crate::registry::{Needs, TestCase, TestContext, TestError, TestResult};
use crate::{ensure, ensure_eq, test_case};

const SUITE: &str = "snapshottable";

const SNAPSHOTS: Needs =
    Needs::capabilities(&[Capability::SnapshotDataSource, Capability::Exec]).snapshot_class();

/// The suite's tests.
pub fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            SUITE,
            "should check snapshot fields, check restore correctly works after modifying source data, check deletion (dynamic snapshot, Delete policy)",
            SNAPSHOTS,
            dynamic_delete
        ),
        test_case!(
            SUITE,
            "should check snapshot fields, check restore correctly works after modifying source data, check deletion (dynamic snapshot, Retain policy)",
            SNAPSHOTS,
            dynamic_retain
        ),
        test_case!(
            SUITE,
            "should check snapshot fields, check restore correctly works after modifying source data, check deletion (pre-provisioned snapshot, Delete policy)",
            SNAPSHOTS,
            preprovisioned_delete
        ),
        test_case!(
            SUITE,
            "should check snapshot fields, check restore correctly works after modifying source data, check deletion (pre-provisioned snapshot, Retain policy)",
            SNAPSHOTS,
            preprovisioned_retain
        ),
    ]
}

async fn dynamic_delete(ctx: &TestContext<'_>) -> TestResult {
    snapshot_pattern(ctx, false, "Delete").await
}

async fn dynamic_retain(ctx: &TestContext<'_>) -> TestResult {
    snapshot_pattern(ctx, false, "Retain").await
}

async fn preprovisioned_delete(ctx: &TestContext<'_>) -> TestResult {
    snapshot_pattern(ctx, true, "Delete").await
}

async fn preprovisioned_retain(ctx: &TestContext<'_>) -> TestResult {
    snapshot_pattern(ctx, true, "Retain").await
}

/// A snapshot class of the test, `<namespace>-<suffix>`, with `policy`.
async fn snapshot_class(ctx: &TestContext<'_>, suffix: &str, policy: &str) -> TestResult<String> {
    ctx.snapshot_class_with(suffix, |class| {
        class.data["deletionPolicy"] = serde_json::json!(policy);
    })
    .await
}

/// A string field of a snapshot object, or a failure naming it.
fn field(object: &DynamicObject, pointer: &str) -> TestResult<String> {
    object
        .data
        .pointer(pointer)
        .and_then(|v| v.as_str())
        .map(str::to_string)
        .ok_or_else(|| {
            TestError::failed(format!(
                "{} has no {pointer}: {}",
                object.metadata.name.as_deref().unwrap_or("?"),
                object.data
            ))
        })
}

/// Waits until the VolumeSnapshotContent `name` is gone.
async fn wait_content_gone(ctx: &TestContext<'_>, name: &str) -> TestResult {
    let contents = snapshots::volume_snapshot_contents(&ctx.client());
    let gone = wait::wait_for_described(
        &contents,
        name,
        &format!("VolumeSnapshotContent {name} deleted"),
        |c: Option<&DynamicObject>| c.is_none(),
        WAIT,
    )
    .await;
    ctx.workload()
        .check(&format!("VolumeSnapshotContent {name} deleted"), gone)
        .await?;
    Ok(())
}

/// Waits until the cloud no longer has the snapshot `id` (Manila drivers, cloud at hand).
async fn wait_cloud_snapshot_gone(ctx: &TestContext<'_>, id: &str) -> TestResult {
    let (Ok(cloud), true) = (ctx.cloud(), is_manila(ctx)) else {
        return Ok(());
    };
    let gone = wait::wait_until(
        format!("snapshot {id} deleted in the cloud"),
        WAIT,
        || async {
            match cloud.snapshot(id).await {
                Ok(None) => Ok(Some(())),
                Ok(Some(s)) => Err(format!("status {}", s.status)),
                Err(e) => Err(e.to_string()),
            }
        },
    )
    .await;
    ctx.workload()
        .check("snapshot deleted in the cloud", gone)
        .await?;
    Ok(())
}

/// Checks the cloud has the snapshot `id` of the share `share_id`, available.
async fn check_cloud_snapshot(ctx: &TestContext<'_>, id: &str, share_id: &str) -> TestResult {
    let (Ok(cloud), true) = (ctx.cloud(), is_manila(ctx)) else {
        return Ok(());
    };
    let snapshot = cloud
        .snapshot(id)
        .await?
        .ok_or_else(|| TestError::failed(format!("no snapshot {id} in the cloud")))?;
    ensure_eq!(
        snapshot.share_id.as_str(),
        share_id,
        "the cloud snapshot's share"
    );
    ensure_eq!(
        snapshot.status.as_str(),
        "available",
        "the cloud snapshot's status"
    );
    Ok(())
}

/// Deletes a content whose policy is Retain the way an administrator would: switch it to
/// Delete, delete it, and wait until it and the cloud's snapshot are gone.
async fn delete_retained_content(ctx: &TestContext<'_>, name: &str, handle: &str) -> TestResult {
    let contents = snapshots::volume_snapshot_contents(&ctx.client());
    let patch = serde_json::json!({"spec": {"deletionPolicy": "Delete"}});
    contents
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    contents.delete(name, &DeleteParams::default()).await?;
    wait_content_gone(ctx, name).await?;
    wait_cloud_snapshot_gone(ctx, handle).await
}

/// A snapshot handle made for a pre-provisioned test: a dynamic snapshot with a Retain class,
/// whose VolumeSnapshot and content are then deleted, leaving only the cloud's snapshot.
async fn handle_for_preprovisioning(ctx: &TestContext<'_>) -> TestResult<String> {
    let w = ctx.workload();
    let class = snapshot_class(ctx, "vsc-source", "Retain").await?;
    let snapshot = w.ready_snapshot("source-snap", "source", &class).await?;
    let content_name = field(&snapshot, "/status/boundVolumeSnapshotContentName")?;
    let contents = snapshots::volume_snapshot_contents(&ctx.client());
    let content = contents.get(&content_name).await?;
    let handle = field(&content, "/status/snapshotHandle")?;
    w.snapshots()
        .delete("source-snap", &DeleteParams::default())
        .await?;
    let gone = wait::wait_for_described(
        &w.snapshots(),
        "source-snap",
        "VolumeSnapshot source-snap deleted",
        |s: Option<&DynamicObject>| s.is_none(),
        WAIT,
    )
    .await;
    w.check("the source snapshot deleted", gone).await?;
    contents
        .delete(&content_name, &DeleteParams::default())
        .await?;
    wait_content_gone(ctx, &content_name).await?;
    Ok(handle)
}

/// Upstream's "should check snapshot fields, check restore correctly works after modifying
/// source data, check deletion", for a dynamic or pre-provisioned snapshot with `policy`.
async fn snapshot_pattern(ctx: &TestContext<'_>, preprovisioned: bool, policy: &str) -> TestResult {
    let class = ctx.storage_class().await?;
    let w = ctx.workload();
    let namespace = w.namespace().to_string();
    let size = ctx.claim_size();
    let mode = access_mode(ctx);
    let source = bind_claim(ctx, &claim("source", Some(&class), &size, mode), None).await?;
    w.ready_pod(
        &PodBuilder::new("writer", "true")
            .claim("source", "/data")
            .build(),
    )
    .await?;
    write_seeded(w, "writer", "/data/data", 1).await?;

    let contents = snapshots::volume_snapshot_contents(&ctx.client());
    let used_class;
    let (snapshot, content_name) = if preprovisioned {
        let handle = handle_for_preprovisioning(ctx).await?;
        // The content names a class so the snapshotter finds the secret to delete with (a
        // driver that needs credentials needs them for DeleteSnapshot too).
        let class_name = snapshot_class(ctx, "vsc", policy).await?;
        let content_name = format!("{namespace}-pre");
        let resource = snapshots::volume_snapshot_content_resource();
        let mut content = DynamicObject::new(&content_name, &resource);
        content.metadata.labels = Some(w.labels());
        content.data = serde_json::json!({
            "spec": {
                "deletionPolicy": policy,
                "driver": ctx.driver().name,
                "volumeSnapshotClassName": class_name,
                "source": {"snapshotHandle": handle},
                "volumeSnapshotRef": {"name": "snap", "namespace": namespace},
            }
        });
        contents.create(&PostParams::default(), &content).await?;
        let resource = snapshots::volume_snapshot_resource();
        let mut snapshot = DynamicObject::new("snap", &resource);
        snapshot.data = serde_json::json!({
            "spec": {"source": {"volumeSnapshotContentName": content_name}}
        });
        w.snapshots()
            .create(&PostParams::default(), &snapshot)
            .await?;
        used_class = Some(class_name);
        let ready = snapshots::wait_ready(&w.snapshots(), "snap", WAIT).await;
        (
            w.check("VolumeSnapshot snap readyToUse", ready).await?,
            content_name,
        )
    } else {
        let name = snapshot_class(ctx, "vsc", policy).await?;
        let snapshot = w.ready_snapshot("snap", "source", &name).await?;
        used_class = Some(name);
        let content_name = field(&snapshot, "/status/boundVolumeSnapshotContentName")?;
        (snapshot, content_name)
    };

    // The fields: snapshot and content bound to each other, ready, of the driver.
    ensure_eq!(
        field(&snapshot, "/status/boundVolumeSnapshotContentName")?,
        content_name,
        "the snapshot's bound content"
    );
    let content = contents.get(&content_name).await?;
    ensure!(
        snapshots::is_ready(&content),
        "content not ready: {}",
        content.data["status"]
    );
    ensure_eq!(
        field(&content, "/spec/volumeSnapshotRef/name")?,
        "snap",
        "the content's snapshot name"
    );
    ensure_eq!(
        field(&content, "/spec/volumeSnapshotRef/namespace")?,
        namespace,
        "the content's snapshot namespace"
    );
    ensure_eq!(
        field(&content, "/spec/driver")?,
        ctx.driver().name,
        "the content's driver"
    );
    ensure_eq!(
        field(&content, "/spec/deletionPolicy")?,
        policy,
        "the content's deletion policy"
    );
    if let Some(class) = &used_class {
        ensure_eq!(
            field(&content, "/spec/volumeSnapshotClassName")?,
            class.as_str(),
            "the content's snapshot class"
        );
    }
    let handle = field(&content, "/status/snapshotHandle")?;
    check_cloud_snapshot(ctx, &handle, &source.share_id).await?;

    // The source changes after the snapshot; the restore holds the data of the snapshot.
    write_seeded(w, "writer", "/data/data", 2).await?;
    bind_claim(
        ctx,
        &claim_from_snapshot("restored", Some(&class), &size, mode, "snap"),
        None,
    )
    .await?;
    w.ready_pod(
        &PodBuilder::new("reader", "true")
            .claim("restored", "/data")
            .build(),
    )
    .await?;
    check_seeded(w, "reader", "/data/data", 1).await?;
    check_seeded(w, "writer", "/data/data", 2).await?;
    w.delete_pods(&["writer", "reader"]).await?;

    // Deleting the snapshot: with Delete its content and the cloud's snapshot go; with
    // Retain both stay until the content is deleted by hand.
    w.snapshots()
        .delete("snap", &DeleteParams::default())
        .await?;
    let gone = wait::wait_for_described(
        &w.snapshots(),
        "snap",
        "VolumeSnapshot snap deleted",
        |s: Option<&DynamicObject>| s.is_none(),
        WAIT,
    )
    .await;
    w.check("VolumeSnapshot snap deleted", gone).await?;
    if policy == "Delete" {
        wait_content_gone(ctx, &content_name).await?;
        wait_cloud_snapshot_gone(ctx, &handle).await?;
    } else {
        let kept = contents.get_opt(&content_name).await?;
        ensure!(
            kept.is_some(),
            "the Retain content {content_name} was deleted with its snapshot"
        );
        check_cloud_snapshot(ctx, &handle, &source.share_id).await?;
        delete_retained_content(ctx, &content_name, &handle).await?;
    }
    Ok(())
}
