//! The upgrade to N, and what must hold under N: N's layout, nothing deleted that holds
//! data, the volumes in use undisturbed, N-1's snapshot restored, expansion.

use super::super::writers;
use super::super::writers::Writers;
use super::inspect::{
    Inventory, cloud_snapshots, container_names, daemon_set_volume_names, describe_events,
    driver_pod_uids, expand_parameters, gone_and_replaced, has_event, numbered_lines,
    operator_events, pods_as_they_are, record_rollout, secret_text, shares, volume_names,
    wait_written_beyond, written,
};
use super::{
    BeforeUpgrade, CONTROLLER_DEPLOYMENT, DATA_CLAIM, NODE_PLUGIN_DAEMON_SET, NUMBERED_WRITER,
    Releases, SHARED_ROLE, WAIT, resize,
};
use crate::e2e::cloud::CloudInspector;
use crate::e2e::timeline::Timeline;
use crate::e2e::workload::{
    Workload, claim, claim_capacity, claim_from_snapshot, pod_with_claim, volume_capacity,
};
use crate::e2e::{
    CA_CONFIG_MAP, DEFAULT_STORAGE_CLASS, DRIVER_SECRET, ManilaCsiEnvironment,
    OPERATOR_MANAGED_SELECTOR, OperatorOptions, SNAPSHOT_CLASS, snapshots,
};
use crate::registry::{TestError, TestResult};
use crate::{ensure, ensure_eq};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolume, PersistentVolumeClaim, Secret};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, ListParams};
use kube_support::wait;
use std::collections::BTreeSet;
use std::time::SystemTime;

/// Applies N's operator manifests, waits until the operator reports N Available, measures the
/// writer stall, and checks N's layout: the resizer added, the CA in the Secret instead of a
/// mount, a ClusterRole per sidecar (N-1's shared one deleted with an Event), the default
/// class re-created with expansion (an Event), the driver's pods restarted, the snapshot
/// class and CA ConfigMap kept, no PV, VolumeSnapshotContent or StorageClass deleted.
pub(super) async fn upgrade(
    env: &ManilaCsiEnvironment,
    releases: &Releases,
    workload: &Workload<'_>,
    writers: &Writers<'_, '_>,
    before: &BeforeUpgrade,
    timeline: &Timeline,
) -> TestResult {
    let files_before = writers.read().await?;
    let (started, _) = writers::now();
    let timings = env
        .upgrade_operator_and_wait(OperatorOptions::CURRENT_RELEASE, WAIT, timeline)
        .await?;
    record_rollout(env, timeline, started).await?;
    // Writes go on after the upgrade; nothing written before is lost, no write failed.
    writers.wait_written_since(SystemTime::now()).await?;
    let stall = writers.check_since(started, Some(&files_before)).await?;
    timeline.record(
        "result",
        format!(
            "upgrade N-1 → N: writer stall {:.3} s (from {}); manifests applied → operator rolled out {:.1?}, → all Available with {} {:.1?}",
            stall.length.as_secs_f64(),
            writers::wall(stall.from),
            timings.rolled_out,
            releases.current,
            timings.available
        ),
    );
    let driver = env.cluster_csi_driver().await?;
    ensure_eq!(
        driver.data["status"]["version"].as_str(),
        Some(releases.current.as_str()),
        "the ClusterCSIDriver's status.version"
    );
    check_layout(env).await?;
    check_nothing_deleted(env, before).await?;
    ensure_eq!(
        pods_as_they_are(workload, &writer_names(before)).await?,
        before.pods,
        "the writers' pods (uid, restarts) after the upgrade"
    );
    Ok(())
}

fn writer_names(before: &BeforeUpgrade) -> Vec<&str> {
    before.writer_pods.iter().map(String::as_str).collect()
}

