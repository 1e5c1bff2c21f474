//! A claim's data source as CreateVolume's `volume_content_source`: a VolumeSnapshot
//! (`snapshot.storage.k8s.io`) → the snapshot handle of its bound VolumeSnapshotContent;
//! another claim → its PV's volume handle, only when the driver has CLONE_VOLUME.

use csi_proto::v1::VolumeContentSource;
use csi_proto::v1::volume_content_source::{SnapshotSource, Type, VolumeSource};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};

use crate::{Error, Result};

/// The API group of VolumeSnapshots.
pub const SNAPSHOT_GROUP: &str = "snapshot.storage.k8s.io";

fn snapshot_resource(kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(SNAPSHOT_GROUP, "v1", kind))
}

/// The content source for `claim`, or `None` without a data source.
pub async fn content_source(
    client: &Client,
    claim: &PersistentVolumeClaim,
    driver: &str,
    can_clone: bool,
) -> Result<Option<VolumeContentSource>> {
    let spec = claim.spec.as_ref();
    let Some((kind, group, name)) = spec.and_then(|s| {
        s.data_source_ref
            .as_ref()
            .map(|r| (r.kind.clone(), r.api_group.clone(), r.name.clone()))
            .or_else(|| {
                s.data_source
                    .as_ref()
                    .map(|r| (r.kind.clone(), r.api_group.clone(), r.name.clone()))
            })
    }) else {
        return Ok(None);
    };
    let namespace = claim.metadata.namespace.as_deref().unwrap_or("default");
    match (kind.as_str(), group.as_deref().unwrap_or("")) {
        ("VolumeSnapshot", SNAPSHOT_GROUP) => {
            let snapshot_id = snapshot_handle(client, namespace, &name).await?;
            Ok(Some(VolumeContentSource {
                r#type: Some(Type::Snapshot(SnapshotSource { snapshot_id })),
            }))
        }
        ("PersistentVolumeClaim", "") => {
            if !can_clone {
                return Err(Error::Invalid(format!(
                    "the claim's data source is PersistentVolumeClaim {name:?} but driver {driver} does not \
                     support cloning (no CLONE_VOLUME controller capability)"
                )));
            }
            let volume_id = clone_source(client, namespace, &name, driver).await?;
            Ok(Some(VolumeContentSource {
                r#type: Some(Type::Volume(VolumeSource { volume_id })),
            }))
        }
        (kind, group) => Err(Error::Invalid(format!(
            "unsupported data source {kind} in API group {group:?} (supported: VolumeSnapshot in {SNAPSHOT_GROUP}, PersistentVolumeClaim)"
        ))),
    }
}

async fn snapshot_handle(client: &Client, namespace: &str, name: &str) -> Result<String> {
    let snapshots: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        namespace,
        &snapshot_resource("VolumeSnapshot"),
    );
    let snapshot = snapshots
        .get(name)
        .await
        .map_err(|e| Error::kube(format!("reading VolumeSnapshot {namespace}/{name}"), e))?;
    let content_name = snapshot.data["status"]["boundVolumeSnapshotContentName"]
        .as_str()
        .ok_or_else(|| {
            Error::NotReady(format!(
                "VolumeSnapshot {namespace}/{name} is not bound to a content yet"
            ))
        })?
        .to_string();
    if snapshot.data["status"]["readyToUse"].as_bool() != Some(true) {
        return Err(Error::NotReady(format!(
            "VolumeSnapshot {namespace}/{name} is not ready to use yet"
        )));
    }
    let contents: Api<DynamicObject> =
        Api::all_with(client.clone(), &snapshot_resource("VolumeSnapshotContent"));
    let content = contents
        .get(&content_name)
        .await
        .map_err(|e| Error::kube(format!("reading VolumeSnapshotContent {content_name}"), e))?;
    content.data["status"]["snapshotHandle"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| {
            Error::NotReady(format!(
                "VolumeSnapshotContent {content_name} has no snapshotHandle yet"
            ))
        })
}

async fn clone_source(
    client: &Client,
    namespace: &str,
    name: &str,
    driver: &str,
) -> Result<String> {
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), namespace);
    let source = claims
        .get(name)
        .await
        .map_err(|e| Error::kube(format!("reading the source claim {namespace}/{name}"), e))?;
    let volume = source
        .spec
        .and_then(|s| s.volume_name)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| {
            Error::NotReady(format!(
                "the source claim {namespace}/{name} is not bound yet"
            ))
        })?;
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let pv = pvs
        .get(&volume)
        .await
        .map_err(|e| Error::kube(format!("reading the source volume {volume}"), e))?;
    let csi = pv
        .spec
        .and_then(|s| s.csi)
        .filter(|c| c.driver == driver)
        .ok_or_else(|| {
            Error::Invalid(format!(
                "the source claim {namespace}/{name} is not a volume of driver {driver}"
            ))
        })?;
    Ok(csi.volume_handle)
}
