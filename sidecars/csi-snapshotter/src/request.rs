//! What a CSI snapshot call needs from a VolumeSnapshotContent and its class: the driver
//! parameters (class parameters without the `csi.storage.k8s.io/` ones, plus the
//! `--extra-create-metadata` keys) and the snapshotter secret.
//!
//! The secret is found as upstream does: the content's
//! `snapshot.storage.kubernetes.io/deletion-secret-name/namespace` annotations (written by
//! the snapshot controller from the class), else the class's
//! `csi.storage.k8s.io/snapshotter-secret-name/namespace` parameters with their templates.

use std::collections::{BTreeMap, HashMap};

use kube::api::Api;
use kube::{Client, ResourceExt};
use sidecar_common::secrets::{SecretRef, request_secrets};
use snapshot_controller::api::{
    CSI_PARAMETER_PREFIX, DELETION_SECRET_NAME_ANNOTATION, DELETION_SECRET_NAMESPACE_ANNOTATION,
};
use snapshot_controller::controller::class::{TemplateValues, snapshotter_secret};
use snapshot_controller::{VolumeSnapshotClass, VolumeSnapshotContent};

use crate::{Error, Result};

/// `--extra-create-metadata` parameter: the VolumeSnapshot's name.
pub const SNAPSHOT_NAME_PARAMETER: &str = "csi.storage.k8s.io/volumesnapshot/name";
/// `--extra-create-metadata` parameter: the VolumeSnapshot's namespace.
pub const SNAPSHOT_NAMESPACE_PARAMETER: &str = "csi.storage.k8s.io/volumesnapshot/namespace";
/// `--extra-create-metadata` parameter: the VolumeSnapshotContent's name.
pub const CONTENT_NAME_PARAMETER: &str = "csi.storage.k8s.io/volumesnapshotcontent/name";

/// The content's class: `None` when it names none; an error when the named class is missing
/// and `required` (CreateSnapshot needs its parameters; DeleteSnapshot can do without).
pub async fn class_of(
    client: &Client,
    content: &VolumeSnapshotContent,
    required: bool,
) -> Result<Option<VolumeSnapshotClass>> {
    let Some(name) = content.spec.volume_snapshot_class_name.as_deref() else {
        return Ok(None);
    };
    let classes: Api<VolumeSnapshotClass> = Api::all(client.clone());
    let class = classes
        .get_opt(name)
        .await
        .map_err(|e| Error::kube(format!("reading VolumeSnapshotClass {name}"), e))?;
    match class {
        None if required => Err(Error::invalid(format!(
            "the VolumeSnapshotClass {name} of VolumeSnapshotContent {} does not exist",
            content.name_any()
        ))),
        class => Ok(class),
    }
}

