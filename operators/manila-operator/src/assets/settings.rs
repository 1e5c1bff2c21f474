//! What `spec.driverConfig.manila` changes in the rendered objects ([`DriverSettings`]),
//! the same in every release (they are settings, not part of an asset set): topology
//! (`--with-topology` on the csi-driver containers of the controller and the Manila node
//! plugin, the provisioner's `Topology` feature gate) and the runtime configuration file
//! (its ConfigMap, mounted into both csi-driver containers, `--runtime-config-file`, and its
//! hash on the pod templates). Unset settings change nothing.

use std::collections::BTreeMap;

use kube::api::DynamicObject;
use operator_kit::templates::{Placement, TemplateError, data_hash, render};
use serde_json::{Value, json};

use super::{CONTROLLER_DEPLOYMENT, NODE_DAEMON_SET, is_named};
use crate::driver_config::{
    DriverSettings, RUNTIME_CONFIG_DIR, RUNTIME_CONFIG_KEY, RUNTIME_CONFIG_MAP,
};

/// The pod-template annotation with the hash of the runtime configuration file.
pub const RUNTIME_CONFIG_HASH_ANNOTATION: &str = "manila.csi.openstack.org/runtime-config-hash";
/// The driver container of the controller and the Manila node plugin.
const DRIVER_CONTAINER: &str = "csi-driver";
/// The provisioner container of the controller.
const PROVISIONER_CONTAINER: &str = "csi-provisioner";
/// The pod volume of the runtime configuration.
const RUNTIME_CONFIG_VOLUME: &str = "runtime-config";

const RUNTIME_CONFIG_TEMPLATE: &str = include_str!("../../assets/runtime-config.yaml");

/// The runtime configuration's ConfigMap, when the settings have a runtime configuration.
pub(super) fn runtime_config_map(
    settings: &DriverSettings,
    vars: &BTreeMap<&'static str, String>,
    placement: Placement<'_>,
) -> Result<Vec<DynamicObject>, TemplateError> {
    let Some(text) = settings.runtime_config() else {
        return Ok(Vec::new());
    };
    render(
        "runtime-config.yaml",
        RUNTIME_CONFIG_TEMPLATE,
        vars,
        placement,
        |value| value["data"] = json!({ RUNTIME_CONFIG_KEY: text }),
    )
}

/// Applies `settings` to one rendered object (the controller Deployment and the Manila node
/// DaemonSet; anything else is left as it is).
pub(super) fn apply(value: &mut Value, settings: &DriverSettings) {
    let controller = is_named(value, "Deployment", CONTROLLER_DEPLOYMENT);
    if !controller && !is_named(value, "DaemonSet", NODE_DAEMON_SET) {
        return;
    }
    let runtime_config = settings.runtime_config();
    let template = &mut value["spec"]["template"];
    if let Some(text) = &runtime_config {
        let hash = data_hash(&BTreeMap::from([(
            RUNTIME_CONFIG_KEY.to_string(),
            text.clone(),
        )]));
        template["metadata"]["annotations"][RUNTIME_CONFIG_HASH_ANNOTATION] = json!(hash);
        if let Some(volumes) = template["spec"]["volumes"].as_array_mut() {
            volumes.push(json!({
                "name": RUNTIME_CONFIG_VOLUME,
                "configMap": { "name": RUNTIME_CONFIG_MAP },
            }));
        }
    }
    let Some(containers) = template["spec"]["containers"].as_array_mut() else {
        return;
    };
    for container in containers {
        let name = container["name"].as_str().unwrap_or_default().to_string();
        if name == DRIVER_CONTAINER {
            if settings.topology {
                push_arg(container, "--with-topology".into());
            }
            if runtime_config.is_some() {
                push_arg(
                    container,
                    format!("--runtime-config-file={RUNTIME_CONFIG_DIR}/{RUNTIME_CONFIG_KEY}"),
                );
                if let Some(mounts) = container["volumeMounts"].as_array_mut() {
                    mounts.push(json!({
                        "name": RUNTIME_CONFIG_VOLUME,
                        "mountPath": RUNTIME_CONFIG_DIR,
                        "readOnly": true,
                    }));
                }
            }
        } else if name == PROVISIONER_CONTAINER && controller && settings.topology {
            // Without the gate the provisioner sends no accessibility requirements, and
            // autoTopology has no zone to pick.
            push_arg(container, "--feature-gates=Topology=true".into());
        }
    }
}

