//! Faults during expansion and deletion.

use super::guard::{
    Baseline, Faults, delete_and_ensure_nothing_left, ensure_names, ensure_only_share, test_claim,
    wait_cloud, wait_for_event,
};
use super::provisioning::http_error_always;
use super::{CLAIM, STEP};
use crate::e2e::workload::{claim_capacity, volume_capacity};
use crate::ensure;
use crate::registry::{TestContext, TestResult};
use fakes::Operation;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube_support::wait;

/// ShareExtend answers 500 until cleared: the resize is reported and not done; afterwards
/// the share, the PV and the claim grow.
pub(super) async fn share_extend_500(ctx: &TestContext<'_>) -> TestResult {
    let cloud = ctx.fake_cloud()?;
    let faults = Faults::new(ctx)?;
    let baseline = Baseline::of(cloud);
    let class = ctx
        .storage_class_with("expandable", |class| {
            class.allow_volume_expansion = Some(true);
        })
        .await?;
    let w = ctx.workload();
    let bound = w.bound_claim(&test_claim(ctx, CLAIM, &class)).await?;
    let size = ctx.claim_size();
    let bytes = kube_support::quantity::parse_bytes(&size).unwrap_or(1 << 30) + (1 << 30);
    let bigger = kube_support::quantity::format_bytes(bytes);
    let gib = u64::try_from(bytes).unwrap_or(0).div_ceil(1 << 30);
    let message = "The extend operation failed in the share driver.";
    faults.inject(http_error_always(Operation::ShareExtend, 500, message))?;
    let patch = serde_json::json!({"spec": {"resources": {"requests": {"storage": bigger}}}});
    w.claims
        .patch(CLAIM, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    ctx.timeline()
        .record("cluster", format!("claim {CLAIM} resized to {bigger}"));
    let event = wait_for_event(
        ctx,
        "resizer",
        w.namespace(),
        CLAIM,
        "VolumeResizeFailed",
        "HTTP 500",
        STEP,
    )
    .await?;
    ensure_names(
        "VolumeResizeFailed",
        &event,
        &[message, &bound.share_id, "code = Internal"],
    )?;
    let share = ctx.cloud()?.share(&bound.share_id).await?;
    ensure!(
        share
            .as_ref()
            .is_some_and(|s| s.size < gib && s.status == "available"),
        "the share changed although Manila refused the extension: {share:?}"
    );
    faults.clear();
    crate::storage::wait_share(
        ctx,
        &bound.share_id,
        &format!("extended to {gib} GiB"),
        |s| s.size == gib && s.status == "available",
    )
    .await?;
    let pv_name = bound.volume_name().to_string();
    let volumes: Api<PersistentVolume> = Api::all(ctx.client());
    let pv_grown = wait::wait_for_described(
        &volumes,
        &pv_name,
        &format!("PV {pv_name} capacity {bigger}"),
        |pv: Option<&PersistentVolume>| {
            pv.and_then(volume_capacity).as_deref() == Some(bigger.as_str())
        },
        STEP,
    )
    .await;
    w.check("PV capacity grown", pv_grown).await?;
    let claim_grown = wait::wait_for_described(
        &w.claims,
        CLAIM,
        &format!("PVC {CLAIM} status capacity {bigger}"),
        |c: Option<&PersistentVolumeClaim>| {
            c.and_then(claim_capacity).as_deref() == Some(bigger.as_str())
        },
        STEP,
    )
    .await;
    w.check("PVC capacity grown", claim_grown).await?;
    ctx.timeline().record(
        "cluster",
        format!("PV {pv_name} and claim {CLAIM} have {bigger}, the share {gib} GiB"),
    );
    ensure_only_share(ctx, &baseline, &bound, 0).await?;
    delete_and_ensure_nothing_left(ctx, &baseline, &[CLAIM]).await
}

/// ShareDelete answers 500 until cleared: the PV stays with the event; afterwards the
/// share and the PV go.
pub(super) async fn share_delete_500(ctx: &TestContext<'_>) -> TestResult {
    let cloud = ctx.fake_cloud()?;
    let faults = Faults::new(ctx)?;
    let baseline = Baseline::of(cloud);
    let class = ctx.storage_class().await?;
    let w = ctx.workload();
    let bound = w.bound_claim(&test_claim(ctx, CLAIM, &class)).await?;
    let pv_name = bound.volume_name().to_string();
    let message = "The share could not be deleted by the share driver.";
    faults.inject(http_error_always(Operation::ShareDelete, 500, message))?;
    w.claims.delete(CLAIM, &DeleteParams::default()).await?;
    ctx.timeline()
        .record("cluster", format!("deleting claim {CLAIM}"));
    // The provisioner reports about the (cluster-scoped) PV, hence in `default`.
    let event = wait_for_event(
        ctx,
        "provisioner",
        "default",
        &pv_name,
        "VolumeFailedDelete",
        "HTTP 500",
        STEP,
    )
    .await?;
    ensure_names(
        "VolumeFailedDelete",
        &event,
        &[message, &bound.share_id, "code = Internal"],
    )?;
    let volumes: Api<PersistentVolume> = Api::all(ctx.client());
    let pv = volumes.get_opt(&pv_name).await?;
    ensure!(
        pv.is_some(),
        "PV {pv_name} went although its share could not be deleted"
    );
    let still = ctx.cloud()?.share(&bound.share_id).await?;
    ensure!(
        still.is_some(),
        "share {} went although Manila refused to delete it",
        bound.share_id
    );
    faults.clear();
    wait_cloud(
        ctx,
        &baseline,
        "nothing the test made (no share, snapshot or access rule)",
        STEP,
        |now| now.is_empty(),
    )
    .await?;
    let gone = wait::wait_deleted(&volumes, &pv_name, STEP).await;
    w.check("the PV deleted", gone).await?;
    ctx.timeline()
        .record("cluster", format!("PV {pv_name} deleted"));
    Ok(())
}
