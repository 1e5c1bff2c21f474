//! The driver's manifests, compiled into the binary (`operators/manila-operator/assets/`), and
//! their rendering ([`operator_kit::templates`]): `${NAME}` placeholders filled from the
//! operator's configuration, the `managed-by` label on every object, the namespace on
//! namespaced ones, and the NFS export directory added when the NFS plugin binds local
//! exports.
//!
//! One asset set per release ([`Release`]; `assets/current/` and `assets/previous/`, listed
//! in `templates`): the upgrade suite installs the previous release's objects, which the
//! current release then adopts and migrates. Placeholders, labels, namespaces and the export
//! root are release-independent.

mod liveness;
#[cfg(test)]
mod operator_rbac;
mod settings;
mod templates;

use std::collections::BTreeMap;

use kube::api::DynamicObject;
use operator_kit::api::LogLevel;
use operator_kit::templates::{Placement, TemplateError, render as render_template};
use serde_json::{Value, json};

use crate::config::{NfsMounter, OperatorConfig};
use crate::driver_config::DriverSettings;
use crate::identity::IDENTITY;
use crate::release::{PREVIOUS_CA_DIR, PREVIOUS_CA_FILE_NAME, Release};
use templates::templates;

pub use settings::RUNTIME_CONFIG_HASH_ANNOTATION;

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
    /// `spec.driverConfig.manila`'s settings, checked.
    pub settings: DriverSettings,
}

/// When a template is part of the installation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum When {
    /// Always.
    Always,
    /// Only when the snapshot CRDs exist.
    SnapshotCrds,
}

/// One template file of an asset set.
#[derive(Debug)]
struct Asset {
    /// `<release dir>/<file name>` under `assets/`, named in errors.
    file: &'static str,
    /// Its text, with `${NAME}` placeholders.
    template: &'static str,
    /// When it is rendered.
    when: When,
}

/// The NFS node plugin's DaemonSet, which gets the export directory with a local mounter.
pub const NFS_DAEMON_SET: &str = "csi-nodeplugin-nfsplugin";
/// The Manila node plugin's DaemonSet.
pub const NODE_DAEMON_SET: &str = "openstack-manila-csi-nodeplugin";
/// The controller plugin's Deployment.
pub const CONTROLLER_DEPLOYMENT: &str = "openstack-manila-csi-controllerplugin";
/// The pod-template annotation carrying [`AssetInputs::credentials_hash`].
pub const CREDENTIALS_HASH_ANNOTATION: &str = "manila.csi.openstack.org/credentials-hash";

/// Every object of the driver for the configured release ([`OperatorConfig::release`]), in
/// apply order.
pub fn render(inputs: &AssetInputs<'_>) -> Result<Vec<DynamicObject>, TemplateError> {
    render_release(inputs.config.release, inputs)
}