/// N's layout of the driver's objects.
async fn check_layout(env: &ManilaCsiEnvironment) -> TestResult {
    let client = env.client();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), env.namespace());
    let daemon_sets: Api<DaemonSet> = Api::namespaced(client.clone(), env.namespace());
    let secrets: Api<Secret> = Api::namespaced(client.clone(), env.namespace());
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    let controller = deployments.get(CONTROLLER_DEPLOYMENT).await?;
    let mut containers = container_names(&controller);
    containers.sort();
    ensure_eq!(
        containers,
        [
            "csi-driver",
            "csi-liveness-probe",
            "csi-provisioner",
            "csi-resizer",
            "csi-snapshotter"
        ],
        "N's controller containers"
    );
    ensure!(
        !volume_names(&controller).contains(&"cacert".to_string()),
        "N's controller still mounts N-1's CA volume"
    );
    let node_plugin = daemon_sets.get(NODE_PLUGIN_DAEMON_SET).await?;
    ensure!(
        !daemon_set_volume_names(&node_plugin).contains(&"cacert".to_string()),
        "N's node plugin still mounts N-1's CA volume"
    );
    ensure!(
        roles.get_opt(SHARED_ROLE).await?.is_none()
            && bindings.get_opt(SHARED_ROLE).await?.is_none(),
        "N-1's shared ClusterRole or binding {SHARED_ROLE} is left under N"
    );
    for sidecar in ["provisioner", "resizer", "snapshotter"] {
        let name = format!("openstack-manila-csi-{sidecar}");
        ensure!(
            roles.get_opt(&name).await?.is_some() && bindings.get_opt(&name).await?.is_some(),
            "N installs no ClusterRole and binding {name}"
        );
    }
    let secret = secret_text(&secrets.get(DRIVER_SECRET).await?);
    let ca = env
        .fake_cloud()
        .and_then(|cloud| cloud.ca_pem())
        .ok_or_else(|| TestError::failed("the test's cloud speaks no TLS"))?;
    ensure_eq!(
        secret.get("os-certAuthority").map(|s| s.trim()),
        Some(ca.trim()),
        "os-certAuthority of N's Secret {DRIVER_SECRET}"
    );
    ensure!(
        !secret.contains_key("os-certAuthorityPath"),
        "N's Secret {DRIVER_SECRET} still names N-1's CA path"
    );
    let maps: Api<ConfigMap> = Api::namespaced(client, env.namespace());
    ensure!(
        maps.get_opt(CA_CONFIG_MAP).await?.is_some(),
        "the CA ConfigMap {CA_CONFIG_MAP} (the user's) was deleted"
    );
    Ok(())
}

/// No PV, VolumeSnapshotContent or StorageClass deleted; the only classes with a new uid are
/// the operator's, re-created (with an Event) because their parameters changed; the driver's
/// pods restarted with the new Secret and templates; the snapshot class kept.
async fn check_nothing_deleted(env: &ManilaCsiEnvironment, before: &BeforeUpgrade) -> TestResult {
    let client = env.client();
    let classes: Api<StorageClass> = Api::all(client.clone());
    let new_class = classes.get(DEFAULT_STORAGE_CLASS).await?;
    ensure!(
        new_class.metadata.uid != before.class.metadata.uid,
        "the class {DEFAULT_STORAGE_CLASS} was not re-created with N's parameters"
    );
    ensure_eq!(
        new_class.allow_volume_expansion,
        Some(true),
        "allowVolumeExpansion of N's {DEFAULT_STORAGE_CLASS}"
    );
    ensure_eq!(
        expand_parameters(&new_class),
        [
            "csi.storage.k8s.io/controller-expand-secret-name",
            "csi.storage.k8s.io/controller-expand-secret-namespace",
        ],
        "the controller-expand parameters of N's {DEFAULT_STORAGE_CLASS}"
    );
    let events = operator_events(env).await?;
    ensure!(
        has_event(
            &events,
            "StorageClassRecreated",
            &[DEFAULT_STORAGE_CLASS, "controller-expand-secret-name"]
        ),
        "no StorageClassRecreated Event for {DEFAULT_STORAGE_CLASS}: {}",
        describe_events(&events)
    );
    for kind in ["ClusterRole", "ClusterRoleBinding"] {
        ensure!(
            has_event(
                &events,
                &format!("{kind}Deleted"),
                &[SHARED_ROLE, "no longer installs"]
            ),
            "no {kind}Deleted Event for {SHARED_ROLE}: {}",
            describe_events(&events)
        );
    }
    let driver_pods = driver_pod_uids(env).await?;
    let kept: Vec<&String> = driver_pods
        .iter()
        .filter(|uid| before.driver_pods.contains(uid))
        .collect();
    ensure!(
        kept.is_empty(),
        "driver pods not restarted by the upgrade: {kept:?}"
    );
    let snapshot_classes = snapshots::volume_snapshot_classes(&client);
    ensure_eq!(
        snapshot_classes.get(SNAPSHOT_CLASS).await?.metadata.uid,
        before.snapshot_class_uid,
        "the uid of the VolumeSnapshotClass {SNAPSHOT_CLASS}"
    );
    let after = Inventory::take(&client).await?;
    let (gone, replaced) = gone_and_replaced(&before.inventory.volumes, &after.volumes);
    ensure!(
        gone.is_empty() && replaced.is_empty(),
        "PVs gone {gone:?}, replaced {replaced:?}"
    );
    let (gone, replaced) = gone_and_replaced(&before.inventory.contents, &after.contents);
    ensure!(
        gone.is_empty() && replaced.is_empty(),
        "VolumeSnapshotContents gone {gone:?}, replaced {replaced:?}"
    );
    let (gone, replaced) = gone_and_replaced(&before.inventory.classes, &after.classes);
    ensure!(gone.is_empty(), "StorageClasses gone: {gone:?}");
    let managed: BTreeSet<String> = classes
        .list_metadata(&ListParams::default().labels(OPERATOR_MANAGED_SELECTOR))
        .await?
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    ensure!(
        managed.contains(DEFAULT_STORAGE_CLASS),
        "{DEFAULT_STORAGE_CLASS} is not labelled as the operator's: {managed:?}"
    );
    for name in &replaced {
        ensure!(
            managed.contains(name),
            "StorageClass {name} replaced, and it is not the operator's"
        );
        ensure!(
            has_event(&events, "StorageClassRecreated", &[name]),
            "StorageClass {name} replaced without an Event: {}",
            describe_events(&events)
        );
    }
    Ok(())
}

