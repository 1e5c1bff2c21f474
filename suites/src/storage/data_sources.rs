//! The `provisioning` tests of upstream's `provisioning.go` about where a volume's data comes
//! from and what else may point at it: a snapshot data source (also into a larger claim, and
//! read-only many), a claim data source (clone, also into a larger claim), and two PVs of
//! one volume handle.

use driver_spec::Capability;
use k8s_openapi::api::core::v1::{
    ObjectReference, PersistentVolume, PersistentVolumeClaim, TypedLocalObjectReference,
};
use kube::api::{Api, PostParams};

use super::data::{check_seeded, filesystem_size, write_seeded};
use super::provisioning::{access_mode, is_manila};
use super::{bind_claim, node_of};
use crate::e2e::workload::{PodBuilder, claim, claim_from_snapshot, volume_capacity};
use crate::registry::{Needs, TestCase, TestContext, TestError, TestResult};
use crate::{ensure, ensure_eq, test_case};

const SUITE: &str = "provisioning";

/// The tests, in the `provisioning` suite.
pub fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            SUITE,
            "should provision storage with snapshot data source",
            Needs::capabilities(&[Capability::SnapshotDataSource, Capability::Exec])
                .snapshot_class(),
            snapshot_source
        ),
        test_case!(
            SUITE,
            "should provision correct filesystem size when restoring snapshot to larger size pvc",
            Needs::capabilities(&[Capability::SnapshotDataSource, Capability::Exec])
                .snapshot_class(),
            larger_restore
        ),
        test_case!(
            SUITE,
            "should provision storage with snapshot data source (ROX mode)",
            Needs::capabilities(&[
                Capability::SnapshotDataSource,
                Capability::ReadOnlyMany,
                Capability::Exec
            ])
            .snapshot_class(),
            read_only_many_from_snapshot
        ),
        test_case!(
            SUITE,
            "should provision storage with pvc data source",
            Needs::capabilities(&[Capability::PvcDataSource, Capability::Exec]),
            clone
        ),
        test_case!(
            SUITE,
            "should provision storage with pvc data source into a larger claim, its filesystem grown to the claim's size",
            Needs::capabilities(&[Capability::PvcDataSource, Capability::Exec]),
            larger_clone
        ),
        test_case!(
            SUITE,
            "should mount multiple PV pointing to the same storage on the same node",
            Needs::capabilities(&[Capability::MultiplePvsSameId, Capability::Exec]),
            two_pvs_one_handle
        ),
    ]
}

/// A claim `source` with seeded data (seed 1, in `/data`), written by a pod that is gone;
/// the class and the node the pod ran on (where a late binding class made the volume).
async fn source_with_data(ctx: &TestContext<'_>) -> TestResult<(String, String)> {
    let class = ctx.storage_class().await?;
    let w = ctx.workload();
    w.create_claim(&claim(
        "source",
        Some(&class),
        &ctx.claim_size(),
        access_mode(ctx),
    ))
    .await?;
    let writer = w
        .ready_pod(
            &PodBuilder::new("writer", "true")
                .claim("source", "/data")
                .build(),
        )
        .await?;
    w.wait_bound("source").await?;
    let node = node_of(&writer).ok_or_else(|| TestError::failed("the writer pod has no node"))?;
    write_seeded(w, "writer", "/data/data", 1).await?;
    w.delete_pods(&["writer"]).await?;
    Ok((class, node))
}

/// [`source_with_data`] and a ready snapshot `snap` of it; the class and the source's node.
async fn snapshotted_source(ctx: &TestContext<'_>) -> TestResult<(String, String)> {
    let (class, node) = source_with_data(ctx).await?;
    let snapshot_class = ctx.snapshot_class().await?;
    ctx.workload()
        .ready_snapshot("snap", "source", &snapshot_class)
        .await?;
    Ok((class, node))
}

/// A file system of a claim made larger than its source is grown past the source's size (a
/// volume of the driver's own file system; a Manila share has none to grow).
async fn check_grown(ctx: &TestContext<'_>, pod: &str, source_bytes: i64) -> TestResult {
    if is_manila(ctx) {
        return Ok(());
    }
    let size = filesystem_size(ctx.workload(), pod, "/data").await?;
    ensure!(
        i64::try_from(size).unwrap_or(i64::MAX) > source_bytes,
        "the file system of the larger claim is {size} bytes, not grown past the source's \
         {source_bytes} bytes"
    );
    Ok(())
}

