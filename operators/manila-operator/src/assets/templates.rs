//! Each release's templates ([`Release`]), in apply order: `assets/current/` for N and
//! `assets/previous/` for N-1. What N-1 does differently is listed in [`crate::release`]; the
//! tests below render both releases and fail on any other difference.

use super::{Asset, When};
use crate::release::Release;

/// The templates of `release`, in apply order.
pub(super) fn templates(release: Release) -> &'static [Asset] {
    match release {
        Release::Previous => PREVIOUS,
        Release::Current => CURRENT,
    }
}

/// Declares an asset of `assets/<dir>/`.
macro_rules! asset {
    ($dir:literal, $file:literal, $when:expr) => {
        Asset {
            file: concat!($dir, "/", $file),
            template: include_str!(concat!("../../assets/", $dir, "/", $file)),
            when: $when,
        }
    };
}

/// The templates of the current release, in apply order: identities and RBAC first, then the
/// driver object, the workloads (the NFS plugin before the Manila node plugin that waits for
/// its socket), and the snapshot class.
const CURRENT: &[Asset] = &[
    asset!("current", "controller-rbac.yaml", When::Always),
    asset!("current", "node-rbac.yaml", When::Always),
    asset!("current", "csidriver.yaml", When::Always),
    asset!("current", "nfs-node.yaml", When::Always),
    asset!("current", "node.yaml", When::Always),
    asset!("current", "controller.yaml", When::Always),
    asset!("current", "snapshotclass.yaml", When::SnapshotCrds),
];

