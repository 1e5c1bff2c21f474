//! After every test: its namespace is deleted and the runner proves it left nothing behind:
//! no object in its namespace (the namespace is gone), no PV bound to one of its claims, no
//! VolumeSnapshotContent of one of its snapshots, no cluster-scoped object carrying its
//! label, no share (Cinder volume) or snapshot behind those volumes in the cloud, and no mount of its
//! volumes on the host.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, ListParams};
use kube_support::wait;

use crate::e2e::snapshots;
use crate::e2e::workload::Workload;
use crate::registry::Cloud;
use cluster::TEST_NAMESPACE_LABEL;

/// What a test made that must be gone after it: its PVs (name → volume handle) and its
/// VolumeSnapshotContents (name → snapshot handle).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Footprint {
    /// PV names and their CSI volume handles (when known).
    pub volumes: Vec<(String, Option<String>)>,
    /// VolumeSnapshotContent names and their snapshot handles (when known).
    pub contents: Vec<(String, Option<String>)>,
}

impl Footprint {
    /// The PVs and contents of `workload`'s namespace as they are now, plus every PV the
    /// workload saw bound before.
    pub async fn of(workload: &Workload<'_>) -> Result<Footprint, String> {
        let client = workload.client();
        let namespace = workload.namespace();
        let mut names: BTreeSet<String> = workload.bound_volumes().into_iter().collect();
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), namespace);
        let claim_list = claims
            .list(&ListParams::default())
            .await
            .map_err(|e| format!("listing the claims of {namespace}: {e}"))?;
        names.extend(
            claim_list
                .items
                .iter()
                .filter_map(|c| c.spec.as_ref()?.volume_name.clone()),
        );
        let volumes: Api<PersistentVolume> = Api::all(client.clone());
        let all = volumes
            .list(&ListParams::default())
            .await
            .map_err(|e| format!("listing PVs: {e}"))?;
        let mut footprint = Footprint::default();
        for pv in &all.items {
            let name = pv.metadata.name.clone().unwrap_or_default();
            let claimed_here = pv
                .spec
                .as_ref()
                .and_then(|s| s.claim_ref.as_ref())
                .and_then(|r| r.namespace.as_deref())
                == Some(namespace);
            if claimed_here || names.contains(&name) {
                names.remove(&name);
                let handle = pv
                    .spec
                    .as_ref()
                    .and_then(|s| s.csi.as_ref())
                    .map(|c| c.volume_handle.clone());
                footprint.volumes.push((name, handle));
            }
        }
        // Seen bound but already gone: still checked for shares and mounts by name.
        footprint
            .volumes
            .extend(names.into_iter().map(|name| (name, None)));
        let contents = snapshots::volume_snapshot_contents(&client)
            .list(&ListParams::default())
            .await
            .map_err(|e| format!("listing VolumeSnapshotContents: {e}"))?;
        for content in &contents.items {
            let of_here =
                content.data["spec"]["volumeSnapshotRef"]["namespace"].as_str() == Some(namespace);
            if of_here {
                let handle = content.data["status"]["snapshotHandle"]
                    .as_str()
                    .or_else(|| content.data["spec"]["source"]["snapshotHandle"].as_str())
                    .map(str::to_string);
                footprint
                    .contents
                    .push((content.metadata.name.clone().unwrap_or_default(), handle));
            }
        }
        Ok(footprint)
    }
}

/// Deletes the test's namespace and proves it left nothing behind (see the module docs):
/// `Ok` or every leftover found, as one message.
pub async fn clean_up(
    workload: Workload<'_>,
    footprint: &Footprint,
    cloud: Option<&Cloud>,
    mounts_root: Option<&Path>,
    timeout: Duration,
) -> Result<(), String> {
    let client = workload.client();
    let cluster = workload.cluster().clone();
    let namespace = workload.namespace().to_string();
    let mut problems = Vec::new();

    // The namespace first: its pods stop, its claims and snapshots go.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    match namespaces
        .delete(&namespace, &DeleteParams::foreground())
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(e) => problems.push(format!("deleting namespace {namespace}: {e}")),
    }
    if let Err(e) = wait::wait_deleted(&namespaces, &namespace, timeout).await {
        problems.push(format!("namespace {namespace} not deleted: {e}"));
    }

    // PVs the test made itself (labelled: pre-provisioned ones, often Retain) go with it,
    // also when it failed before deleting them.
    let selector = format!("{TEST_NAMESPACE_LABEL}={namespace}");
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    delete_labelled(&volumes, &selector, "PersistentVolume", &mut problems).await;

    // Then what the claims and snapshots had in the cluster.
    for (name, _) in &footprint.volumes {
        if let Err(e) = wait::wait_deleted(&volumes, name, timeout).await {
            problems.push(format!("PV {name} left: {e}"));
        }
    }
    let contents = snapshots::volume_snapshot_contents(&client);
    for (name, _) in &footprint.contents {
        let gone = wait::wait_for_described(
            &contents,
            name,
            &format!("VolumeSnapshotContent {name} deleted"),
            |c: Option<&kube::api::DynamicObject>| c.is_none(),
            timeout,
        )
        .await;
        if let Err(e) = gone {
            problems.push(format!("VolumeSnapshotContent {name} left: {e}"));
        }
    }

    // The classes the test made through its context, now unused.
    let classes: Api<StorageClass> = Api::all(client.clone());
    delete_labelled(&classes, &selector, "StorageClass", &mut problems).await;
    let snapshot_classes = snapshots::volume_snapshot_classes(&client);
    delete_labelled(
        &snapshot_classes,
        &selector,
        "VolumeSnapshotClass",
        &mut problems,
    )
    .await;

    // The namespace is gone; this checks the labelled cluster-scoped kinds.
    if let Err(e) = workload.cleanup().await {
        problems.push(e.to_string());
    }

    if let Some(cloud) = cloud {
        check_cloud(cloud, footprint, timeout, &mut problems).await;
    }
    if let Some(root) = mounts_root {
        check_mounts(&cluster, root, footprint, timeout, &mut problems).await;
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("left behind: {}", problems.join("; ")))
    }
}