async fn snapshot_source(ctx: &TestContext<'_>) -> TestResult {
    let (class, node) = snapshotted_source(ctx).await?;
    let w = ctx.workload();
    let size = ctx.claim_size();
    bind_claim(
        ctx,
        &claim_from_snapshot("restored", Some(&class), &size, access_mode(ctx), "snap"),
        Some(&node),
    )
    .await?;
    w.ready_pod(
        &PodBuilder::new("reader", "true")
            .claim("restored", "/data")
            .build(),
    )
    .await?;
    check_seeded(w, "reader", "/data/data", 1).await?;
    w.delete_pods(&["reader"]).await?;
    Ok(())
}

async fn larger_restore(ctx: &TestContext<'_>) -> TestResult {
    let (class, node) = snapshotted_source(ctx).await?;
    let w = ctx.workload();
    let bytes = kube_support::quantity::parse_bytes(&ctx.claim_size()).unwrap_or(1 << 30);
    let larger = kube_support::quantity::format_bytes(bytes + (1 << 30));
    let restored = bind_claim(
        ctx,
        &claim_from_snapshot("larger", Some(&class), &larger, access_mode(ctx), "snap"),
        Some(&node),
    )
    .await?;
    ensure_eq!(
        volume_capacity(&restored.volume).as_deref(),
        Some(larger.as_str()),
        "the restored PV's capacity"
    );
    if let (Ok(cloud), true) = (ctx.cloud(), is_manila(ctx)) {
        let share = cloud
            .share(&restored.share_id)
            .await?
            .ok_or_else(|| TestError::failed("the restored share is not in the cloud"))?;
        let gib = u64::try_from(bytes + (1 << 30))
            .unwrap_or(0)
            .div_ceil(1 << 30);
        ensure_eq!(share.size, gib, "the restored share's size in GiB");
        ensure!(
            share.snapshot_id.is_some(),
            "the restored share has no source snapshot"
        );
    }
    w.ready_pod(
        &PodBuilder::new("reader", "true")
            .claim("larger", "/data")
            .build(),
    )
    .await?;
    check_seeded(w, "reader", "/data/data", 1).await?;
    check_grown(ctx, "reader", bytes).await?;
    w.delete_pods(&["reader"]).await?;
    Ok(())
}

async fn read_only_many_from_snapshot(ctx: &TestContext<'_>) -> TestResult {
    let (class, node) = snapshotted_source(ctx).await?;
    let w = ctx.workload();
    bind_claim(
        ctx,
        &claim_from_snapshot(
            "rox",
            Some(&class),
            &ctx.claim_size(),
            "ReadOnlyMany",
            "snap",
        ),
        Some(&node),
    )
    .await?;
    w.ready_pod(
        &PodBuilder::new("reader", "true")
            .read_only_claim("rox", "/data")
            .build(),
    )
    .await?;
    check_seeded(w, "reader", "/data/data", 1).await?;
    ensure!(
        w.exec("reader", "echo x > /data/x").await.is_err(),
        "a ReadOnlyMany volume mounted read-only took a write"
    );
    w.delete_pods(&["reader"]).await?;
    Ok(())
}

