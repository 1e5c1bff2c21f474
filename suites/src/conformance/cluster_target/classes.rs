//! The classes a driver's tests provision and snapshot from, as the spec file's
//! `StorageClass` and `SnapshotClass` say: `FromName` (a class with the driver as provisioner
//! and no parameters), `FromFile` (the class in that file) or `FromExistingClassName` (the
//! class already on the cluster, which must exist).

use driver_spec::{ClassSource, DriverSpec};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DynamicObject};

use super::super::setup::SetupError;
use crate::e2e::snapshots;
use crate::registry::{ClassTemplate, SnapshotClassTemplate};

/// The StorageClass of `spec` on the cluster of `client`.
pub async fn storage_class(
    client: &kube::Client,
    spec: &DriverSpec,
) -> Result<Option<ClassTemplate>, SetupError> {
    let Some(source) = &spec.storage_class else {
        return Ok(None);
    };
    let template = match source {
        ClassSource::FromName => {
            let mut class = StorageClass {
                provisioner: spec.driver_info.name.clone(),
                ..Default::default()
            };
            class.metadata.name = Some(format!("{}-sc", spec.driver_info.name));
            ClassTemplate {
                class,
                existing: None,
            }
        }
        ClassSource::FromFile(path) => {
            let class = driver_spec::read_storage_class(path)
                .map_err(|e| SetupError::Spec(e.to_string()))?;
            ClassTemplate {
                class,
                existing: None,
            }
        }
        ClassSource::FromExistingClassName(name) => {
            let classes: Api<StorageClass> = Api::all(client.clone());
            let class = classes
                .get_opt(name)
                .await
                .map_err(|e| SetupError::Cluster(format!("reading StorageClass {name}: {e}")))?
                .ok_or_else(|| {
                    SetupError::Spec(format!(
                        "StorageClass.FromExistingClassName: the cluster has no StorageClass {name}"
                    ))
                })?;
            ClassTemplate {
                class,
                existing: Some(name.clone()),
            }
        }
    };
    if template.class.provisioner != spec.driver_info.name {
        return Err(SetupError::Spec(format!(
            "the StorageClass of the spec file provisions with {}, not with the driver {}",
            template.class.provisioner, spec.driver_info.name
        )));
    }
    Ok(Some(template))
}

/// The VolumeSnapshotClass of `spec` on the cluster of `client`.
pub async fn snapshot_class(
    client: &kube::Client,
    spec: &DriverSpec,
) -> Result<Option<SnapshotClassTemplate>, SetupError> {
    let Some(source) = &spec.snapshot_class else {
        return Ok(None);
    };
    let template = match source {
        ClassSource::FromName => {
            let resource = snapshots::volume_snapshot_class_resource();
            let mut class =
                DynamicObject::new(&format!("{}-vsc", spec.driver_info.name), &resource);
            class.data = serde_json::json!({
                "driver": spec.driver_info.name,
                "deletionPolicy": "Delete",
            });
            SnapshotClassTemplate {
                class,
                existing: None,
            }
        }
        ClassSource::FromFile(path) => {
            let class = driver_spec::read_snapshot_class(path)
                .map_err(|e| SetupError::Spec(e.to_string()))?;
            SnapshotClassTemplate {
                class,
                existing: None,
            }
        }
        ClassSource::FromExistingClassName(name) => {
            let class = snapshots::volume_snapshot_classes(client)
                .get_opt(name)
                .await
                .map_err(|e| {
                    SetupError::Cluster(format!(
                        "reading VolumeSnapshotClass {name} (are the snapshot CRDs installed?): {e}"
                    ))
                })?
                .ok_or_else(|| {
                    SetupError::Spec(format!(
                        "SnapshotClass.FromExistingClassName: the cluster has no VolumeSnapshotClass {name}"
                    ))
                })?;
            SnapshotClassTemplate {
                class,
                existing: Some(name.clone()),
            }
        }
    };
    Ok(Some(template))
}

/// `template` for another driver instance: provisioned by `driver`, its secret parameters
/// pointing at `secret_namespace`/`secret_name`, never used as an existing class.
pub fn for_instance(
    template: &ClassTemplate,
    driver: &str,
    secret_namespace: &str,
    secret_name: &str,
) -> ClassTemplate {
    let mut class = template.class.clone();
    class.provisioner = driver.to_string();
    if let Some(parameters) = class.parameters.as_mut() {
        repoint_secrets(parameters, secret_namespace, secret_name);
    }
    ClassTemplate {
        class,
        existing: None,
    }
}

/// `template` for another driver instance (see [`for_instance`]).
pub fn snapshot_class_for_instance(
    template: &SnapshotClassTemplate,
    driver: &str,
    secret_namespace: &str,
    secret_name: &str,
) -> SnapshotClassTemplate {
    let mut class = template.class.clone();
    class.data["driver"] = serde_json::json!(driver);
    if let Some(parameters) = class.data["parameters"].as_object_mut() {
        for (key, value) in parameters.iter_mut() {
            if key.ends_with("-secret-namespace") {
                *value = serde_json::json!(secret_namespace);
            } else if key.ends_with("-secret-name") {
                *value = serde_json::json!(secret_name);
            }
        }
    }
    SnapshotClassTemplate {
        class,
        existing: None,
    }
}

fn repoint_secrets(
    parameters: &mut std::collections::BTreeMap<String, String>,
    namespace: &str,
    name: &str,
) {
    for (key, value) in parameters.iter_mut() {
        if key.starts_with("csi.storage.k8s.io/") && key.ends_with("-secret-namespace") {
            *value = namespace.to_string();
        } else if key.starts_with("csi.storage.k8s.io/") && key.ends_with("-secret-name") {
            *value = name.to_string();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn an_instance_class_has_its_provisioner_and_secrets() {
        let mut class = StorageClass {
            provisioner: "manila.csi.openstack.org".into(),
            parameters: Some(BTreeMap::from([
                ("type".into(), "default".into()),
                (
                    "csi.storage.k8s.io/provisioner-secret-name".into(),
                    "s".into(),
                ),
                (
                    "csi.storage.k8s.io/node-stage-secret-namespace".into(),
                    "ns".into(),
                ),
            ])),
            ..Default::default()
        };
        class.metadata.name = Some("csi-manila-default".into());
        let template = ClassTemplate {
            class,
            existing: Some("csi-manila-default".into()),
        };
        let instance = for_instance(&template, "attach.manila.csi.openstack.org", "other", "t");
        assert_eq!(instance.existing, None);
        assert_eq!(
            instance.class.provisioner,
            "attach.manila.csi.openstack.org"
        );
        let parameters = instance.class.parameters.unwrap();
        assert_eq!(parameters["type"], "default");
        assert_eq!(
            parameters["csi.storage.k8s.io/provisioner-secret-name"],
            "t"
        );
        assert_eq!(
            parameters["csi.storage.k8s.io/node-stage-secret-namespace"],
            "other"
        );
    }
}
