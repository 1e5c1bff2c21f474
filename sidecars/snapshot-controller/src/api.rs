//! The `snapshot.storage.k8s.io/v1` types: VolumeSnapshot, VolumeSnapshotContent and
//! VolumeSnapshotClass, with the finalizer and annotation names the snapshot controller and
//! the CSI snapshotter share.
//!
//! The schema the apiserver enforces is the CRD YAML in `fixtures/crds/` (see [`crate::crds`]);
//! these types mirror it field for field. Optional fields are `Option` and omitted when unset,
//! so a status patch never clears what it does not mention.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::CustomResource;
use kube::core::ClusterResourceScope;
use serde::{Deserialize, Serialize};

/// The API group of the snapshot resources.
pub const GROUP: &str = "snapshot.storage.k8s.io";
/// The served (and stored) version.
pub const VERSION: &str = "v1";
/// `apiVersion` of the snapshot resources.
pub const API_VERSION: &str = "snapshot.storage.k8s.io/v1";

/// On every VolumeSnapshot until it is no longer the data source of a PVC being provisioned.
pub const VOLUME_SNAPSHOT_AS_SOURCE_FINALIZER: &str =
    "snapshot.storage.kubernetes.io/volumesnapshot-as-source-protection";
/// On a VolumeSnapshot once it is bound to a VolumeSnapshotContent.
pub const VOLUME_SNAPSHOT_BOUND_FINALIZER: &str =
    "snapshot.storage.kubernetes.io/volumesnapshot-bound-protection";
/// On a VolumeSnapshotContent: added by the snapshot controller, removed by the CSI
/// snapshotter once the physical snapshot is deleted (or retained).
pub const VOLUME_SNAPSHOT_CONTENT_FINALIZER: &str =
    "snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection";
/// On a PVC while a snapshot of it is being taken.
pub const PVC_AS_SOURCE_FINALIZER: &str = "snapshot.storage.kubernetes.io/pvc-as-source-protection";

/// On a VolumeSnapshotClass: `"true"` makes it the default class of its driver.
pub const IS_DEFAULT_CLASS_ANNOTATION: &str = "snapshot.storage.kubernetes.io/is-default-class";
/// On a VolumeSnapshotContent: the snapshot controller saw its VolumeSnapshot being deleted;
/// the snapshotter applies the deletion policy.
pub const BEING_DELETED_ANNOTATION: &str =
    "snapshot.storage.kubernetes.io/volumesnapshot-being-deleted";
/// On a VolumeSnapshotContent: the snapshotter has sent CreateSnapshot and awaits a final answer.
pub const BEING_CREATED_ANNOTATION: &str =
    "snapshot.storage.kubernetes.io/volumesnapshot-being-created";
/// On a VolumeSnapshotContent: name of the secret DeleteSnapshot needs.
pub const DELETION_SECRET_NAME_ANNOTATION: &str =
    "snapshot.storage.kubernetes.io/deletion-secret-name";
/// On a VolumeSnapshotContent: namespace of the secret DeleteSnapshot needs.
pub const DELETION_SECRET_NAMESPACE_ANNOTATION: &str =
    "snapshot.storage.kubernetes.io/deletion-secret-namespace";

/// Class parameter prefix reserved for the sidecars (never passed to the driver).
pub const CSI_PARAMETER_PREFIX: &str = "csi.storage.k8s.io/";
/// Class parameter: name (template) of the secret for CreateSnapshot/DeleteSnapshot.
pub const SNAPSHOTTER_SECRET_NAME_PARAMETER: &str = "csi.storage.k8s.io/snapshotter-secret-name";
/// Class parameter: namespace (template) of the secret for CreateSnapshot/DeleteSnapshot.
pub const SNAPSHOTTER_SECRET_NAMESPACE_PARAMETER: &str =
    "csi.storage.k8s.io/snapshotter-secret-namespace";

/// A user's request to snapshot a PVC, or to bind to a snapshot that already exists.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "snapshot.storage.k8s.io",
    version = "v1",
    kind = "VolumeSnapshot",
    namespaced,
    status = "VolumeSnapshotStatus",
    shortname = "vs",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct VolumeSnapshotSpec {
    /// Where the snapshot comes from (exactly one field set).
    pub source: VolumeSnapshotSource,
    /// The class to use; the driver's default class when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_snapshot_class_name: Option<String>,
}

/// The source of a VolumeSnapshot: a PVC to snapshot or an existing content to bind to.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct VolumeSnapshotSource {
    /// Take a new snapshot of this PVC (in the snapshot's namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim_name: Option<String>,
    /// Bind to this pre-existing VolumeSnapshotContent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_snapshot_content_name: Option<String>,
}

/// What the snapshot controller last observed of a VolumeSnapshot.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VolumeSnapshotStatus {
    /// The content this snapshot is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_volume_snapshot_content_name: Option<String>,
    /// When the storage system took the snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_time: Option<Time>,
    /// Whether a volume can be restored from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_to_use: Option<bool>,
    /// The minimum size of a volume restored from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_size: Option<Quantity>,
    /// The last error seen while creating it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<VolumeSnapshotError>,
}

/// An error seen while creating a snapshot.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VolumeSnapshotError {
    /// When it was seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<Time>,
    /// What went wrong (no secrets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Whether a content and its physical snapshot outlive the bound VolumeSnapshot.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeletionPolicy {
    /// Deleted with the VolumeSnapshot.
    #[default]
    Delete,
    /// Kept after the VolumeSnapshot is deleted.
    Retain,
}