/// Upstream's pvc data source test: a clone of a claim holds its data; `larger`: the clone
/// is 1 GiB larger than its source, its PV has that size and its file system is grown.
async fn clone_into(ctx: &TestContext<'_>, larger: bool) -> TestResult {
    let (class, node) = source_with_data(ctx).await?;
    let w = ctx.workload();
    let source_bytes = kube_support::quantity::parse_bytes(&ctx.claim_size()).unwrap_or(1 << 30);
    let size = if larger {
        kube_support::quantity::format_bytes(source_bytes + (1 << 30))
    } else {
        ctx.claim_size()
    };
    let mut cloned = claim("clone", Some(&class), &size, access_mode(ctx));
    if let Some(spec) = cloned.spec.as_mut() {
        spec.data_source = Some(TypedLocalObjectReference {
            api_group: None,
            kind: "PersistentVolumeClaim".into(),
            name: "source".into(),
        });
    }
    // In the source's place: a zonal volume is cloned in its zone.
    let bound = bind_claim(ctx, &cloned, Some(&node)).await?;
    ensure_eq!(
        volume_capacity(&bound.volume).as_deref(),
        Some(size.as_str()),
        "the clone's PV capacity"
    );
    w.ready_pod(
        &PodBuilder::new("reader", "true")
            .claim("clone", "/data")
            .build(),
    )
    .await?;
    check_seeded(w, "reader", "/data/data", 1).await?;
    if larger {
        check_grown(ctx, "reader", source_bytes).await?;
    }
    w.delete_pods(&["reader"]).await?;
    Ok(())
}

async fn clone(ctx: &TestContext<'_>) -> TestResult {
    clone_into(ctx, false).await
}

async fn larger_clone(ctx: &TestContext<'_>) -> TestResult {
    clone_into(ctx, true).await
}

/// A second PV with the first one's volume handle (and everything the driver needs to use
/// it), bound to a second claim; a pod of each claim on the same node, running at once, see
/// one volume.
async fn two_pvs_one_handle(ctx: &TestContext<'_>) -> TestResult {
    let class = ctx.storage_class().await?;
    let w = ctx.workload();
    let size = ctx.claim_size();
    let mode = access_mode(ctx);
    let first = bind_claim(ctx, &claim("first", Some(&class), &size, mode), None).await?;
    let spec = first
        .volume
        .spec
        .clone()
        .ok_or_else(|| TestError::failed("the first PV has no spec"))?;
    let name = format!("{}-second", w.namespace());
    let mut second = PersistentVolume::default();
    second.metadata.name = Some(name.clone());
    second.metadata.labels = Some(w.labels());
    second.spec = Some(k8s_openapi::api::core::v1::PersistentVolumeSpec {
        claim_ref: Some(ObjectReference {
            namespace: Some(w.namespace().into()),
            name: Some("second".into()),
            ..Default::default()
        }),
        // Not the class: nothing may delete the volume through this PV.
        storage_class_name: Some(String::new()),
        persistent_volume_reclaim_policy: Some("Retain".into()),
        node_affinity: spec.node_affinity.clone(),
        ..spec
    });
    let volumes: Api<PersistentVolume> = Api::all(ctx.client());
    volumes.create(&PostParams::default(), &second).await?;
    let mut claim_two: PersistentVolumeClaim = claim("second", None, &size, mode);
    if let Some(spec) = claim_two.spec.as_mut() {
        spec.storage_class_name = Some(String::new());
        spec.volume_name = Some(name.clone());
    }
    bind_claim(ctx, &claim_two, None).await?;
    // As upstream: one pod per claim, on the same node, both running at once.
    let first_pod = w
        .ready_pod(
            &PodBuilder::new("one", "true")
                .claim("first", "/mnt/volume")
                .build(),
        )
        .await?;
    let node =
        super::node_of(&first_pod).ok_or_else(|| TestError::failed("pod one has no node"))?;
    w.ready_pod(
        &PodBuilder::new("two", "true")
            .claim("second", "/mnt/volume")
            .node(&node)
            .build(),
    )
    .await?;
    write_seeded(w, "one", "/mnt/volume/data", 3).await?;
    check_seeded(w, "two", "/mnt/volume/data", 3).await?;
    w.delete_pods(&["one", "two"]).await?;
    // The second PV (Retain, no class) goes by hand once its claim is gone.
    w.claims
        .delete("second", &kube::api::DeleteParams::default())
        .await?;
    let released = kube_support::wait::wait_for_described(
        &volumes,
        &name,
        &format!("PV {name} Released"),
        |pv: Option<&PersistentVolume>| {
            pv.and_then(|p| p.status.as_ref())
                .and_then(|s| s.phase.as_deref())
                == Some("Released")
        },
        super::WAIT,
    )
    .await;
    w.check("the second PV Released", released).await?;
    volumes
        .delete(&name, &kube::api::DeleteParams::default())
        .await?;
    Ok(())
}
