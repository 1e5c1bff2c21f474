//! `volumeMode` (upstream `volumemode.go`): a filesystem-only driver refuses to provision
//! block claims; a volume no container of a pod uses is not mounted (or, a block volume, not
//! mapped) for it; and, where the driver claims `block`, block volumes are raw devices in
//! pods and a volume used in the other mode than its own (either way) is refused.

use driver_spec::Capability;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube_support::wait::wait_event;

use super::node_of;
use super::provisioning::{access_mode, is_manila};
use crate::e2e::workload::{PodBuilder, claim, describe_pod};
use crate::registry::{Needs, TestCase, TestContext, TestError, TestResult};
use crate::{ensure, ensure_eq, test_case};

const SUITE: &str = "volumeMode";

/// Where the pods of the suite use the volume (as upstream's).
const VOLUME_PATH: &str = "/mnt/volume1";

/// The suite's tests.
pub fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            SUITE,
            "should fail in binding dynamic provisioned PV to PVC",
            Needs::NONE,
            block_claim_not_provisioned
        ),
        test_case!(
            SUITE,
            "should not mount / map unused volumes in a pod",
            Needs::NONE,
            unused_volume_not_mounted
        ),
        test_case!(
            SUITE,
            "should create sc, pod, pv, and pvc, read/write to the pv, and delete all created resources",
            Needs::capabilities(&[Capability::Block]),
            block_volume_read_write
        ),
        test_case!(
            SUITE,
            "should fail to use a volume in a pod with mismatched mode",
            Needs::capabilities(&[Capability::Block]),
            mismatched_mode_refused
        ),
        test_case!(
            SUITE,
            "should not mount / map unused volumes in a pod (block volmode)",
            Needs::capabilities(&[Capability::Block]),
            unused_block_volume_not_mapped
        ),
        test_case!(
            SUITE,
            "should fail to use a volume in a pod with mismatched mode (block volmode)",
            Needs::capabilities(&[Capability::Block]),
            mismatched_block_mode_refused
        ),
    ]
}

/// `claim` with `volumeMode`.
fn with_mode(mut claim: PersistentVolumeClaim, mode: &str) -> PersistentVolumeClaim {
    if let Some(spec) = claim.spec.as_mut() {
        spec.volume_mode = Some(mode.into());
    }
    claim
}

/// A Block claim of a driver without `block`, from a class binding at once: the claim stays
/// Pending, and no volume is made for it. Upstream waits for a `ProvisioningFailed` event only
/// to be quick; on the Manila driver the event must come and say why (block access).
async fn block_claim_not_provisioned(ctx: &TestContext<'_>) -> TestResult {
    if ctx.spec().has(Capability::Block) {
        return Err(TestError::skip(format!(
            "driver {} claims capability block: its block claims bind (the block read/write test)",
            ctx.driver().name
        )));
    }
    let class = ctx
        .storage_class_with("immediate", |class| {
            class.volume_binding_mode = Some("Immediate".into());
        })
        .await?;
    let w = ctx.workload();
    let block = claim("block", Some(&class), &ctx.claim_size(), access_mode(ctx));
    w.create_claim(&with_mode(block, "Block")).await?;

    let client = ctx.client();
    let event = wait_event(
        &client,
        w.namespace(),
        "block",
        "ProvisioningFailed",
        "",
        w.timeouts().event,
    )
    .await;
    match event {
        Ok(event) if is_manila(ctx) => {
            let message = event.message.unwrap_or_default();
            ensure!(
                message.contains("block"),
                "the ProvisioningFailed event does not say block volumes are refused: {message}"
            );
        }
        Ok(_) => {}
        Err(e) if is_manila(ctx) => {
            w.check(
                "a ProvisioningFailed event about the block claim",
                Err::<(), _>(e),
            )
            .await?;
        }
        Err(e) => tracing::info!(
            namespace = w.namespace(),
            "no ProvisioningFailed event about the block claim ({e}); checking the claim anyway, as upstream"
        ),
    }

    let pending = w.claims.get("block").await?;
    ensure_eq!(
        pending.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Pending"),
        "the block claim's phase"
    );
    let volume = pending.spec.as_ref().and_then(|s| s.volume_name.clone());
    ensure!(
        volume.is_none(),
        "the block claim names a volume: {volume:?}"
    );
    if let (Ok(cloud), true) = (ctx.cloud(), is_manila(ctx)) {
        // The provisioner names a claim's volume pvc-<claim uid>.
        let name = format!("pvc-{}", pending.metadata.uid.unwrap_or_default());
        let shares = cloud.shares_named(&name).await?;
        ensure!(shares.is_empty(), "shares named {name} exist: {shares:?}");
    }
    Ok(())
}