async fn delete_labelled<K>(api: &Api<K>, selector: &str, kind: &str, problems: &mut Vec<String>)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let list = match api.list(&ListParams::default().labels(selector)).await {
        Ok(list) => list,
        // No snapshot CRDs: no snapshot classes either.
        Err(kube::Error::Api(e)) if e.code == 404 => return,
        Err(e) => {
            let plural = if kind.ends_with('s') { "es" } else { "s" };
            problems.push(format!("listing {kind}{plural} labelled {selector}: {e}"));
            return;
        }
    };
    for object in list.items {
        let name = object.meta().name.clone().unwrap_or_default();
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => problems.push(format!("deleting {kind} {name}: {e}")),
        }
    }
}

/// Every volume (share) behind the test's PVs and every snapshot behind its contents is gone
/// from the cloud (deletion there may trail the objects' for a moment).
async fn check_cloud(
    cloud: &Cloud,
    footprint: &Footprint,
    timeout: Duration,
    problems: &mut Vec<String>,
) {
    let volume_ids: Vec<String> = footprint
        .volumes
        .iter()
        .filter_map(|(_, handle)| handle.clone())
        .collect();
    let snapshot_ids: Vec<String> = footprint
        .contents
        .iter()
        .filter_map(|(_, handle)| handle.clone())
        .collect();
    if volume_ids.is_empty() && snapshot_ids.is_empty() {
        return;
    }
    let noun = cloud.volume_noun();
    let result = wait::wait_until(
        format!("the test's {noun}s and snapshots gone from the cloud"),
        timeout,
        || {
            let volume_ids = volume_ids.clone();
            let snapshot_ids = snapshot_ids.clone();
            async move {
                let mut left = Vec::new();
                for id in &volume_ids {
                    match cloud.volume(id).await {
                        Ok(None) => {}
                        Ok(Some(volume)) => left.push(format!("{noun} {volume}")),
                        Err(e) => return Err(e.to_string()),
                    }
                }
                for id in &snapshot_ids {
                    match cloud.snapshot_status(id).await {
                        Ok(None) => {}
                        Ok(Some(status)) => left.push(format!("snapshot {id} ({status})")),
                        Err(e) => return Err(e.to_string()),
                    }
                }
                if left.is_empty() {
                    Ok(Some(()))
                } else {
                    Err(left.join(", "))
                }
            }
        },
    )
    .await;
    if let Err(e) = result {
        problems.push(format!("in the cloud: {e}"));
    }
}

/// No mount point below `root` belongs to one of the test's PVs (their staging
/// `…/pv/<pv>/globalmount` and publish `…/volumes/kubernetes.io~csi/<pv>/mount` paths).
async fn check_mounts(
    cluster: &cluster::Cluster,
    root: &Path,
    footprint: &Footprint,
    timeout: Duration,
    problems: &mut Vec<String>,
) {
    let volumes: Vec<String> = footprint.volumes.iter().map(|(n, _)| n.clone()).collect();
    if volumes.is_empty() {
        return;
    }
    let result = wait::wait_until(
        "no mount of the test's volumes on the host",
        timeout,
        || {
            let volumes = volumes.clone();
            async move {
                let mounts = cluster
                    .mount_points_under(root)
                    .await
                    .map_err(|e| e.to_string())?;
                let left: Vec<String> = mounts
                    .iter()
                    .map(|m| m.display().to_string())
                    .filter(|m| volumes.iter().any(|pv| belongs_to(m, pv)))
                    .collect();
                if left.is_empty() {
                    Ok(Some(()))
                } else {
                    Err(left.join(", "))
                }
            }
        },
    )
    .await;
    if let Err(e) = result {
        problems.push(format!("mounts: {e}"));
    }
}

/// Whether the mount point `path` is one of the volume `pv`'s kubelet paths.
fn belongs_to(path: &str, pv: &str) -> bool {
    path.split('/').any(|component| component == pv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mount_belongs_to_a_volume_by_a_whole_path_component() {
        let pv = "pvc-1234";
        assert!(belongs_to(
            "/tmp/occ/cluster-x/nodes/node-1/pods/uid/volumes/kubernetes.io~csi/pvc-1234/mount",
            pv
        ));
        assert!(belongs_to(
            "/tmp/occ/cluster-x/nodes/node-1/plugins/kubernetes.io/csi/pv/pvc-1234/globalmount",
            pv
        ));
        assert!(!belongs_to(
            "/tmp/occ/cluster-x/nodes/node-1/plugins/kubernetes.io/csi/pv/pvc-12345/globalmount",
            pv
        ));
    }
}
