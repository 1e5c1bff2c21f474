//! `volume-expand` (upstream `volume_expand.go`): resizing refused without
//! `allowVolumeExpansion`; claims resized while no pod uses them (also with a pod re-created
//! on the grown volume, as upstream's offline test) and while a pod uses them.

use driver_spec::Capability;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::api::{Api, Patch, PatchParams};
use kube_support::wait;

use super::bind_claim;
use super::data::filesystem_size;
use super::provisioning::{access_mode, is_manila};
use super::{WAIT, restarts, wait_share};
use crate::e2e::workload::{
    claim, claim_capacity, describe_pod, pod_is_ready, pod_with_claim, volume_capacity,
};
use crate::registry::{Needs, TestCase, TestContext, TestError, TestResult};
use crate::{ensure, ensure_eq, test_case};

const SUITE: &str = "volume-expand";

/// The suite's tests.
pub fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            SUITE,
            "should not allow expansion of pvcs without AllowVolumeExpansion property",
            Needs::NONE,
            expansion_refused
        ),
        test_case!(
            SUITE,
            "Verify if offline PVC expansion works (a pod re-created on the volume after a controller resize)",
            Needs::capabilities(&[
                Capability::ControllerExpansion,
                Capability::OfflineExpansion,
                Capability::Exec
            ]),
            offline_with_pod_recreated
        ),
        test_case!(
            SUITE,
            "should grow a volume no pod uses (offline expansion): the volume, PV and claim",
            Needs::capabilities(&[
                Capability::ControllerExpansion,
                Capability::OfflineExpansion
            ]),
            offline_expansion
        ),
        test_case!(
            SUITE,
            "should grow a volume in use by a pod (online expansion): the volume, PV and claim, without restarting the pod",
            Needs::capabilities(&[
                Capability::ControllerExpansion,
                Capability::OnlineExpansion,
                Capability::Exec
            ]),
            online_expansion
        ),
    ]
}

/// `size` plus 2 GiB, as a quantity, and in whole GiB.
fn grown(size: &str) -> (String, u64) {
    let bytes = kube_support::quantity::parse_bytes(size).unwrap_or(1 << 30) + (2 << 30);
    (
        kube_support::quantity::format_bytes(bytes),
        u64::try_from(bytes).unwrap_or(0).div_ceil(1 << 30),
    )
}

/// Resizes the claim `name` to `bigger` and waits until the share (on a Manila driver with
/// the cloud), the PV and the claim's status have grown. A driver with `nodeExpansion` grows
/// the file system on the node: while no pod uses the claim (`in_use` false) the claim then
/// waits with the `FileSystemResizePending` condition instead (kubelet finishes the resize
/// when a pod mounts it, [`wait_claim_grown`]).
async fn resize_and_wait(
    ctx: &TestContext<'_>,
    name: &str,
    bound: &crate::e2e::workload::BoundClaim,
    bigger: &str,
    gib: u64,
    in_use: bool,
) -> TestResult {
    let w = ctx.workload();
    let pv_name = bound.volume_name().to_string();
    let patch = serde_json::json!({"spec": {"resources": {"requests": {"storage": bigger}}}});
    w.claims
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    if ctx.cloud().is_ok() && is_manila(ctx) {
        wait_share(
            ctx,
            &bound.share_id,
            &format!("extended to {gib} GiB"),
            |share| share.size == gib && share.status == "available",
        )
        .await?;
    }
    let volumes: Api<PersistentVolume> = Api::all(ctx.client());
    let pv_grown = wait::wait_for_described(
        &volumes,
        &pv_name,
        &format!("PV {pv_name} capacity {bigger}"),
        |pv: Option<&PersistentVolume>| pv.and_then(volume_capacity).as_deref() == Some(bigger),
        WAIT,
    )
    .await;
    w.check("PV capacity grown", pv_grown).await?;
    if ctx.spec().has(Capability::NodeExpansion) && !in_use {
        let pending = wait::wait_for_described(
            &w.claims,
            name,
            &format!("PVC {name} condition FileSystemResizePending"),
            |c: Option<&PersistentVolumeClaim>| {
                c.and_then(|c| c.status.as_ref())
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|conditions| {
                        conditions
                            .iter()
                            .any(|c| c.type_ == "FileSystemResizePending" && c.status == "True")
                    })
            },
            WAIT,
        )
        .await;
        w.check(
            "the claim waiting for a node to grow its file system",
            pending,
        )
        .await?;
        return Ok(());
    }
    wait_claim_grown(ctx, name, bigger).await
}

/// Waits until the status capacity of the claim `name` is `bigger`.
async fn wait_claim_grown(ctx: &TestContext<'_>, name: &str, bigger: &str) -> TestResult {
    let w = ctx.workload();
    let claim_grown = wait::wait_for_described(
        &w.claims,
        name,
        &format!("PVC {name} status capacity {bigger}"),
        |c: Option<&PersistentVolumeClaim>| c.and_then(claim_capacity).as_deref() == Some(bigger),
        WAIT,
    )
    .await;
    w.check("PVC capacity grown", claim_grown).await?;
    Ok(())
}

/// With `nodeExpansion`: the file system at `/data` of `pod` is larger than the claim's
/// original `size` (kubelet's NodeExpandVolume grew it).
async fn check_filesystem_grown(ctx: &TestContext<'_>, pod: &str, size: &str) -> TestResult {
    if !ctx.spec().has(Capability::NodeExpansion) {
        return Ok(());
    }
    let now = filesystem_size(ctx.workload(), pod, "/data").await?;
    let original = kube_support::quantity::parse_bytes(size).unwrap_or(1 << 30);
    ensure!(
        i64::try_from(now).unwrap_or(i64::MAX) > original,
        "the file system in {pod} is {now} bytes, not grown past the claim's original {size}"
    );
    Ok(())
}

