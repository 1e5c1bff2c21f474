//! The driver's manifests, compiled into the binary (`operators/cinder-operator/assets/`),
//! and their rendering: `${NAME}` placeholders filled from the operator's configuration and
//! the reconcile's findings (the zone decision, the driver config's hash, the log level),
//! the `managed-by` label on every object, the namespace on namespaced ones, and the
//! embedded cluster's disk root added to the node plugin with `--disk-root`.

mod templates;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use kube::api::DynamicObject;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::config::{CONFIG_DIR, DiskSource, OperatorConfig};
use templates::{Asset, CURRENT, When};

/// The label every object of the operator carries, and its value.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// See [`MANAGED_BY_LABEL`].
pub const MANAGED_BY: &str = "cinder-csi-driver-operator";
/// The controller plugin's Deployment.
pub const CONTROLLER_DEPLOYMENT: &str = "openstack-cinder-csi-controllerplugin";
/// The node plugin's DaemonSet.
pub const NODE_DAEMON_SET: &str = "openstack-cinder-csi-nodeplugin";
/// The pod-template annotation carrying [`AssetInputs::config_hash`].
pub const CONFIG_HASH_ANNOTATION: &str = "cinder.csi.openstack.org/config-hash";

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

/// What the rendered manifests depend on.
#[derive(Clone, Debug)]
pub struct AssetInputs<'a> {
    /// The operator's configuration (namespace, images, disk source, ports, names).
    pub config: &'a OperatorConfig,
    /// The klog `-v` of the driver and sidecars (2 Normal, 4 Debug, 6 Trace, 8 TraceAll).
    pub verbosity: u8,
    /// Hash of the driver Secret's data (credentials, configuration, CA): a pod-template
    /// annotation, so a change restarts the driver pods.
    pub config_hash: String,
    /// The zone decision: the driver's `--with-topology` and the provisioner's Topology gate.
    pub topology: bool,
    /// Whether the VolumeSnapshotClass CRD exists (the class is rendered only then).
    pub snapshot_crds_present: bool,
}

/// Every object of the driver, in apply order: placeholders filled, the `managed-by` label
/// on each, `metadata.namespace` set on namespaced kinds (absent on cluster-scoped ones).
pub fn render(inputs: &AssetInputs<'_>) -> Result<Vec<DynamicObject>, AssetError> {
    render_assets(CURRENT, inputs)
}

fn render_assets(
    assets: &[Asset],
    inputs: &AssetInputs<'_>,
) -> Result<Vec<DynamicObject>, AssetError> {
    let vars = variables(inputs);
    let mut objects = Vec::new();
    for asset in assets {
        if asset.when == When::SnapshotCrds && !inputs.snapshot_crds_present {
            continue;
        }
        let file = asset.file;
        let invalid = |reason: String| AssetError::Invalid {
            asset: file,
            reason,
        };
        let text = substitute(file, asset.template, &vars)?;
        for document in serde_yaml::Deserializer::from_str(&text) {
            let value =
                serde_yaml::Value::deserialize(document).map_err(|e| invalid(e.to_string()))?;
            if value.is_null() {
                continue;
            }
            let mut value: Value =
                serde_json::to_value(value).map_err(|e| invalid(e.to_string()))?;
            label(&mut value);
            place(&mut value, &inputs.config.namespace).map_err(invalid)?;
            if let DiskSource::DiskRoot(root) = &inputs.config.disk_source
                && value["kind"] == "DaemonSet"
                && value["metadata"]["name"] == NODE_DAEMON_SET
            {
                add_disk_root(&mut value, &root.display().to_string());
            }
            let object: DynamicObject =
                serde_json::from_value(value).map_err(|e| invalid(e.to_string()))?;
            if object.types.is_none() || object.metadata.name.is_none() {
                return Err(invalid(
                    "an object without apiVersion, kind or metadata.name".into(),
                ));
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
    BTreeMap::from([
        ("NAMESPACE", config.namespace.clone()),
        ("DRIVER_SECRET", config.driver_secret.clone()),
        ("CONFIG_DIR", CONFIG_DIR.to_owned()),
        ("CLUSTER_NAME", config.cluster_name.clone()),
        ("DRIVER_IMAGE", images.driver.clone()),
        ("PROVISIONER_IMAGE", images.provisioner.clone()),
        ("ATTACHER_IMAGE", images.attacher.clone()),
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
        ("CONFIG_HASH", inputs.config_hash.clone()),
        ("TOPOLOGY", inputs.topology.to_string()),
        ("VERBOSITY", inputs.verbosity.to_string()),
        (
            "DRIVER_LOG",
            kube_support::telemetry::level_for(inputs.verbosity).to_string(),
        ),
        ("DEFAULT_CLASS", config.default_storage_class.to_string()),
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

/// Puts the `managed-by` label on an object.
fn label(value: &mut Value) {
    let metadata = &mut value["metadata"];
    if !metadata["labels"].is_object() {
        metadata["labels"] = json!({});
    }
    metadata["labels"][MANAGED_BY_LABEL] = json!(MANAGED_BY);
}

/// Whether objects of `apiVersion`/`kind` are namespaced; `None` for a kind the operator does
/// not install.
pub fn namespaced(api_version: &str, kind: &str) -> Option<bool> {
    Some(match (api_version, kind) {
        ("v1", "ServiceAccount")
        | ("rbac.authorization.k8s.io/v1", "Role" | "RoleBinding")
        | ("apps/v1", "Deployment" | "DaemonSet") => true,
        ("rbac.authorization.k8s.io/v1", "ClusterRole" | "ClusterRoleBinding")
        | ("storage.k8s.io/v1", "CSIDriver" | "StorageClass")
        | ("snapshot.storage.k8s.io/v1", "VolumeSnapshotClass") => false,
        _ => return None,
    })
}

/// Sets `metadata.namespace` to `namespace` on an object of a namespaced kind and removes it
/// from a cluster-scoped one; a kind the operator does not install is an error.
fn place(value: &mut Value, namespace: &str) -> Result<(), String> {
    let api_version = value["apiVersion"].as_str().unwrap_or_default().to_owned();
    let kind = value["kind"].as_str().unwrap_or_default().to_owned();
    let Some(is_namespaced) = namespaced(&api_version, &kind) else {
        return Err(format!(
            "kind {api_version}/{kind} is not one the operator installs"
        ));
    };
    let Some(metadata) = value["metadata"].as_object_mut() else {
        return Err("an object without metadata".into());
    };
    if is_namespaced {
        metadata.insert("namespace".into(), json!(namespace));
    } else {
        metadata.remove("namespace");
    }
    Ok(())
}

/// Mounts `root` read-only at the same path into the node plugin's driver container: the
/// embedded cluster's per-node disk directories live below it.
fn add_disk_root(daemon_set: &mut Value, root: &str) {
    let spec = &mut daemon_set["spec"]["template"]["spec"];
    if let Some(volumes) = spec["volumes"].as_array_mut() {
        volumes.push(json!({
            "name": "disk-root",
            "hostPath": { "path": root, "type": "Directory" },
        }));
    }
    if let Some(containers) = spec["containers"].as_array_mut() {
        for container in containers.iter_mut().filter(|c| c["name"] == "csi-driver") {
            if let Some(mounts) = container["volumeMounts"].as_array_mut() {
                mounts.push(json!({ "name": "disk-root", "mountPath": root, "readOnly": true }));
            }
        }
    }
}