/// Every object of `release`, in apply order: placeholders filled, the `managed-by` label on
/// each, `metadata.namespace` set to the operator's namespace on namespaced kinds (and absent
/// on cluster-scoped ones), the export root added to the NFS plugin with a local mounter,
/// and the driver settings applied (the runtime configuration's ConfigMap first, so that it
/// exists before the pods that mount it).
pub fn render_release(
    release: Release,
    inputs: &AssetInputs<'_>,
) -> Result<Vec<DynamicObject>, TemplateError> {
    let vars = variables(inputs);
    let placement = Placement {
        identity: &IDENTITY,
        namespace: &inputs.config.namespace,
    };
    let mut objects = settings::runtime_config_map(&inputs.settings, &vars, placement)?;
    for asset in templates(release) {
        if asset.when == When::SnapshotCrds && !inputs.snapshot_crds_present {
            continue;
        }
        objects.extend(render_template(
            asset.file,
            asset.template,
            &vars,
            placement,
            |value| {
                if let NfsMounter::Local { export_root } = &inputs.config.nfs_mounter
                    && is_named(value, "DaemonSet", NFS_DAEMON_SET)
                {
                    add_export_root(value, &export_root.display().to_string());
                }
                settings::apply(value, &inputs.settings);
                liveness::add(value, inputs.config, inputs.log_level.verbosity());
            },
        )?);
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
            kube_support::telemetry::level_for(verbosity).to_string(),
        ),
        ("NFS_MOUNTER", mounter.to_string()),
        ("PDB_API_VERSION", config.pdb_api_version.to_string()),
        // The previous release mounts the CA ConfigMap into the driver's pods.
        ("CA_CONFIG_MAP", config.ca_config_map.clone()),
        ("CA_BUNDLE_KEY", config.ca_bundle_key.clone()),
        ("CA_MOUNT_DIR", PREVIOUS_CA_DIR.to_string()),
        ("CA_FILE_NAME", PREVIOUS_CA_FILE_NAME.to_string()),
    ])
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
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::path::PathBuf;

    use operator_kit::api::MANAGED_BY_LABEL;
    use operator_kit::kinds::api_resource;
    use operator_kit::templates::substitute;

    use super::*;

    fn inputs(config: &OperatorConfig) -> AssetInputs<'_> {
        AssetInputs {
            config,
            log_level: LogLevel::Debug,
            credentials_hash: "0123456789abcdef".into(),
            snapshot_crds_present: true,
            settings: DriverSettings::default(),
        }
    }

    fn local(config: &mut OperatorConfig) {
        config.nfs_mounter = NfsMounter::Local {
            export_root: PathBuf::from("/srv/exports"),
        };
    }

    fn kind(object: &DynamicObject) -> &str {
        &object.types.as_ref().unwrap().kind
    }

    fn names(objects: &[DynamicObject]) -> Vec<String> {
        objects
            .iter()
            .map(|o| format!("{} {}", kind(o), o.metadata.name.as_deref().unwrap()))
            .collect()
    }

    fn workloads(objects: &[DynamicObject]) -> Vec<&DynamicObject> {
        objects
            .iter()
            .filter(|o| matches!(kind(o), "Deployment" | "DaemonSet"))
            .collect()
    }

    /// The workload (Deployment or DaemonSet) or snapshot class called `name`.
    fn named<'a>(objects: &'a [DynamicObject], name: &str) -> &'a DynamicObject {
        objects
            .iter()
            .find(|o| {
                matches!(kind(o), "Deployment" | "DaemonSet" | "VolumeSnapshotClass")
                    && o.metadata.name.as_deref() == Some(name)
            })
            .unwrap()
    }

    fn args(container: &Value) -> Vec<&str> {
        container["args"]
            .as_array()
            .map(|a| a.iter().map(|v| v.as_str().unwrap()).collect())
            .unwrap_or_default()
    }

    #[test]
    fn the_current_release_renders_every_object_in_apply_order() {
        let config = OperatorConfig::new("manila-csi");
        let objects = render(&inputs(&config)).unwrap();
        assert_eq!(
            names(&objects),
            [
                "ServiceAccount openstack-manila-csi-controllerplugin",
                "ClusterRole openstack-manila-csi-provisioner",
                "ClusterRoleBinding openstack-manila-csi-provisioner",
                "ClusterRole openstack-manila-csi-resizer",
                "ClusterRoleBinding openstack-manila-csi-resizer",
                "ClusterRole openstack-manila-csi-snapshotter",
                "ClusterRoleBinding openstack-manila-csi-snapshotter",
                "Role openstack-manila-csi-controllerplugin",
                "RoleBinding openstack-manila-csi-controllerplugin",
                "ServiceAccount openstack-manila-csi-nodeplugin",
                "CSIDriver manila.csi.openstack.org",
                "DaemonSet csi-nodeplugin-nfsplugin",
                "DaemonSet openstack-manila-csi-nodeplugin",
                "Deployment openstack-manila-csi-controllerplugin",
                "PodDisruptionBudget openstack-manila-csi-controllerplugin",
                "VolumeSnapshotClass csi-manila-snapclass",
            ]
        );
    }

    #[test]
    fn the_rendered_installation_is_stable() {
        let mut config = OperatorConfig::new("manila-csi");
        local(&mut config);
        config.controller_health_port = 39808;
        let objects = render(&inputs(&config)).unwrap();
        insta::assert_yaml_snapshot!(objects);
    }

    #[test]
    fn the_rendered_installation_with_every_setting_is_stable() {
        let mut config = OperatorConfig::new("manila-csi");
        local(&mut config);
        config.controller_health_port = 39808;
        config.node_health_port = Some(39809);
        config.nfs_node_health_port = Some(39810);
        let inputs = AssetInputs {
            settings: DriverSettings {
                topology: true,
                nfs_share_client: Some("10.0.0.0/8".into()),
                match_export_location_address: Some("10.0.0.0/24".into()),
            },
            ..inputs(&config)
        };
        insta::assert_yaml_snapshot!(render(&inputs).unwrap());
    }

    #[test]
    fn every_object_is_labelled_and_namespaced_as_its_kind_is() {
        let config = OperatorConfig::new("driver-ns");
        for object in render(&inputs(&config)).unwrap() {
            let what = names(std::slice::from_ref(&object)).join("");
            assert_eq!(
                object
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(MANAGED_BY_LABEL))
                    .map(String::as_str),
                Some(IDENTITY.managed_by),
                "{what}"
            );
            let types = object.types.as_ref().unwrap();
            let (_, namespaced) = api_resource(&types.api_version, &types.kind).unwrap();
            let expected = namespaced.then_some("driver-ns");
            assert_eq!(object.metadata.namespace.as_deref(), expected, "{what}");
            // RBAC subjects name the driver's namespace too.
            for subject in object.data["subjects"].as_array().into_iter().flatten() {
                assert_eq!(subject["namespace"], "driver-ns", "{what}");
            }
        }
    }

    #[rstest::rstest]
    #[case::normal(LogLevel::Normal, 2, "info")]
    #[case::debug(LogLevel::Debug, 4, "debug")]
    #[case::trace(LogLevel::Trace, 6, "trace")]
    #[case::trace_all(LogLevel::TraceAll, 8, "trace")]
    fn every_container_logs_at_the_level_and_every_pod_carries_the_hash(
        #[case] level: LogLevel,
        #[case] verbosity: u8,
        #[case] rust_log: &str,
    ) {
        let mut config = OperatorConfig::new("manila-csi");
        // With the node plugins' liveness sidecars.
        config.node_health_port = Some(39809);
        config.nfs_node_health_port = Some(39810);
        let inputs = AssetInputs {
            log_level: level,
            ..inputs(&config)
        };
        let objects = render(&inputs).unwrap();
        let workloads = workloads(&objects);
        assert_eq!(workloads.len(), 3);
        for workload in workloads {
            let name = workload.metadata.name.as_deref().unwrap();
            let template = &workload.data["spec"]["template"];
            assert_eq!(
                template["metadata"]["annotations"][CREDENTIALS_HASH_ANNOTATION],
                "0123456789abcdef",
                "{name}"
            );
            for container in template["spec"]["containers"].as_array().unwrap() {
                let container_name = container["name"].as_str().unwrap();
                assert!(
                    container.get("command").is_none(),
                    "{name}/{container_name}"
                );
                let flag = format!("--v={verbosity}");
                let by_flag = args(container).contains(&flag.as_str());
                let by_env = container["env"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|e| e["name"] == "RUST_LOG" && e["value"] == rust_log);
                assert!(
                    by_flag != by_env,
                    "{name}/{container_name}: exactly one of {flag} and RUST_LOG={rust_log}"
                );
            }
        }
    }

    #[test]
    fn images_come_from_the_configuration() {
        let mut config = OperatorConfig::new("manila-csi");
        config.images = crate::config::Images {
            driver: "d:1".into(),
            nfs_driver: "n:1".into(),
            provisioner: "p:1".into(),
            attacher: "a:1".into(),
            resizer: "r:1".into(),
            snapshotter: "s:1".into(),
            node_driver_registrar: "ndr:1".into(),
            liveness_probe: "l:1".into(),
        };
        let objects = render(&inputs(&config)).unwrap();
        let images = |name: &str| -> Vec<String> {
            named(&objects, name).data["spec"]["template"]["spec"]["containers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["image"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(
            images(CONTROLLER_DEPLOYMENT),
            ["d:1", "p:1", "s:1", "r:1", "l:1"]
        );
        assert_eq!(images(NODE_DAEMON_SET), ["d:1", "ndr:1"]);
        assert_eq!(images(NFS_DAEMON_SET), ["n:1"]);
    }

    #[test]
    fn the_node_plugin_reaches_the_nfs_plugin_socket_in_the_shared_host_directory() {
        let config = OperatorConfig::new("manila-csi");
        let objects = render(&inputs(&config)).unwrap();
        let host_path = |name: &str, volume: &str| -> String {
            named(&objects, name).data["spec"]["template"]["spec"]["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|v| v["name"] == volume)
                .map(|v| v["hostPath"]["path"].as_str().unwrap().to_string())
                .unwrap()
        };
        let env = |name: &str, var: &str| -> String {
            named(&objects, name).data["spec"]["template"]["spec"]["containers"][0]["env"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["name"] == var)
                .map(|e| e["value"].as_str().unwrap().to_string())
                .unwrap()
        };
        let dir = "/var/lib/kubelet/plugins/csi-nfsplugin";
        assert_eq!(host_path(NFS_DAEMON_SET, "plugin-dir"), dir);
        assert_eq!(host_path(NODE_DAEMON_SET, "fwd-plugin-dir"), dir);
        assert_eq!(
            env(NFS_DAEMON_SET, "CSI_ENDPOINT"),
            format!("unix://{dir}/csi.sock")
        );
        assert_eq!(
            env(NODE_DAEMON_SET, "FWD_CSI_ENDPOINT"),
            format!("unix://{dir}/csi.sock")
        );
        let node = &named(&objects, NODE_DAEMON_SET).data["spec"]["template"]["spec"];
        let driver_args = args(&node["containers"][0]);
        assert!(driver_args.contains(&"--provide-controller-service=false"));
        assert!(driver_args.contains(&"--fwdendpoint=$(FWD_CSI_ENDPOINT)"));
        assert!(!driver_args.iter().any(|a| a.starts_with("--nodeaz")));
        let controller = &named(&objects, CONTROLLER_DEPLOYMENT).data["spec"];
        assert_eq!(controller["replicas"], 2, "highly available");
        let controller_args = args(&controller["template"]["spec"]["containers"][0]);
        assert!(controller_args.contains(&"--provide-node-service=false"));
    }

    #[test]
    fn the_kernel_mounter_mounts_nfs_without_an_export_root() {
        let config = OperatorConfig::new("manila-csi");
        let objects = render(&inputs(&config)).unwrap();
        let nfs = &named(&objects, NFS_DAEMON_SET).data;
        assert!(
            args(&nfs["spec"]["template"]["spec"]["containers"][0]).contains(&"--mounter=kernel")
        );
        assert!(!serde_json::to_string(nfs).unwrap().contains("export-root"));
    }

    #[test]
    fn a_local_mounter_mounts_the_export_root_into_the_nfs_plugin_at_the_same_path() {
        let mut config = OperatorConfig::new("manila-csi");
        local(&mut config);
        let objects = render(&inputs(&config)).unwrap();
        let spec = &named(&objects, NFS_DAEMON_SET).data["spec"]["template"]["spec"];
        let container = &spec["containers"][0];
        assert!(args(container).contains(&"--mounter=local"));
        assert!(
            container["volumeMounts"]
                .as_array()
                .unwrap()
                .contains(&json!({"name": "export-root", "mountPath": "/srv/exports"}))
        );
        assert!(spec["volumes"].as_array().unwrap().contains(&json!({
            "name": "export-root",
            "hostPath": {"path": "/srv/exports", "type": "Directory"},
        })));
        // Only the NFS plugin binds exports.
        let others = serde_json::to_string(&named(&objects, NODE_DAEMON_SET).data).unwrap();
        assert!(!others.contains("/srv/exports"));
    }

    #[test]
    fn without_snapshot_crds_there_is_no_snapshot_class() {
        let config = OperatorConfig::new("manila-csi");
        let inputs = AssetInputs {
            snapshot_crds_present: false,
            ..inputs(&config)
        };
        let objects = render(&inputs).unwrap();
        assert!(!objects.iter().any(|o| kind(o) == "VolumeSnapshotClass"));
    }

    #[test]
    fn the_snapshot_class_names_the_driver_secret() {
        let mut config = OperatorConfig::new("manila-csi");
        config.driver_secret = "my-secret".into();
        let objects = render(&inputs(&config)).unwrap();
        let class = named(&objects, "csi-manila-snapclass");
        assert_eq!(
            class.data["parameters"],
            json!({
                "csi.storage.k8s.io/snapshotter-secret-name": "my-secret",
                "csi.storage.k8s.io/snapshotter-secret-namespace": "manila-csi",
            })
        );
    }

    #[test]
    fn every_placeholder_of_every_template_has_a_value() {
        let config = OperatorConfig::new("manila-csi");
        let vars = variables(&inputs(&config));
        for release in Release::ALL {
            for asset in templates(release) {
                let text = substitute(asset.file, asset.template, &vars).unwrap();
                assert!(!text.contains("${"), "{}", asset.file);
            }
        }
    }
}