/// A snapshot as it exists on the storage system.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "snapshot.storage.k8s.io",
    version = "v1",
    kind = "VolumeSnapshotContent",
    status = "VolumeSnapshotContentStatus",
    shortname = "vsc",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct VolumeSnapshotContentSpec {
    /// The VolumeSnapshot this content is bound to.
    pub volume_snapshot_ref: ObjectReference,
    /// Delete or Retain the physical snapshot with the VolumeSnapshot.
    pub deletion_policy: DeletionPolicy,
    /// The CSI driver that took the snapshot.
    pub driver: String,
    /// The volume to snapshot, or the existing snapshot (exactly one field set).
    pub source: VolumeSnapshotContentSource,
    /// The class the snapshot was created through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_snapshot_class_name: Option<String>,
    /// `Filesystem` or `Block`: the mode of the source volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_volume_mode: Option<String>,
}

/// The source of a content: a volume to snapshot or a snapshot that exists.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct VolumeSnapshotContentSource {
    /// CSI volume_id to take a snapshot of (dynamic snapshots).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_handle: Option<String>,
    /// CSI snapshot_id of an existing snapshot (pre-provisioned snapshots).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_handle: Option<String>,
}

/// What the snapshotter last observed of a content's physical snapshot.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VolumeSnapshotContentStatus {
    /// CSI snapshot_id on the storage system.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_handle: Option<String>,
    /// When the snapshot was taken, in Unix nanoseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_time: Option<i64>,
    /// Whether a volume can be restored from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_to_use: Option<bool>,
    /// Size of the snapshot in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_size: Option<i64>,
    /// The last error seen while creating it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<VolumeSnapshotError>,
}

/// The parameters a driver uses to create snapshots; named by VolumeSnapshots.
///
/// Its fields are at the top level (there is no `spec`), so the type is written by hand
/// rather than derived; it serialises with its `apiVersion` and `kind`.
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VolumeSnapshotClass {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// The CSI driver that handles this class.
    pub driver: String,
    /// Policy for contents created through this class.
    pub deletion_policy: DeletionPolicy,
    /// Driver parameters (and `csi.storage.k8s.io/` ones for the snapshotter).
    #[serde(default)]
    pub parameters: BTreeMap<String, String>,
}

impl VolumeSnapshotClass {
    /// A class named `name` for `driver`.
    pub fn new(name: &str, driver: &str, deletion_policy: DeletionPolicy) -> Self {
        Self {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            driver: driver.to_owned(),
            deletion_policy,
            parameters: BTreeMap::new(),
        }
    }

    /// Whether the class is annotated as its driver's default.
    pub fn is_default(&self) -> bool {
        self.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(IS_DEFAULT_CLASS_ANNOTATION))
            .is_some_and(|v| v == "true")
    }
}

impl Serialize for VolumeSnapshotClass {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Wire<'a> {
            api_version: &'static str,
            kind: &'static str,
            metadata: &'a ObjectMeta,
            driver: &'a str,
            deletion_policy: DeletionPolicy,
            #[serde(skip_serializing_if = "BTreeMap::is_empty")]
            parameters: &'a BTreeMap<String, String>,
        }
        Wire {
            api_version: API_VERSION,
            kind: "VolumeSnapshotClass",
            metadata: &self.metadata,
            driver: &self.driver,
            deletion_policy: self.deletion_policy,
            parameters: &self.parameters,
        }
        .serialize(serializer)
    }
}

impl kube::Resource for VolumeSnapshotClass {
    type DynamicType = ();
    type Scope = ClusterResourceScope;

    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        "VolumeSnapshotClass".into()
    }
    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        GROUP.into()
    }
    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        VERSION.into()
    }
    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        "volumesnapshotclasses".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl VolumeSnapshot {
    /// The PVC this snapshot is taken from, if it is a dynamic snapshot.
    pub fn source_pvc(&self) -> Option<&str> {
        self.spec.source.persistent_volume_claim_name.as_deref()
    }

    /// The pre-existing content this snapshot binds to, if it is pre-provisioned.
    pub fn source_content(&self) -> Option<&str> {
        self.spec.source.volume_snapshot_content_name.as_deref()
    }

    /// The content name the controller uses for a dynamic snapshot: `snapcontent-<uid>`.
    pub fn dynamic_content_name(&self) -> Option<String> {
        self.metadata
            .uid
            .as_ref()
            .map(|uid| format!("snapcontent-{uid}"))
    }

    /// Whether the status says the snapshot is ready to use.
    pub fn is_ready(&self) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.ready_to_use)
            .unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn class_serialises_with_type_meta_and_round_trips() {
        let mut class =
            VolumeSnapshotClass::new("gold", "manila.csi.openstack.org", DeletionPolicy::Retain);
        class
            .parameters
            .insert("force-create".into(), "true".into());
        let json = serde_json::to_value(&class).unwrap();
        assert_eq!(json["apiVersion"], API_VERSION);
        assert_eq!(json["kind"], "VolumeSnapshotClass");
        assert_eq!(json["deletionPolicy"], "Retain");
        let back: VolumeSnapshotClass = serde_json::from_value(json).unwrap();
        assert_eq!(back, class);
    }

    #[test]
    fn snapshot_serialises_to_the_upstream_field_names() {
        let vs = VolumeSnapshot::new(
            "snap",
            VolumeSnapshotSpec {
                source: VolumeSnapshotSource {
                    persistent_volume_claim_name: Some("data".into()),
                    volume_snapshot_content_name: None,
                },
                volume_snapshot_class_name: Some("gold".into()),
            },
        );
        let json = serde_json::to_value(&vs).unwrap();
        assert_eq!(json["apiVersion"], API_VERSION);
        assert_eq!(
            json["spec"]["source"],
            serde_json::json!({"persistentVolumeClaimName": "data"})
        );
        assert_eq!(json["spec"]["volumeSnapshotClassName"], "gold");
    }
}
