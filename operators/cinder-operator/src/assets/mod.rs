//! The driver's manifests, compiled into the binary (`operators/cinder-operator/assets/`),
//! and their rendering ([`operator_kit::templates`]): `${NAME}` placeholders filled from the
//! operator's configuration and the reconcile's findings (the zone decision, the driver
//! config's hash, the log level), the `managed-by` label on every object, the namespace on
//! namespaced ones, and the embedded cluster's disk root added to the node plugin with
//! `--disk-root`.

#[cfg(test)]
mod operator_rbac;
#[cfg(test)]
mod release_tests;
mod templates;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use kube::api::DynamicObject;
use operator_kit::templates::{Placement, TemplateError, render as render_template};
use serde_json::{Value, json};

use crate::config::{CONFIG_DIR, DiskSource, OperatorConfig};
use crate::identity::IDENTITY;
use templates::{Asset, When, templates};

/// The controller plugin's Deployment.
pub const CONTROLLER_DEPLOYMENT: &str = "openstack-cinder-csi-controllerplugin";
/// The node plugin's DaemonSet.
pub const NODE_DAEMON_SET: &str = "openstack-cinder-csi-nodeplugin";
/// The pod-template annotation carrying [`AssetInputs::config_hash`].
pub const CONFIG_HASH_ANNOTATION: &str = "cinder.csi.openstack.org/config-hash";

/// The kinds the operator prunes (`operator_kit::prune`, workloads first): all it applies
/// but the VolumeSnapshotClass and the StorageClass, which snapshots and volumes refer to.
pub const PRUNED_KINDS: &[&str] = &[
    "Deployment",
    "DaemonSet",
    "CSIDriver",
    "RoleBinding",
    "Role",
    "ClusterRoleBinding",
    "ClusterRole",
    "ServiceAccount",
    "Secret",
];

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

/// Every object of the driver in the configured release's layout
/// ([`OperatorConfig::release`]), in apply order: placeholders filled, the `managed-by` label
/// on each, `metadata.namespace` set on namespaced kinds (absent on cluster-scoped ones).
pub fn render(inputs: &AssetInputs<'_>) -> Result<Vec<DynamicObject>, TemplateError> {
    render_assets(templates(inputs.config.release), inputs)
}

fn render_assets(
    assets: &[Asset],
    inputs: &AssetInputs<'_>,
) -> Result<Vec<DynamicObject>, TemplateError> {
    let vars = variables(inputs);
    let placement = Placement {
        identity: &IDENTITY,
        namespace: &inputs.config.namespace,
    };
    let disk_root = match &inputs.config.disk_source {
        DiskSource::DiskRoot(root) => Some(root.display().to_string()),
        DiskSource::HostDev => None,
    };
    let mut objects = Vec::new();
    for asset in assets {
        if asset.when == When::SnapshotCrds && !inputs.snapshot_crds_present {
            continue;
        }
        objects.extend(render_template(
            asset.file,
            asset.template,
            &vars,
            placement,
            |value| {
                if let Some(root) = &disk_root
                    && value["kind"] == "DaemonSet"
                    && value["metadata"]["name"] == NODE_DAEMON_SET
                {
                    add_disk_root(value, root);
                }
            },
        )?);
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
