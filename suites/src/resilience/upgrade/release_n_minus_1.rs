//! Release N-1 as installed, and what the test sets up and notes under it.

use super::super::writers::Writers;
use super::inspect::{
    Inventory, cloud_snapshots, container_names, daemon_set_volume_names, driver_pod_uids,
    expand_parameters, pods_as_they_are, secret_text, shares, volume_names, wait_written_beyond,
    written,
};
use super::{
    BeforeUpgrade, CONTROLLER_DEPLOYMENT, DATA_CLAIM, NODE_PLUGIN_DAEMON_SET, NUMBERED_WRITER,
    PREVIOUS_CA_PATH, SHARED_ROLE, USER_CLASS, numbered_writer_pod, resize,
};
use crate::e2e::cloud::CloudInspector;
use crate::e2e::timeline::Timeline;
use crate::e2e::workload::{BoundClaim, Workload, claim};
use crate::e2e::{
    DEFAULT_STORAGE_CLASS, DRIVER_SECRET, ManilaCsiEnvironment, SNAPSHOT_CLASS, snapshots,
};
use crate::registry::{TestError, TestResult};
use crate::{ensure, ensure_eq};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, PostParams};

/// Checks N-1's layout: the controller without a resizer, the CA mounted from the ConfigMap
/// (and named by path in the driver's Secret), one ClusterRole for every sidecar, the
/// default class without expansion.
pub(super) async fn check_installed(env: &ManilaCsiEnvironment) -> TestResult {
    let client = env.client();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), env.namespace());
    let daemon_sets: Api<DaemonSet> = Api::namespaced(client.clone(), env.namespace());
    let secrets: Api<Secret> = Api::namespaced(client.clone(), env.namespace());
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    let classes: Api<StorageClass> = Api::all(client);
    let controller = deployments.get(CONTROLLER_DEPLOYMENT).await?;
    ensure_eq!(
        container_names(&controller),
        [
            "csi-driver",
            "csi-provisioner",
            "csi-snapshotter",
            "csi-liveness-probe"
        ],
        "N-1's controller containers"
    );
    ensure!(
        volume_names(&controller).contains(&"cacert".to_string()),
        "N-1's controller mounts no CA volume: {:?}",
        volume_names(&controller)
    );
    let node_plugin = daemon_sets.get(NODE_PLUGIN_DAEMON_SET).await?;
    ensure!(
        daemon_set_volume_names(&node_plugin).contains(&"cacert".to_string()),
        "N-1's node plugin mounts no CA volume: {:?}",
        daemon_set_volume_names(&node_plugin)
    );
    ensure!(
        roles.get_opt(SHARED_ROLE).await?.is_some()
            && bindings.get_opt(SHARED_ROLE).await?.is_some(),
        "N-1 installs no shared ClusterRole and binding {SHARED_ROLE}"
    );
    for sidecar in ["provisioner", "resizer", "snapshotter"] {
        let name = format!("openstack-manila-csi-{sidecar}");
        ensure!(
            roles.get_opt(&name).await?.is_none(),
            "N-1 installs the ClusterRole {name} of a later release"
        );
    }
    let secret = secret_text(&secrets.get(DRIVER_SECRET).await?);
    ensure_eq!(
        secret.get("os-certAuthorityPath").map(String::as_str),
        Some(PREVIOUS_CA_PATH),
        "os-certAuthorityPath of N-1's Secret {DRIVER_SECRET}"
    );
    ensure!(
        !secret.contains_key("os-certAuthority"),
        "N-1's Secret {DRIVER_SECRET} holds the CA itself"
    );
    let class = classes.get(DEFAULT_STORAGE_CLASS).await?;
    ensure!(
        class.allow_volume_expansion != Some(true) && expand_parameters(&class).is_empty(),
        "N-1's class {DEFAULT_STORAGE_CLASS} offers expansion: {:?}",
        class.parameters
    );
    Ok(())
}