/// The volumes in use were not disturbed: the numbered writer wrote on without a failed
/// write, its bytes land in the share, the PV and every share and snapshot are as before.
pub(super) async fn volumes_undisturbed(
    env: &ManilaCsiEnvironment,
    workload: &Workload<'_>,
    manila: &CloudInspector,
    before: &BeforeUpgrade,
) -> TestResult {
    let lines_before = written(workload).await?;
    let lines_after = wait_written_beyond(workload, lines_before + 10).await?;
    let errors = workload
        .exec(NUMBERED_WRITER, "cat /tmp/write-errors 2>/dev/null || true")
        .await?;
    ensure_eq!(errors, "", "failed writes of {NUMBERED_WRITER}");
    ensure_eq!(
        workload.exec(NUMBERED_WRITER, "cat /data/before").await?,
        "before-the-upgrade\n",
        "/data/before"
    );
    workload
        .exec(NUMBERED_WRITER, "echo after-the-upgrade > /data/after")
        .await?;
    let share_dir = env
        .fake_cloud()
        .ok_or_else(|| TestError::failed("the test's environment has no fake cloud"))?
        .share_dir(&before.data.share_id);
    let read = |name: &str| {
        let path = share_dir.join(name);
        std::fs::read_to_string(&path)
            .map_err(|e| TestError::failed(format!("reading {}: {e}", path.display())))
    };
    ensure_eq!(
        read("after")?,
        "after-the-upgrade\n",
        "the share's file after"
    );
    let in_share = read("log")?.lines().count() as u64;
    ensure!(
        in_share >= lines_after,
        "the share's log has {in_share} lines, the pod wrote {lines_after}"
    );
    let volumes: Api<PersistentVolume> = Api::all(env.client());
    let pv = volumes.get(before.data.volume_name()).await?;
    ensure_eq!(
        pv.metadata.uid,
        before.data.volume.metadata.uid,
        "the uid of PV {}",
        before.data.volume_name()
    );
    ensure_eq!(shares(manila).await?, before.shares, "Manila's shares");
    ensure_eq!(
        cloud_snapshots(manila).await?,
        before.cloud_snapshots,
        "Manila's snapshots"
    );
    let kept = workload.snapshots().get("before").await?;
    ensure_eq!(
        kept.metadata.uid,
        before.snapshot.metadata.uid,
        "the uid of VolumeSnapshot before"
    );
    ensure_eq!(
        kept.data["status"]["readyToUse"].as_bool(),
        Some(true),
        "VolumeSnapshot before readyToUse"
    );
    Ok(())
}

/// The snapshot taken under N-1 restores under N, with the data it held and nothing written
/// after it.
pub(super) async fn snapshot_restores(
    workload: &Workload<'_>,
    before: &BeforeUpgrade,
    releases: &Releases,
    timeline: &Timeline,
) -> TestResult {
    let restored = workload
        .bound_claim(&claim_from_snapshot(
            "restored",
            Some(DEFAULT_STORAGE_CLASS),
            "1Gi",
            "ReadWriteMany",
            "before",
        ))
        .await?;
    ensure!(
        restored.share_id != before.data.share_id,
        "the restored claim is bound to the snapshotted share {}",
        restored.share_id
    );
    workload
        .ready_pod(&pod_with_claim("restored-reader", "restored", None, ""))
        .await?;
    ensure_eq!(
        workload.exec("restored-reader", "cat /data/before").await?,
        "before-the-upgrade\n",
        "the restored /data/before"
    );
    let log = workload.exec("restored-reader", "cat /data/log").await?;
    let lines = numbered_lines(&log, "the restored /data/log")?;
    ensure!(
        lines >= before.lines_at_snapshot,
        "the restored log has {lines} lines, {} were written before the snapshot",
        before.lines_at_snapshot
    );
    ensure_eq!(
        workload
            .exec(
                "restored-reader",
                "test -e /data/after && echo yes || echo no"
            )
            .await?,
        "no\n",
        "whether the restore holds what was written after the snapshot"
    );
    timeline.record(
        "test",
        format!(
            "snapshot before restored under {}: {lines} lines",
            releases.current
        ),
    );
    Ok(())
}