/// Host mount points of the CSI volumes of the pod `uid` below `root`: kubelet's
/// `pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount` of a filesystem volume, or, of a block
/// volume, the device the driver bound on its publish path
/// `plugins/kubernetes.io/csi/volumeDevices/publish/<pv>/<uid>`.
async fn pod_csi_mounts(
    ctx: &TestContext<'_>,
    root: &std::path::Path,
    uid: &str,
    block: bool,
) -> TestResult<Vec<String>> {
    let mounts = ctx
        .cluster()
        .mount_points_under(root)
        .await
        .map_err(|e| TestError::failed(format!("reading the mounts below {root:?}: {e}")))?;
    Ok(mounts
        .iter()
        .map(|m| m.display().to_string())
        .filter(|m| is_pod_volume_mount(m, uid, block))
        .collect())
}

/// Whether the mount point `mount` is of a CSI volume of the pod `uid`: its filesystem
/// volume's mount, or (`block`) the device bound on its block volume's publish path.
fn is_pod_volume_mount(mount: &str, uid: &str, block: bool) -> bool {
    if block {
        mount.contains("/plugins/kubernetes.io/csi/volumeDevices/publish/")
            && mount.ends_with(&format!("/{uid}"))
    } else {
        mount.contains(&format!("/pods/{uid}/volumes/kubernetes.io~csi/"))
    }
}

/// A pod lists the claim among its volumes but no container mounts (or maps) it: the pod
/// runs and the volume is not mounted (or mapped) for the pod on the node. A pod that does
/// use the claim on the same node then shows the check sees such mounts.
async fn unused_volume(ctx: &TestContext<'_>, block: bool) -> TestResult {
    let Some(root) = ctx.mounts_root() else {
        return Err(TestError::skip(
            "the run cannot look at the nodes' kubelet directories (upstream lists \
             /var/lib/kubelet/pods/<uid>/volumes on the pod's node)",
        ));
    };
    let class = ctx.storage_class().await?;
    let w = ctx.workload();
    let data = claim("data", Some(&class), &ctx.claim_size(), access_mode(ctx));
    let mode = if block { "Block" } else { "Filesystem" };
    w.create_claim(&with_mode(data, mode)).await?;
    let using = |name: &str| {
        let pod = PodBuilder::new(name, "true");
        if block {
            pod.device("data", VOLUME_PATH)
        } else {
            pod.claim("data", VOLUME_PATH)
        }
    };
    let mut unused = using("unused").build();
    for container in unused.spec.iter_mut().flat_map(|s| s.containers.iter_mut()) {
        container.volume_mounts = None;
        container.volume_devices = None;
    }
    // A late binding class binds the claim once the pod is scheduled.
    let running = w.ready_pod(&unused).await?;
    w.wait_bound("data").await?;
    let node = node_of(&running).ok_or_else(|| TestError::failed("the pod has no node"))?;
    let uid = running.metadata.uid.clone().unwrap_or_default();
    let mounted = pod_csi_mounts(ctx, root, &uid, block).await?;
    ensure!(
        mounted.is_empty(),
        "the {mode} claim no container of pod unused uses is mounted for it on node {node}, \
         where kubelet leaves volumes no container uses alone: {}",
        mounted.join(", ")
    );
    w.delete_pods(&["unused"]).await?;

    let used = w.ready_pod(&using("user").node(&node).build()).await?;
    let uid = used.metadata.uid.clone().unwrap_or_default();
    let mounted = pod_csi_mounts(ctx, root, &uid, block).await?;
    ensure!(
        !mounted.is_empty(),
        "no mount of the {mode} claim for pod user, which uses it, below {root:?}: the check \
         above cannot see the volume's mounts"
    );
    w.delete_pods(&["user"]).await?;
    Ok(())
}

async fn unused_volume_not_mounted(ctx: &TestContext<'_>) -> TestResult {
    unused_volume(ctx, false).await
}

async fn unused_block_volume_not_mapped(ctx: &TestContext<'_>) -> TestResult {
    unused_volume(ctx, true).await
}