async fn expandable_class(ctx: &TestContext<'_>) -> TestResult<String> {
    ctx.storage_class_with("expandable", |class| {
        class.allow_volume_expansion = Some(true);
    })
    .await
}

/// A class without `allowVolumeExpansion`: the apiserver refuses a bigger request and the
/// claim keeps its size.
async fn expansion_refused(ctx: &TestContext<'_>) -> TestResult {
    let class = ctx
        .storage_class_with("fixed", |class| class.allow_volume_expansion = Some(false))
        .await?;
    let w = ctx.workload();
    let size = ctx.claim_size();
    let (bigger, _) = grown(&size);
    bind_claim(
        ctx,
        &claim("fixed", Some(&class), &size, access_mode(ctx)),
        None,
    )
    .await?;
    let patch = serde_json::json!({"spec": {"resources": {"requests": {"storage": bigger}}}});
    match w
        .claims
        .patch("fixed", &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Err(kube::Error::Api(status)) => {
            ensure!(
                status
                    .message
                    .contains("storageclass that provisions the pvc must support resize"),
                "the apiserver refused the resize, but not for the class: {}",
                status.message
            );
        }
        Err(e) => return Err(e.into()),
        Ok(_) => {
            return Err(crate::registry::TestError::failed(format!(
                "the apiserver accepted a resize to {bigger} although class {class} does not allow expansion"
            )));
        }
    }
    let claim = w.claims.get("fixed").await?;
    let requested = claim
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .map(|q| q.0.clone());
    ensure_eq!(
        requested.as_deref(),
        Some(size.as_str()),
        "the claim's request"
    );
    Ok(())
}

/// Upstream's offline expansion: a pod writes, goes; the claim grows (the controller
/// resize); a new pod on the grown volume reads the data and writes more.
async fn offline_with_pod_recreated(ctx: &TestContext<'_>) -> TestResult {
    let class = expandable_class(ctx).await?;
    let w = ctx.workload();
    let size = ctx.claim_size();
    let (bigger, gib) = grown(&size);
    let bound = bind_claim(
        ctx,
        &claim("data", Some(&class), &size, access_mode(ctx)),
        None,
    )
    .await?;
    w.ready_pod(&pod_with_claim(
        "before",
        "data",
        None,
        "echo before > /data/before",
    ))
    .await?;
    w.delete_pods(&["before"]).await?;
    super::wait_detached(ctx, bound.volume_name()).await?;
    resize_and_wait(ctx, "data", &bound, &bigger, gib, false).await?;
    w.ready_pod(&pod_with_claim(
        "after",
        "data",
        None,
        "echo after > /data/after",
    ))
    .await?;
    // A node expanding driver grew the file system as the pod mounted it.
    wait_claim_grown(ctx, "data", &bigger).await?;
    check_filesystem_grown(ctx, "after", &size).await?;
    ensure_eq!(
        w.exec("after", "cat /data/before /data/after").await?,
        "before\nafter\n",
        "the data on the grown volume"
    );
    w.delete_pods(&["after"]).await?;
    Ok(())
}

async fn offline_expansion(ctx: &TestContext<'_>) -> TestResult {
    let class = expandable_class(ctx).await?;
    let size = ctx.claim_size();
    let (bigger, gib) = grown(&size);
    let idle = bind_claim(
        ctx,
        &claim("idle", Some(&class), &size, access_mode(ctx)),
        None,
    )
    .await?;
    resize_and_wait(ctx, "idle", &idle, &bigger, gib, false).await
}

async fn online_expansion(ctx: &TestContext<'_>) -> TestResult {
    // The embedded cluster's nodes are this host: its driver grows mounted file systems here.
    if ctx.spec().has(Capability::NodeExpansion)
        && ctx.environment().is_some()
        && !crate::e2e::host::can_grow_mounted_ext4()
    {
        return Err(TestError::skip(crate::e2e::host::GROW_MOUNTED_EXT4));
    }
    let class = expandable_class(ctx).await?;
    let w = ctx.workload();
    let size = ctx.claim_size();
    let (bigger, gib) = grown(&size);
    let growing = bind_claim(
        ctx,
        &claim("growing", Some(&class), &size, access_mode(ctx)),
        None,
    )
    .await?;
    let running = w
        .ready_pod(&pod_with_claim(
            "user",
            "growing",
            None,
            "echo before > /data/before",
        ))
        .await?;
    resize_and_wait(ctx, "growing", &growing, &bigger, gib, true).await?;
    check_filesystem_grown(ctx, "user", &size).await?;

    // The pod kept running through it (same pod, no restart) and still uses the volume.
    let after = w.pods.get("user").await?;
    ensure_eq!(after.metadata.uid, running.metadata.uid, "the pod's uid");
    ensure!(
        pod_is_ready(&after),
        "the pod is not Ready: {}",
        describe_pod(&after)
    );
    ensure_eq!(
        restarts(&after),
        0,
        "the pod's restarts ({})",
        describe_pod(&after)
    );
    w.exec("user", "echo after > /data/after").await?;
    ensure_eq!(
        w.exec("user", "cat /data/before").await?,
        "before\n",
        "the data written before"
    );
    w.delete_pods(&["user"]).await?;
    Ok(())
}
