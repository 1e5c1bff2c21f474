//! The driver's manifests, compiled into the binary (`operators/manila-operator/assets/`), and
//! their rendering: `${NAME}` placeholders filled from the operator's configuration, the
//! `managed-by` label on every object, the namespace on namespaced ones, and the NFS export
//! directory added when the NFS plugin binds local exports.
//!
//! One asset set per release ([`Release`]): the upgrade suite needs the previous release's
//! objects as well as the current ones.

use std::collections::BTreeMap;

use kube::api::DynamicObject;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::api::LogLevel;
use crate::config::{NfsMounter, OperatorConfig};
use crate::controller::{MANAGED_BY, MANAGED_BY_LABEL};

/// A manifest could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum AssetError {
    /// A template names a placeholder the operator has no value for.
    #[error("asset {asset}: unknown placeholder ${{{name}}}")]
    UnknownPlaceholder {
        /// The template's file name.
        asset: &'static str,
        /// The placeholder.
        name: String,
    },
    /// A template is not valid YAML for a Kubernetes object.
    #[error("asset {asset}: {reason}")]
    Invalid {
        /// The template's file name.
        asset: &'static str,
        /// What is wrong.
        reason: String,
    },
}

/// Which release's objects to render.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Release {
    /// This operator's release.
    #[default]
    Current,
}

/// What the rendered manifests depend on.
#[derive(Clone, Debug)]
pub struct AssetInputs<'a> {
    /// The operator's configuration (namespace, images, mounter, ports, driver Secret name).
    pub config: &'a OperatorConfig,
    /// The driver's and sidecars' verbosity.
    pub log_level: LogLevel,
    /// Hash of the driver Secret's data (pod-template annotation: rotation restarts pods).
    pub credentials_hash: String,
    /// Whether the VolumeSnapshotClass CRD exists (the class is rendered only then).
    pub snapshot_crds_present: bool,
}

/// The templates of the current release, in apply order: identities and RBAC first, then the
/// driver object, the workloads, and the snapshot class.
const CURRENT: &[(&str, &str)] = &[
    (
        "controller-rbac.yaml",
        include_str!("../../assets/current/controller-rbac.yaml"),
    ),
    (
        "node-rbac.yaml",
        include_str!("../../assets/current/node-rbac.yaml"),
    ),
    (
        "csidriver.yaml",
        include_str!("../../assets/current/csidriver.yaml"),
    ),
    (
        "nfs-node.yaml",
        include_str!("../../assets/current/nfs-node.yaml"),
    ),
    ("node.yaml", include_str!("../../assets/current/node.yaml")),
    (
        "controller.yaml",
        include_str!("../../assets/current/controller.yaml"),
    ),
    (
        "snapshotclass.yaml",
        include_str!("../../assets/current/snapshotclass.yaml"),
    ),
];

/// The NFS node plugin's DaemonSet, which gets the export directory with a local mounter.
const NFS_DAEMON_SET: &str = "csi-nodeplugin-nfsplugin";

/// Every object of the driver, in apply order.
pub fn render(inputs: &AssetInputs<'_>) -> Result<Vec<DynamicObject>, AssetError> {
    render_release(Release::Current, inputs)
}

/// Every object of `release`, in apply order.
pub fn render_release(
    release: Release,
    inputs: &AssetInputs<'_>,
) -> Result<Vec<DynamicObject>, AssetError> {
    let templates = match release {
        Release::Current => CURRENT,
    };
    let vars = variables(inputs);
    let mut objects = Vec::new();
    for (asset, template) in templates {
        if *asset == "snapshotclass.yaml" && !inputs.snapshot_crds_present {
            continue;
        }
        let text = substitute(asset, template, &vars)?;
        for document in serde_yaml::Deserializer::from_str(&text) {
            let value =
                serde_yaml::Value::deserialize(document).map_err(|e| AssetError::Invalid {
                    asset,
                    reason: e.to_string(),
                })?;
            if value.is_null() {
                continue;
            }
            let mut value: Value =
                serde_json::to_value(value).map_err(|e| AssetError::Invalid {
                    asset,
                    reason: e.to_string(),
                })?;
            label(&mut value);
            if let NfsMounter::Local { export_root } = &inputs.config.nfs_mounter
                && is_named(&value, "DaemonSet", NFS_DAEMON_SET)
            {
                add_export_root(&mut value, &export_root.display().to_string());
            }
            let object: DynamicObject =
                serde_json::from_value(value).map_err(|e| AssetError::Invalid {
                    asset,
                    reason: e.to_string(),
                })?;
            if object.types.is_none() || object.metadata.name.is_none() {
                return Err(AssetError::Invalid {
                    asset,
                    reason: "an object without apiVersion, kind or metadata.name".into(),
                });
            }
            objects.push(object);
        }
    }
    Ok(objects)
}