/// The templates of the previous release, in the same order.
const PREVIOUS: &[Asset] = &[
    asset!("previous", "controller-rbac.yaml", When::Always),
    asset!("previous", "node-rbac.yaml", When::Always),
    asset!("previous", "csidriver.yaml", When::Always),
    asset!("previous", "nfs-node.yaml", When::Always),
    asset!("previous", "node.yaml", When::Always),
    asset!("previous", "controller.yaml", When::Always),
    asset!("previous", "snapshotclass.yaml", When::SnapshotCrds),
];

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use kube::api::DynamicObject;
    use serde_json::{Value, json};

    use operator_kit::api::LogLevel;

    use super::super::{AssetInputs, render, render_release};
    use crate::config::OperatorConfig;
    use crate::release::{PREVIOUS_CA_DIR, PREVIOUS_CA_FILE_NAME, PREVIOUS_VERSION, Release};

    fn render_for(release: Release) -> Vec<DynamicObject> {
        let mut config = OperatorConfig::new("manila-csi");
        config.set_release(release);
        render(&AssetInputs {
            config: &config,
            log_level: LogLevel::Normal,
            credentials_hash: "0123456789abcdef".into(),
            snapshot_crds_present: true,
            settings: Default::default(),
        })
        .unwrap()
    }

    fn key(object: &DynamicObject) -> String {
        format!(
            "{} {}",
            object.types.as_ref().unwrap().kind,
            object.metadata.name.as_deref().unwrap()
        )
    }

    fn find<'a>(objects: &'a [DynamicObject], wanted: &str) -> &'a DynamicObject {
        objects.iter().find(|o| key(o) == wanted).unwrap()
    }

    #[test]
    fn render_follows_the_configured_release() {
        let mut config = OperatorConfig::new("manila-csi");
        config.set_release(Release::Previous);
        assert_eq!(config.version, PREVIOUS_VERSION);
        let inputs = AssetInputs {
            config: &config,
            log_level: LogLevel::Normal,
            credentials_hash: String::new(),
            snapshot_crds_present: true,
            settings: Default::default(),
        };
        let by_config: Vec<String> = render(&inputs).unwrap().iter().map(key).collect();
        let explicit: Vec<String> = render_release(Release::Previous, &inputs)
            .unwrap()
            .iter()
            .map(key)
            .collect();
        assert_eq!(by_config, explicit);
    }

    #[test]
    fn the_previous_release_renders_the_shared_sidecar_role_and_no_resizer() {
        let objects = render_for(Release::Previous);
        assert_eq!(
            objects.iter().map(key).collect::<Vec<_>>(),
            [
                "ServiceAccount openstack-manila-csi-controllerplugin",
                "ClusterRole openstack-manila-csi-controllerplugin",
                "ClusterRoleBinding openstack-manila-csi-controllerplugin",
                "Role openstack-manila-csi-controllerplugin",
                "RoleBinding openstack-manila-csi-controllerplugin",
                "ServiceAccount openstack-manila-csi-nodeplugin",
                "CSIDriver manila.csi.openstack.org",
                "DaemonSet csi-nodeplugin-nfsplugin",
                "DaemonSet openstack-manila-csi-nodeplugin",
                "Deployment openstack-manila-csi-controllerplugin",
                "VolumeSnapshotClass csi-manila-snapclass",
            ]
        );
        let text = serde_json::to_string(&objects).unwrap();
        assert!(!text.contains("resizer"), "no resizer anywhere");
        assert!(!text.contains("persistentvolumeclaims/status"), "{text}");
    }

    /// The previous release's shared role grants exactly what the current release's
    /// provisioner and snapshotter roles grant together: the same rights, one role.
    #[test]
    fn the_shared_role_is_the_union_of_the_provisioner_and_snapshotter_roles() {
        fn rights(role: &DynamicObject) -> std::collections::BTreeSet<String> {
            let mut out = std::collections::BTreeSet::new();
            for rule in role.data["rules"].as_array().unwrap() {
                for group in rule["apiGroups"].as_array().unwrap() {
                    for resource in rule["resources"].as_array().unwrap() {
                        for verb in rule["verbs"].as_array().unwrap() {
                            out.insert(format!("{group} {resource} {verb}"));
                        }
                    }
                }
            }
            out
        }
        let current = render_for(Release::Current);
        let previous = render_for(Release::Previous);
        let mut union = rights(find(
            &current,
            "ClusterRole openstack-manila-csi-provisioner",
        ));
        union.extend(rights(find(
            &current,
            "ClusterRole openstack-manila-csi-snapshotter",
        )));
        let shared = rights(find(
            &previous,
            "ClusterRole openstack-manila-csi-controllerplugin",
        ));
        assert_eq!(shared, union);
        let binding = find(
            &previous,
            "ClusterRoleBinding openstack-manila-csi-controllerplugin",
        );
        assert_eq!(
            binding.data["roleRef"]["name"],
            "openstack-manila-csi-controllerplugin"
        );
        assert_eq!(
            binding.data["subjects"][0]["name"],
            "openstack-manila-csi-controllerplugin"
        );
    }

    /// Removes what N-1 adds to a pod spec (the CA volume and its mount) so that the rest can
    /// be compared with the current release's.
    fn without_ca(pod_spec: &mut Value) -> (Value, Vec<Value>) {
        let volumes = pod_spec["volumes"].as_array_mut().unwrap();
        let position = volumes.iter().position(|v| v["name"] == "cacert").unwrap();
        let volume = volumes.remove(position);
        let mut mounts = Vec::new();
        for container in pod_spec["containers"].as_array_mut().unwrap() {
            let name = container["name"].clone();
            if let Some(list) = container["volumeMounts"].as_array_mut()
                && let Some(i) = list.iter().position(|m| m["name"] == "cacert")
            {
                mounts.push(json!({"container": name, "mount": list.remove(i)}));
            }
        }
        (volume, mounts)
    }

    #[test]
    fn the_previous_release_differs_from_the_current_one_only_as_documented() {
        let current = render_for(Release::Current);
        let previous = render_for(Release::Previous);
        let ca_volume = json!({
            "name": "cacert",
            "configMap": {
                "name": "cloud-provider-config",
                "items": [{"key": "ca-bundle.pem", "path": PREVIOUS_CA_FILE_NAME}],
                "optional": true,
            },
        });
        let ca_mount = |container: &str| {
            json!({
                "container": container,
                "mount": {"name": "cacert", "mountPath": PREVIOUS_CA_DIR, "readOnly": true},
            })
        };
        let only_current = [
            "PodDisruptionBudget openstack-manila-csi-controllerplugin",
            "ClusterRole openstack-manila-csi-provisioner",
            "ClusterRoleBinding openstack-manila-csi-provisioner",
            "ClusterRole openstack-manila-csi-resizer",
            "ClusterRoleBinding openstack-manila-csi-resizer",
            "ClusterRole openstack-manila-csi-snapshotter",
            "ClusterRoleBinding openstack-manila-csi-snapshotter",
        ];
        let only_previous = [
            "ClusterRole openstack-manila-csi-controllerplugin",
            "ClusterRoleBinding openstack-manila-csi-controllerplugin",
        ];
        for object in &current {
            let name = key(object);
            if only_current.contains(&name.as_str()) {
                assert!(!previous.iter().any(|o| key(o) == name), "{name}");
                continue;
            }
            let mut old = find(&previous, &name).clone();
            let mut new = object.clone();
            match name.as_str() {
                "Deployment openstack-manila-csi-controllerplugin" => {
                    let spec = &mut old.data["spec"]["template"]["spec"];
                    assert_eq!(
                        without_ca(spec),
                        (ca_volume.clone(), vec![ca_mount("csi-driver")])
                    );
                    // N is highly available: two replicas spread over nodes, rolling one
                    // at a time, every sidecar leader-elected; N-1 one replica, Recreate.
                    let spec = &mut new.data["spec"];
                    assert_eq!(spec["replicas"], 2);
                    spec["replicas"] = json!(1);
                    assert_eq!(
                        spec["strategy"],
                        json!({"type": "RollingUpdate",
                               "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
                    );
                    spec["strategy"] = json!({"type": "Recreate"});
                    let pod = spec["template"]["spec"].as_object_mut().unwrap();
                    let affinity = pod.remove("affinity").unwrap();
                    assert_eq!(
                        affinity["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
                            [0]["podAffinityTerm"]["topologyKey"],
                        "kubernetes.io/hostname"
                    );
                    let containers = pod["containers"].as_array_mut().unwrap();
                    let before = containers.len();
                    containers.retain(|c| c["name"] != "csi-resizer");
                    assert_eq!(containers.len(), before - 1);
                    let mut elected = Vec::new();
                    for container in containers.iter_mut() {
                        let args = container["args"].as_array_mut().unwrap();
                        let count = args.len();
                        args.retain(|a| a != "--leader-election");
                        if args.len() < count {
                            elected.push(container["name"].as_str().unwrap().to_string());
                        }
                    }
                    assert_eq!(elected, ["csi-provisioner", "csi-snapshotter"]);
                }
                "DaemonSet openstack-manila-csi-nodeplugin" => {
                    let spec = &mut old.data["spec"]["template"]["spec"];
                    assert_eq!(
                        without_ca(spec),
                        (ca_volume.clone(), vec![ca_mount("csi-driver")])
                    );
                }
                _ => {}
            }
            assert_eq!(
                serde_json::to_value(&old).unwrap(),
                serde_json::to_value(&new).unwrap(),
                "{name}"
            );
        }
        for name in only_previous {
            assert!(!current.iter().any(|o| key(o) == name), "{name}");
        }
        assert_eq!(
            previous.len(),
            current.len() - only_current.len() + only_previous.len()
        );
    }
}