/// CreateSnapshot parameters: the class's parameters without `csi.storage.k8s.io/` keys,
/// plus the snapshot and content names with `extra_create_metadata`.
pub fn parameters(
    class: Option<&VolumeSnapshotClass>,
    content: &VolumeSnapshotContent,
    extra_create_metadata: bool,
) -> HashMap<String, String> {
    let mut parameters: HashMap<String, String> = class
        .map(|c| &c.parameters)
        .into_iter()
        .flatten()
        .filter(|(key, _)| !key.starts_with(CSI_PARAMETER_PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if extra_create_metadata {
        let reference = &content.spec.volume_snapshot_ref;
        parameters.insert(
            SNAPSHOT_NAME_PARAMETER.into(),
            reference.name.clone().unwrap_or_default(),
        );
        parameters.insert(
            SNAPSHOT_NAMESPACE_PARAMETER.into(),
            reference.namespace.clone().unwrap_or_default(),
        );
        parameters.insert(CONTENT_NAME_PARAMETER.into(), content.name_any());
    }
    parameters
}

/// The snapshotter secret of `content`: its deletion-secret annotations, else its class's
/// secret parameters; `None` when neither names one.
pub fn secret_reference(
    content: &VolumeSnapshotContent,
    class: Option<&VolumeSnapshotClass>,
) -> Result<Option<SecretRef>> {
    let empty = BTreeMap::new();
    let annotations = content.metadata.annotations.as_ref().unwrap_or(&empty);
    match (
        annotations.get(DELETION_SECRET_NAME_ANNOTATION),
        annotations.get(DELETION_SECRET_NAMESPACE_ANNOTATION),
    ) {
        (Some(name), Some(namespace)) if !name.is_empty() && !namespace.is_empty() => {
            return Ok(Some(SecretRef {
                name: name.clone(),
                namespace: namespace.clone(),
            }));
        }
        (None, None) => {}
        _ => {
            return Err(Error::invalid(format!(
                "VolumeSnapshotContent {}: annotations {DELETION_SECRET_NAME_ANNOTATION} and {DELETION_SECRET_NAMESPACE_ANNOTATION} must both be set and non-empty",
                content.name_any()
            )));
        }
    }
    let Some(class) = class else {
        return Ok(None);
    };
    let reference = &content.spec.volume_snapshot_ref;
    let content_name = content.name_any();
    let values = TemplateValues {
        content_name: &content_name,
        snapshot_name: reference.name.as_deref().unwrap_or_default(),
        snapshot_namespace: reference.namespace.as_deref().unwrap_or_default(),
    };
    let reference =
        snapshotter_secret(class, &values).map_err(|e| Error::invalid(e.to_string()))?;
    Ok(reference.map(|r| SecretRef {
        name: r.name,
        namespace: r.namespace,
    }))
}

/// The secret's data for a CSI request (empty without a reference).
pub async fn secrets(
    client: &Client,
    reference: Option<&SecretRef>,
) -> Result<HashMap<String, String>> {
    Ok(request_secrets(client, reference).await?)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use k8s_openapi::api::core::v1::ObjectReference;
    use snapshot_controller::api::{
        SNAPSHOTTER_SECRET_NAME_PARAMETER, SNAPSHOTTER_SECRET_NAMESPACE_PARAMETER,
    };
    use snapshot_controller::{DeletionPolicy, VolumeSnapshotContentSpec};

    use super::*;

    fn content() -> VolumeSnapshotContent {
        VolumeSnapshotContent::new(
            "snapcontent-1",
            VolumeSnapshotContentSpec {
                volume_snapshot_ref: ObjectReference {
                    name: Some("snap".into()),
                    namespace: Some("apps".into()),
                    uid: Some("1".into()),
                    ..Default::default()
                },
                driver: "manila.csi.openstack.org".into(),
                ..Default::default()
            },
        )
    }

    fn class() -> VolumeSnapshotClass {
        let mut class =
            VolumeSnapshotClass::new("gold", "manila.csi.openstack.org", DeletionPolicy::Delete);
        class.parameters = BTreeMap::from([
            ("force-create".into(), "true".into()),
            (
                SNAPSHOTTER_SECRET_NAME_PARAMETER.into(),
                "${volumesnapshot.name}-creds".into(),
            ),
            (
                SNAPSHOTTER_SECRET_NAMESPACE_PARAMETER.into(),
                "${volumesnapshot.namespace}".into(),
            ),
        ]);
        class
    }

    #[test]
    fn parameters_drop_reserved_keys_and_add_metadata_on_request() {
        let class = class();
        let plain = parameters(Some(&class), &content(), false);
        assert_eq!(
            plain,
            HashMap::from([("force-create".into(), "true".into())])
        );
        let extra = parameters(Some(&class), &content(), true);
        assert_eq!(extra[SNAPSHOT_NAME_PARAMETER], "snap");
        assert_eq!(extra[SNAPSHOT_NAMESPACE_PARAMETER], "apps");
        assert_eq!(extra[CONTENT_NAME_PARAMETER], "snapcontent-1");
        assert_eq!(extra.len(), 4);
        assert!(parameters(None, &content(), false).is_empty());
    }

    #[test]
    fn annotations_win_over_class_templates() {
        let mut annotated = content();
        annotated.metadata.annotations = Some(BTreeMap::from([
            (DELETION_SECRET_NAME_ANNOTATION.into(), "s".into()),
            (DELETION_SECRET_NAMESPACE_ANNOTATION.into(), "ns".into()),
        ]));
        let reference = secret_reference(&annotated, Some(&class()))
            .unwrap()
            .unwrap();
        assert_eq!(
            (reference.name.as_str(), reference.namespace.as_str()),
            ("s", "ns")
        );

        let reference = secret_reference(&content(), Some(&class()))
            .unwrap()
            .unwrap();
        assert_eq!(
            (reference.name.as_str(), reference.namespace.as_str()),
            ("snap-creds", "apps")
        );
        assert_eq!(secret_reference(&content(), None).unwrap(), None);
    }

    #[test]
    fn half_an_annotation_pair_is_refused_by_name() {
        let mut annotated = content();
        annotated.metadata.annotations = Some(BTreeMap::from([(
            DELETION_SECRET_NAME_ANNOTATION.into(),
            "s".into(),
        )]));
        let error = secret_reference(&annotated, None).unwrap_err().to_string();
        assert!(
            error.contains(DELETION_SECRET_NAMESPACE_ANNOTATION),
            "{error}"
        );
        assert!(error.contains("snapcontent-1"), "{error}");
    }
}