/// The placeholder values for `inputs`.
fn variables(inputs: &AssetInputs<'_>) -> BTreeMap<&'static str, String> {
    let config = inputs.config;
    let images = &config.images;
    let verbosity = inputs.log_level.verbosity();
    let mounter = match config.nfs_mounter {
        NfsMounter::Kernel => "kernel",
        NfsMounter::Local { .. } => "local",
    };
    BTreeMap::from([
        ("NAMESPACE", config.namespace.clone()),
        ("DRIVER_SECRET", config.driver_secret.clone()),
        ("DRIVER_IMAGE", images.driver.clone()),
        ("NFS_DRIVER_IMAGE", images.nfs_driver.clone()),
        ("PROVISIONER_IMAGE", images.provisioner.clone()),
        ("RESIZER_IMAGE", images.resizer.clone()),
        ("SNAPSHOTTER_IMAGE", images.snapshotter.clone()),
        (
            "NODE_DRIVER_REGISTRAR_IMAGE",
            images.node_driver_registrar.clone(),
        ),
        ("LIVENESS_PROBE_IMAGE", images.liveness_probe.clone()),
        (
            "CONTROLLER_HEALTH_PORT",
            config.controller_health_port.to_string(),
        ),
        ("CREDENTIALS_HASH", inputs.credentials_hash.clone()),
        ("VERBOSITY", verbosity.to_string()),
        (
            "DRIVER_LOG",
            sidecar_common::telemetry::level_for(verbosity).to_string(),
        ),
        ("NFS_MOUNTER", mounter.to_string()),
    ])
}

/// Replaces every `${NAME}` of `template`; `$(NAME)` (Kubernetes' own expansion) stays.
fn substitute(
    asset: &'static str,
    template: &str,
    vars: &BTreeMap<&'static str, String>,
) -> Result<String, AssetError> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(AssetError::Invalid {
                asset,
                reason: "an unterminated ${ placeholder".into(),
            });
        };
        let name = &after[..end];
        let value = vars
            .get(name)
            .ok_or_else(|| AssetError::UnknownPlaceholder {
                asset,
                name: name.to_string(),
            })?;
        out.push_str(value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn label(value: &mut Value) {
    let metadata = &mut value["metadata"];
    if !metadata["labels"].is_object() {
        metadata["labels"] = json!({});
    }
    metadata["labels"][MANAGED_BY_LABEL] = json!(MANAGED_BY);
}

fn is_named(value: &Value, kind: &str, name: &str) -> bool {
    value["kind"] == kind && value["metadata"]["name"] == name
}

/// Mounts `root` at the same path into the NFS plugin, so that an export location
/// `127.0.0.1:<root>/shares/<id>` is a directory the local mounter can bind.
fn add_export_root(daemon_set: &mut Value, root: &str) {
    let spec = &mut daemon_set["spec"]["template"]["spec"];
    if let Some(volumes) = spec["volumes"].as_array_mut() {
        volumes.push(json!({
            "name": "export-root",
            "hostPath": { "path": root, "type": "Directory" },
        }));
    }
    if let Some(containers) = spec["containers"].as_array_mut() {
        for container in containers {
            if let Some(mounts) = container["volumeMounts"].as_array_mut() {
                mounts.push(json!({ "name": "export-root", "mountPath": root }));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::path::PathBuf;

    use super::*;

    fn inputs(config: &OperatorConfig) -> AssetInputs<'_> {
        AssetInputs {
            config,
            log_level: LogLevel::Debug,
            credentials_hash: "0123456789abcdef".into(),
            snapshot_crds_present: true,
        }
    }

    fn names(objects: &[DynamicObject]) -> Vec<String> {
        objects
            .iter()
            .map(|o| {
                format!(
                    "{} {}",
                    o.types.as_ref().unwrap().kind,
                    o.metadata.name.as_deref().unwrap()
                )
            })
            .collect()
    }

    #[test]
    fn the_current_release_renders_every_object_labelled_in_order() {
        let config = OperatorConfig::new("manila-csi");
        let objects = render(&inputs(&config)).unwrap();
        insta::assert_yaml_snapshot!(names(&objects));
        for object in &objects {
            assert_eq!(
                object
                    .metadata
                    .labels
                    .as_ref()
                    .unwrap()
                    .get(MANAGED_BY_LABEL)
                    .map(String::as_str),
                Some(MANAGED_BY),
                "{:?}",
                object.metadata.name
            );
        }
    }

    #[test]
    fn workloads_carry_the_hash_the_log_level_and_no_placeholder() {
        let config = OperatorConfig::new("manila-csi");
        let objects = render(&inputs(&config)).unwrap();
        let text = serde_yaml::to_string(&objects).unwrap();
        assert!(!text.contains("${"), "{text}");
        let workloads: Vec<_> = objects
            .iter()
            .filter(|o| {
                let kind = &o.types.as_ref().unwrap().kind;
                kind == "Deployment" || kind == "DaemonSet"
            })
            .collect();
        assert_eq!(workloads.len(), 3);
        for workload in workloads {
            let template = &workload.data["spec"]["template"];
            let yaml = serde_yaml::to_string(template).unwrap();
            assert!(yaml.contains("debug") || yaml.contains("--v=4"), "{yaml}");
            if workload.metadata.name.as_deref() != Some(NFS_DAEMON_SET) {
                assert_eq!(
                    template["metadata"]["annotations"]["manila.csi.openstack.org/credentials-hash"],
                    "0123456789abcdef"
                );
            }
        }
    }

    #[test]
    fn a_local_mounter_mounts_the_export_root_into_the_nfs_plugin() {
        let mut config = OperatorConfig::new("manila-csi");
        config.nfs_mounter = NfsMounter::Local {
            export_root: PathBuf::from("/srv/exports"),
        };
        let objects = render(&inputs(&config)).unwrap();
        let nfs = objects
            .iter()
            .find(|o| o.metadata.name.as_deref() == Some(NFS_DAEMON_SET))
            .unwrap();
        let yaml = serde_yaml::to_string(&nfs.data).unwrap();
        assert!(yaml.contains("--mounter=local"), "{yaml}");
        assert!(yaml.contains("mountPath: /srv/exports"), "{yaml}");
        assert!(yaml.contains("path: /srv/exports"), "{yaml}");
    }

    #[test]
    fn without_snapshot_crds_there_is_no_snapshot_class() {
        let config = OperatorConfig::new("manila-csi");
        let mut inputs = inputs(&config);
        inputs.snapshot_crds_present = false;
        let objects = render(&inputs).unwrap();
        assert!(
            !names(&objects)
                .iter()
                .any(|n| n.starts_with("VolumeSnapshotClass"))
        );
    }

    #[test]
    fn an_unknown_placeholder_names_asset_and_placeholder() {
        let error = substitute("x.yaml", "a: ${NOPE}", &BTreeMap::new()).unwrap_err();
        assert_eq!(
            error.to_string(),
            "asset x.yaml: unknown placeholder ${NOPE}"
        );
        let kept = substitute("x.yaml", "a: $(NODE_ID)", &BTreeMap::new()).unwrap();
        assert_eq!(kept, "a: $(NODE_ID)");
    }
}
