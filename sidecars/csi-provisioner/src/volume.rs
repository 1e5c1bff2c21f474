//! The PersistentVolume for a created volume, as upstream's provisioner writes it.

use std::collections::BTreeMap;

use csi_proto::v1::Volume;
use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, ObjectReference, PersistentVolume, PersistentVolumeClaim,
    PersistentVolumeSpec, SecretReference,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube_support::quantity::format_bytes;
use sidecar_common::secrets::{SecretKind, SecretRef};

use crate::topology::node_affinity;

/// Annotation naming the provisioner that made a PV.
pub const ANN_PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
/// The provisioner's finalizer on its PVs: the volume is deleted before the PV goes.
pub const FINALIZER: &str = "external-provisioner.volume.kubernetes.io/finalizer";
/// Where the PV keeps the provisioner secret for DeleteVolume (the class may be gone).
pub const ANN_DELETION_SECRET_NAME: &str = "volume.kubernetes.io/provisioner-deletion-secret-name";
/// See [`ANN_DELETION_SECRET_NAME`].
pub const ANN_DELETION_SECRET_NAMESPACE: &str =
    "volume.kubernetes.io/provisioner-deletion-secret-namespace";
/// Volume attribute naming the provisioner instance.
pub const PROVISIONER_IDENTITY_KEY: &str = "storage.kubernetes.io/csiProvisionerIdentity";

/// What goes into the PV besides the claim and class.
#[derive(Debug)]
pub struct Provisioned<'a> {
    /// PV name (`pvc-<uid>`).
    pub pv_name: &'a str,
    /// Driver name.
    pub driver: &'a str,
    /// CreateVolume's answer.
    pub volume: &'a Volume,
    /// What the claim requested, used when the driver reports no capacity.
    pub requested_bytes: i64,
    /// fsType ("" for none).
    pub fs_type: &'a str,
    /// Resolved secret references for the other operations.
    pub secrets: &'a BTreeMap<&'static str, SecretRef>,
    /// The provisioner secret, remembered for deletion.
    pub provisioner_secret: Option<&'a SecretRef>,
    /// This provisioner's identity.
    pub identity: &'a str,
    /// Topology is on (feature gate and driver): the PV gets node affinity.
    pub topology: bool,
}

fn secret_ref(
    secrets: &BTreeMap<&'static str, SecretRef>,
    kind: SecretKind,
) -> Option<SecretReference> {
    secrets.get(kind_key(kind)).map(|r| SecretReference {
        name: Some(r.name.clone()),
        namespace: Some(r.namespace.clone()),
    })
}

/// The key a secret kind is stored under in [`Provisioned::secrets`].
pub fn kind_key(kind: SecretKind) -> &'static str {
    match kind {
        SecretKind::Provisioner => "provisioner",
        SecretKind::ControllerPublish => "controller-publish",
        SecretKind::NodeStage => "node-stage",
        SecretKind::NodePublish => "node-publish",
        SecretKind::ControllerExpand => "controller-expand",
        SecretKind::NodeExpand => "node-expand",
    }
}

/// The PV bound (by claimRef) to `claim`.
pub fn persistent_volume(
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    p: &Provisioned<'_>,
) -> PersistentVolume {
    let claim_spec = claim.spec.clone().unwrap_or_default();
    let mut annotations = BTreeMap::from([(ANN_PROVISIONED_BY.to_string(), p.driver.to_string())]);
    if let Some(secret) = p.provisioner_secret {
        annotations.insert(ANN_DELETION_SECRET_NAME.into(), secret.name.clone());
        annotations.insert(
            ANN_DELETION_SECRET_NAMESPACE.into(),
            secret.namespace.clone(),
        );
    }
    let mut attributes: BTreeMap<String, String> = p
        .volume
        .volume_context
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    attributes.insert(PROVISIONER_IDENTITY_KEY.into(), p.identity.to_string());
    let bytes = if p.volume.capacity_bytes > 0 {
        p.volume.capacity_bytes
    } else {
        p.requested_bytes
    };
    PersistentVolume {
        metadata: ObjectMeta {
            name: Some(p.pv_name.to_string()),
            annotations: Some(annotations),
            finalizers: Some(vec![FINALIZER.to_string()]),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeSpec {
            access_modes: claim_spec.access_modes.clone(),
            capacity: Some(BTreeMap::from([(
                "storage".to_string(),
                Quantity(format_bytes(bytes)),
            )])),
            claim_ref: Some(ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("PersistentVolumeClaim".into()),
                name: claim.metadata.name.clone(),
                namespace: claim.metadata.namespace.clone(),
                uid: claim.metadata.uid.clone(),
                resource_version: claim.metadata.resource_version.clone(),
                field_path: None,
            }),
            csi: Some(CSIPersistentVolumeSource {
                driver: p.driver.to_string(),
                volume_handle: p.volume.volume_id.clone(),
                volume_attributes: Some(attributes),
                fs_type: (!p.fs_type.is_empty()).then(|| p.fs_type.to_string()),
                controller_publish_secret_ref: secret_ref(p.secrets, SecretKind::ControllerPublish),
                node_stage_secret_ref: secret_ref(p.secrets, SecretKind::NodeStage),
                node_publish_secret_ref: secret_ref(p.secrets, SecretKind::NodePublish),
                controller_expand_secret_ref: secret_ref(p.secrets, SecretKind::ControllerExpand),
                node_expand_secret_ref: secret_ref(p.secrets, SecretKind::NodeExpand),
                read_only: None,
            }),
            mount_options: class.mount_options.clone(),
            node_affinity: p
                .topology
                .then(|| node_affinity(&p.volume.accessible_topology))
                .flatten(),
            persistent_volume_reclaim_policy: Some(
                class
                    .reclaim_policy
                    .clone()
                    .unwrap_or_else(|| "Delete".into()),
            ),
            storage_class_name: class.metadata.name.clone(),
            volume_mode: claim_spec.volume_mode.clone(),
            ..PersistentVolumeSpec::default()
        }),
        status: None,
    }
}