/// A claim provisioned under N-1 has no controller-expand secret on its PV (N-1's class
/// named none, and a PV's CSI source is immutable): the apiserver now accepts the resize
/// (the class allows expansion), but the driver refuses a call without credentials, and the
/// share keeps its size. A claim of N's class is expanded (share extended, PV and claim
/// capacity updated) and mounts on `node`: a pod writes to it, and the bytes are in its
/// share.
pub(super) async fn expansion(
    env: &ManilaCsiEnvironment,
    workload: &Workload<'_>,
    manila: &CloudInspector,
    before: &BeforeUpgrade,
    node: &str,
) -> TestResult {
    let volumes: Api<PersistentVolume> = Api::all(env.client());
    let pv = volumes.get(before.data.volume_name()).await?;
    let expand_secret = |pv: &PersistentVolume| {
        pv.spec
            .as_ref()
            .and_then(|s| s.csi.as_ref())
            .map(|c| c.controller_expand_secret_ref.is_some())
    };
    ensure_eq!(
        expand_secret(&pv),
        Some(false),
        "whether N-1's PV names a controller-expand secret"
    );
    resize(workload, DATA_CLAIM, "2Gi").await?;
    let event = workload
        .wait_event(DATA_CLAIM, "VolumeResizeFailed", "secrets are required")
        .await?;
    ensure!(
        event
            .message
            .as_deref()
            .unwrap_or("")
            .contains("InvalidArgument"),
        "the VolumeResizeFailed Event names no InvalidArgument: {:?}",
        event.message
    );
    ensure_eq!(
        shares(manila).await?.get(&before.data.share_id),
        Some(&(1, "available".to_string())),
        "share {} after the refused resize",
        before.data.share_id
    );
    let fresh = workload
        .bound_claim(&claim(
            "fresh",
            Some(DEFAULT_STORAGE_CLASS),
            "1Gi",
            "ReadWriteMany",
        ))
        .await?;
    ensure_eq!(
        expand_secret(&fresh.volume),
        Some(true),
        "whether N's PV names a controller-expand secret"
    );
    resize(workload, "fresh", "2Gi").await?;
    let share_id = fresh.share_id.as_str();
    let extended = wait::wait_until(
        format!("share {share_id} extended to 2 GiB"),
        WAIT,
        || async move {
            match shares(manila).await {
                Ok(all) => match all.get(share_id) {
                    Some((2, status)) if status == "available" => Ok(Some(())),
                    share => Err(format!("{share:?}")),
                },
                Err(e) => Err(e.to_string()),
            }
        },
    )
    .await;
    workload.check("share extended", extended).await?;
    let pv_grown = wait::wait_for_described(
        &volumes,
        fresh.volume_name(),
        "PV capacity 2Gi",
        |pv: Option<&PersistentVolume>| pv.and_then(volume_capacity).as_deref() == Some("2Gi"),
        WAIT,
    )
    .await;
    workload.check("PV capacity 2Gi", pv_grown).await?;
    let claim_grown = wait::wait_for_described(
        &workload.claims,
        "fresh",
        "claim capacity 2Gi",
        |c: Option<&PersistentVolumeClaim>| c.and_then(claim_capacity).as_deref() == Some("2Gi"),
        WAIT,
    )
    .await;
    workload.check("claim capacity 2Gi", claim_grown).await?;
    workload
        .ready_pod(&pod_with_claim(
            "fresh-user",
            "fresh",
            Some(node),
            "echo provisioned-after-the-upgrade > /data/fresh",
        ))
        .await?;
    ensure_eq!(
        workload.exec("fresh-user", "cat /data/fresh").await?,
        "provisioned-after-the-upgrade\n",
        "/data/fresh of the new claim"
    );
    let fresh_file = env
        .fake_cloud()
        .ok_or_else(|| TestError::failed("the test's environment has no fake cloud"))?
        .share_dir(&fresh.share_id)
        .join("fresh");
    let in_share = std::fs::read_to_string(&fresh_file)
        .map_err(|e| TestError::failed(format!("reading {}: {e}", fresh_file.display())))?;
    ensure_eq!(
        in_share,
        "provisioned-after-the-upgrade\n",
        "{} in the new claim's share",
        fresh_file.display()
    );
    Ok(())
}