fn push_arg(container: &mut Value, arg: String) {
    if let Some(args) = container["args"].as_array_mut() {
        args.push(json!(arg));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use operator_kit::api::{LogLevel, MANAGED_BY_LABEL};

    use super::super::{AssetInputs, NFS_DAEMON_SET, render_release};
    use super::*;
    use crate::config::OperatorConfig;
    use crate::identity::IDENTITY;
    use crate::release::Release;

    fn render_with(release: Release, settings: DriverSettings) -> Vec<DynamicObject> {
        let config = OperatorConfig::new("manila-csi");
        render_release(
            release,
            &AssetInputs {
                config: &config,
                log_level: LogLevel::Normal,
                credentials_hash: "0123456789abcdef".into(),
                snapshot_crds_present: true,
                settings,
            },
        )
        .unwrap()
    }

    fn workload<'a>(objects: &'a [DynamicObject], kind: &str, name: &str) -> &'a Value {
        &objects
            .iter()
            .find(|o| {
                o.types.as_ref().unwrap().kind == kind && o.metadata.name.as_deref() == Some(name)
            })
            .unwrap()
            .data
    }

    fn container<'a>(workload: &'a Value, name: &str) -> &'a Value {
        workload["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap()
    }

    fn args(container: &Value) -> Vec<&str> {
        container["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect()
    }

    fn matching(objects: &[DynamicObject], text: &str) -> Vec<String> {
        let mut found = Vec::new();
        for object in objects {
            if serde_json::to_string(object).unwrap().contains(text) {
                found.push(object.metadata.name.clone().unwrap());
            }
        }
        found
    }

    fn runtime_config(address: &str) -> DriverSettings {
        DriverSettings {
            match_export_location_address: Some(address.into()),
            ..DriverSettings::default()
        }
    }

    #[rstest::rstest]
    fn unset_settings_change_nothing(
        #[values(Release::Current, Release::Previous)] release: Release,
    ) {
        let objects = render_with(release, DriverSettings::default());
        // nfs-shareClient is a class parameter only: it does not change the driver objects.
        let clients = DriverSettings {
            nfs_share_client: Some("10.0.0.0/8".into()),
            ..DriverSettings::default()
        };
        assert_eq!(
            serde_json::to_value(&objects).unwrap(),
            serde_json::to_value(render_with(release, clients)).unwrap()
        );
        for text in [
            "with-topology",
            "Topology=true",
            "runtime-config",
            RUNTIME_CONFIG_MAP,
        ] {
            assert!(matching(&objects, text).is_empty(), "{text}");
        }
        let controller = workload(&objects, "Deployment", CONTROLLER_DEPLOYMENT);
        assert!(
            args(container(controller, DRIVER_CONTAINER))
                .contains(&"--share-protocol-selector=NFS")
        );
    }

    #[rstest::rstest]
    fn topology_reaches_both_drivers_and_the_provisioner(
        #[values(Release::Current, Release::Previous)] release: Release,
    ) {
        let settings = DriverSettings {
            topology: true,
            ..DriverSettings::default()
        };
        let objects = render_with(release, settings);
        let controller = workload(&objects, "Deployment", CONTROLLER_DEPLOYMENT);
        let node = workload(&objects, "DaemonSet", NODE_DAEMON_SET);
        for driver in [
            container(controller, DRIVER_CONTAINER),
            container(node, DRIVER_CONTAINER),
        ] {
            let args = args(driver);
            assert_eq!(
                args.iter().filter(|a| **a == "--with-topology").count(),
                1,
                "{args:?}"
            );
            // No --nodeaz: the node plugins read their zone from the metadata service.
            assert!(!args.iter().any(|a| a.starts_with("--nodeaz")), "{args:?}");
        }
        assert!(
            args(container(controller, PROVISIONER_CONTAINER))
                .contains(&"--feature-gates=Topology=true")
        );
        assert_eq!(
            matching(&objects, "with-topology"),
            [NODE_DAEMON_SET, CONTROLLER_DEPLOYMENT]
        );
        assert_eq!(matching(&objects, "Topology=true"), [CONTROLLER_DEPLOYMENT]);
        assert!(matching(&objects, "runtime-config").is_empty());
    }

    #[rstest::rstest]
    fn the_runtime_config_is_a_config_map_mounted_into_both_drivers(
        #[values(Release::Current, Release::Previous)] release: Release,
    ) {
        let objects = render_with(release, runtime_config("10.0.0.0/24"));
        // First, so that it exists before the pods that mount it.
        let map = &objects[0];
        assert_eq!(map.types.as_ref().unwrap().kind, "ConfigMap");
        assert_eq!(map.metadata.name.as_deref(), Some(RUNTIME_CONFIG_MAP));
        assert_eq!(map.metadata.namespace.as_deref(), Some("manila-csi"));
        assert_eq!(
            map.metadata
                .labels
                .as_ref()
                .unwrap()
                .get(MANAGED_BY_LABEL)
                .map(String::as_str),
            Some(IDENTITY.managed_by)
        );
        let text = map.data["data"][RUNTIME_CONFIG_KEY].as_str().unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(text).unwrap(),
            json!({"nfs": {"matchExportLocationAddress": "10.0.0.0/24"}})
        );
        let file = format!("--runtime-config-file={RUNTIME_CONFIG_DIR}/{RUNTIME_CONFIG_KEY}");
        let mut hashes = Vec::new();
        for (kind, name) in [
            ("Deployment", CONTROLLER_DEPLOYMENT),
            ("DaemonSet", NODE_DAEMON_SET),
        ] {
            let workload = workload(&objects, kind, name);
            let driver = container(workload, DRIVER_CONTAINER);
            assert!(args(driver).contains(&file.as_str()), "{name}");
            assert!(
                driver["volumeMounts"].as_array().unwrap().contains(&json!({
                    "name": RUNTIME_CONFIG_VOLUME, "mountPath": RUNTIME_CONFIG_DIR, "readOnly": true,
                })),
                "{name}"
            );
            let pod = &workload["spec"]["template"];
            assert!(
                pod["spec"]["volumes"].as_array().unwrap().contains(&json!({
                    "name": RUNTIME_CONFIG_VOLUME, "configMap": {"name": RUNTIME_CONFIG_MAP},
                })),
                "{name}"
            );
            hashes.push(pod["metadata"]["annotations"][RUNTIME_CONFIG_HASH_ANNOTATION].clone());
        }
        assert!(hashes[0].is_string());
        assert_eq!(hashes[0], hashes[1]);
        // Only the Manila driver containers read it: not the sidecars, not the NFS plugin.
        assert_eq!(matching(&objects, "--runtime-config-file").len(), 2);
        let nfs = workload(&objects, "DaemonSet", NFS_DAEMON_SET);
        assert!(
            !serde_json::to_string(nfs)
                .unwrap()
                .contains("runtime-config")
        );
        // Another address, another hash: the pods restart.
        let other = render_with(release, runtime_config("10.0.1.0/24"));
        let pod = &workload(&other, "Deployment", CONTROLLER_DEPLOYMENT)["spec"]["template"];
        assert_ne!(
            pod["metadata"]["annotations"][RUNTIME_CONFIG_HASH_ANNOTATION],
            hashes[0]
        );
    }
}