/// A Block claim binds (whatever the class's binding mode: the pod is made at once); in the
/// pod its volume is a block device, not a directory, and 64 bytes written to it read back the
/// same, while writing a file below it fails.
async fn block_volume_read_write(ctx: &TestContext<'_>) -> TestResult {
    let class = ctx.storage_class().await?;
    let w = ctx.workload();
    let block = claim("block", Some(&class), &ctx.claim_size(), access_mode(ctx));
    w.create_claim(&with_mode(block, "Block")).await?;
    let pod = PodBuilder::new("raw", "true")
        .device("block", VOLUME_PATH)
        .build();
    w.ready_pod(&pod).await?;
    w.wait_bound("block").await?;
    w.exec(
        "raw",
        &format!("test -b {VOLUME_PATH} && ! test -d {VOLUME_PATH}"),
    )
    .await
    .map_err(|e| TestError::failed(format!("{VOLUME_PATH} is not a block device: {e}")))?;
    w.exec(
        "raw",
        &format!(
            "dd if=/dev/urandom of=/tmp/written bs=64 count=1 && \
             dd if=/tmp/written of={VOLUME_PATH} bs=64 count=1 conv=fsync && \
             dd if={VOLUME_PATH} of=/tmp/read bs=64 count=1 && cmp /tmp/written /tmp/read"
        ),
    )
    .await
    .map_err(|e| {
        TestError::failed(format!(
            "64 bytes written to the device did not read back: {e}"
        ))
    })?;
    let refused = w
        .exec("raw", &format!("echo text > {VOLUME_PATH}/file1.txt"))
        .await;
    ensure!(
        refused.is_err(),
        "writing a file below the block device {VOLUME_PATH} succeeded"
    );
    w.delete_pods(&["raw"]).await?;
    Ok(())
}

/// A volume used in the other mode than its own: the pod does not start, kubelet's
/// `FailedMount` event saying why ("has volumeMode Filesystem, but is specified in
/// volumeDevices", or Block and volumeMounts), and it stays Pending.
async fn mismatched_mode(ctx: &TestContext<'_>, block: bool) -> TestResult {
    let (mode, field) = if block {
        ("Block", "volumeMounts")
    } else {
        ("Filesystem", "volumeDevices")
    };
    let class = ctx.storage_class().await?;
    let w = ctx.workload();
    let volume = claim("vol", Some(&class), &ctx.claim_size(), access_mode(ctx));
    w.create_claim(&with_mode(volume, mode)).await?;
    let pod = PodBuilder::new("mismatched", "true");
    let pod = if block {
        pod.claim("vol", VOLUME_PATH)
    } else {
        pod.device("vol", VOLUME_PATH)
    };
    w.create_pod(&pod.build()).await?;
    let wanted = format!("has volumeMode {mode}, but is specified in {field}");
    w.wait_event("mismatched", "FailedMount", &wanted).await?;
    let seen = w.pods.get("mismatched").await?;
    ensure_eq!(
        seen.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Pending"),
        "the phase of the pod using a {mode} volume in its {field} ({})",
        describe_pod(&seen)
    );
    let running: Vec<String> = seen
        .status
        .iter()
        .flat_map(|s| s.container_statuses.iter().flatten())
        .filter(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
        .map(|c| c.name.clone())
        .collect();
    ensure!(
        running.is_empty(),
        "containers {running:?} of the pod using a {mode} volume in its {field} run"
    );
    w.delete_pods(&["mismatched"]).await?;
    Ok(())
}

async fn mismatched_mode_refused(ctx: &TestContext<'_>) -> TestResult {
    mismatched_mode(ctx, false).await
}

async fn mismatched_block_mode_refused(ctx: &TestContext<'_>) -> TestResult {
    mismatched_mode(ctx, true).await
}

#[cfg(test)]
mod tests {
    use super::is_pod_volume_mount;

    #[test]
    fn pod_volume_mounts_are_told_by_mode_and_pod() {
        let root = "/run/node-1/var/lib/kubelet";
        let fs = format!("{root}/pods/u-1/volumes/kubernetes.io~csi/pvc-1/mount");
        let block = format!("{root}/plugins/kubernetes.io/csi/volumeDevices/publish/pvc-1/u-1");
        assert!(is_pod_volume_mount(&fs, "u-1", false));
        assert!(!is_pod_volume_mount(&fs, "u-2", false));
        assert!(!is_pod_volume_mount(&fs, "u-1", true));
        assert!(is_pod_volume_mount(&block, "u-1", true));
        assert!(!is_pod_volume_mount(&block, "u-12", true));
        assert!(!is_pod_volume_mount(&block, "u-1", false));
    }
}
