//! VolumeSnapshots and VolumeSnapshotContents (`snapshot.storage.k8s.io/v1`) as dynamic
//! objects.

use std::time::Duration;

use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use kube_support::wait;

use super::error::Result;

/// The snapshot API group.
pub const GROUP: &str = "snapshot.storage.k8s.io";

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, "v1", kind), plural)
}

/// VolumeSnapshots of `namespace`.
pub fn volume_snapshots(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        namespace,
        &resource("VolumeSnapshot", "volumesnapshots"),
    )
}

/// VolumeSnapshots of every namespace.
pub fn volume_snapshots_all(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &resource("VolumeSnapshot", "volumesnapshots"),
    )
}

/// VolumeSnapshotContents (cluster-scoped).
pub fn volume_snapshot_contents(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &resource("VolumeSnapshotContent", "volumesnapshotcontents"),
    )
}

/// A VolumeSnapshot `name` of the claim `claim` with class `class`.
pub fn volume_snapshot(name: &str, claim: &str, class: &str) -> DynamicObject {
    let resource = resource("VolumeSnapshot", "volumesnapshots");
    let mut snapshot = DynamicObject::new(name, &resource);
    snapshot.data = serde_json::json!({
        "spec": {
            "volumeSnapshotClassName": class,
            "source": {"persistentVolumeClaimName": claim},
        }
    });
    snapshot
}

/// Whether a VolumeSnapshot (or content) says `status.readyToUse: true`.
pub fn is_ready(object: &DynamicObject) -> bool {
    object.data["status"]["readyToUse"].as_bool() == Some(true)
}

/// Waits until the VolumeSnapshot `name` is ready to use and returns it.
pub async fn wait_ready(
    api: &Api<DynamicObject>,
    name: &str,
    timeout: Duration,
) -> Result<DynamicObject> {
    let found = wait::wait_for_described(
        api,
        name,
        &format!("VolumeSnapshot {name} readyToUse"),
        |o: Option<&DynamicObject>| o.is_some_and(is_ready),
        timeout,
    )
    .await?;
    found.ok_or_else(|| super::Error::Unexpected(format!("VolumeSnapshot {name} vanished")))
}

/// VolumeSnapshotClasses (cluster-scoped).
pub fn volume_snapshot_classes(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &resource("VolumeSnapshotClass", "volumesnapshotclasses"),
    )
}

/// The VolumeSnapshot kind, for building snapshots.
pub fn volume_snapshot_resource() -> ApiResource {
    resource("VolumeSnapshot", "volumesnapshots")
}

/// The VolumeSnapshotContent kind, for building (pre-provisioned) contents.
pub fn volume_snapshot_content_resource() -> ApiResource {
    resource("VolumeSnapshotContent", "volumesnapshotcontents")
}

/// The VolumeSnapshotClass kind, for building classes.
pub fn volume_snapshot_class_resource() -> ApiResource {
    resource("VolumeSnapshotClass", "volumesnapshotclasses")
}