/// A claim of N-1's class (provisioned over TLS with the mounted CA) written to every 100 ms
/// by [`NUMBERED_WRITER`]; N-1 offers no expansion, so the apiserver refuses its resize.
pub(super) async fn numbered_writer(workload: &Workload<'_>) -> TestResult<BoundClaim> {
    let data = workload
        .bound_claim(&claim(
            DATA_CLAIM,
            Some(DEFAULT_STORAGE_CLASS),
            "1Gi",
            "ReadWriteMany",
        ))
        .await?;
    workload.ready_pod(&numbered_writer_pod(DATA_CLAIM)).await?;
    wait_written_beyond(workload, 10).await?;
    match resize(workload, DATA_CLAIM, "2Gi").await {
        Err(kube::Error::Api(status))
            if status.code == 403
                && status
                    .message
                    .contains("storageclass that provisions the pvc must support resize") => {}
        other => {
            return Err(TestError::failed(format!(
                "resizing a claim of N-1's class (no allowVolumeExpansion): want the apiserver's refusal, got {other:?}"
            )));
        }
    }
    Ok(data)
}

/// Makes the user's own StorageClass and the snapshot `before`, then notes what the upgrade
/// must keep: the writers' pods, Manila's shares and snapshots, the driver's pods, the PVs,
/// VolumeSnapshotContents and classes.
pub(super) async fn note(
    env: &ManilaCsiEnvironment,
    workload: &Workload<'_>,
    writers: &Writers<'_, '_>,
    manila: &CloudInspector,
    data: BoundClaim,
    timeline: &Timeline,
) -> TestResult<BeforeUpgrade> {
    let client = env.client();
    let mut writer_pods = vec![NUMBERED_WRITER.to_string()];
    writer_pods.extend(writers.pods().into_iter().map(String::from));
    let names: Vec<&str> = writer_pods.iter().map(String::as_str).collect();
    let pods = pods_as_they_are(workload, &names).await?;
    // A StorageClass of the user's: no operator of any release may touch it.
    let classes: Api<StorageClass> = Api::all(client.clone());
    let class = classes.get(DEFAULT_STORAGE_CLASS).await?;
    let mut user_class = class.clone();
    user_class.metadata = kube::api::ObjectMeta {
        name: Some(USER_CLASS.into()),
        labels: Some(workload.labels()),
        ..Default::default()
    };
    classes.create(&PostParams::default(), &user_class).await?;
    // A snapshot of the numbered claim, taken by N-1's snapshotter (with the shared role).
    let lines_at_snapshot = written(workload).await?;
    let snapshot = workload
        .ready_snapshot("before", DATA_CLAIM, SNAPSHOT_CLASS)
        .await?;
    timeline.record(
        "test",
        format!(
            "VolumeSnapshot before of claim {DATA_CLAIM} ready ({lines_at_snapshot} lines before it)"
        ),
    );
    let shares = shares(manila).await?;
    ensure_eq!(
        shares.get(&data.share_id),
        Some(&(1, "available".to_string())),
        "share {} of claim {DATA_CLAIM}",
        data.share_id
    );
    let cloud_snapshots = cloud_snapshots(manila).await?;
    ensure_eq!(
        cloud_snapshots.len(),
        1,
        "snapshots in Manila: {cloud_snapshots:?}"
    );
    let inventory = Inventory::take(&client).await?;
    ensure_eq!(inventory.volumes.len(), 3, "PVs: {:?}", inventory.volumes);
    ensure_eq!(
        inventory.contents.len(),
        1,
        "VolumeSnapshotContents: {:?}",
        inventory.contents
    );
    let snapshot_classes = snapshots::volume_snapshot_classes(&client);
    Ok(BeforeUpgrade {
        class,
        snapshot_class_uid: snapshot_classes.get(SNAPSHOT_CLASS).await?.metadata.uid,
        data,
        lines_at_snapshot,
        snapshot,
        writer_pods,
        pods,
        shares,
        cloud_snapshots,
        driver_pods: driver_pod_uids(env).await?,
        inventory,
    })
}
