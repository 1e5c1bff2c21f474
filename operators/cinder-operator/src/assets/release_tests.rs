//! The previous release (N-1) rendered against the current one (N): the differences are
//! exactly those [`crate::config::OperatorConfig::release`] documents, and N-1 reports
//! `<crate version>-previous`.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::collections::BTreeSet;

use kube::api::DynamicObject;

use super::{AssetInputs, CONTROLLER_DEPLOYMENT, render};
use crate::config::{OperatorConfig, Release, VERSIONS};

fn render_for(release: Release) -> Vec<DynamicObject> {
    let mut config = OperatorConfig::new("openshift-cluster-csi-drivers");
    config.set_release(release);
    render(&AssetInputs {
        config: &config,
        verbosity: 2,
        config_hash: "0123456789abcdef".into(),
        topology: false,
        snapshot_crds_present: true,
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
    objects
        .iter()
        .find(|o| key(o) == wanted)
        .unwrap_or_else(|| panic!("{wanted} not rendered"))
}

/// Every `group resource verb` a role grants.
fn rights(role: &DynamicObject) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
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

#[test]
fn the_previous_release_reports_the_previous_version() {
    let mut config = OperatorConfig::new("ns");
    assert_eq!(config.release, Release::Current);
    assert_eq!(config.version, env!("CARGO_PKG_VERSION"));
    config.set_release(Release::Previous);
    assert_eq!(
        config.version,
        format!("{}-previous", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(config.version, VERSIONS.previous);
    config.set_release(Release::Current);
    assert_eq!(config.version, VERSIONS.current);
}

#[test]
fn the_previous_release_renders_one_shared_sidecar_role_and_no_resizer() {
    let objects = render_for(Release::Previous);
    assert_eq!(
        objects.iter().map(key).collect::<Vec<_>>(),
        [
            "ServiceAccount openstack-cinder-csi-controllerplugin",
            "ClusterRole openstack-cinder-csi-controllerplugin",
            "ClusterRoleBinding openstack-cinder-csi-controllerplugin",
            "Role openstack-cinder-csi-controllerplugin",
            "RoleBinding openstack-cinder-csi-controllerplugin",
            "ServiceAccount openstack-cinder-csi-nodeplugin",
            "CSIDriver cinder.csi.openstack.org",
            "DaemonSet openstack-cinder-csi-nodeplugin",
            "Deployment openstack-cinder-csi-controllerplugin",
            "VolumeSnapshotClass standard-csi",
            "StorageClass standard-csi",
        ]
    );
    let text = serde_json::to_string(&objects).unwrap();
    assert!(!text.contains("resizer"), "no resizer anywhere: {text}");
    assert!(!text.contains("persistentvolumeclaims/status"), "{text}");
}

/// N-1's shared role grants exactly what N's provisioner, attacher and snapshotter roles
/// grant together: the same rights in one role, bound to the same ServiceAccount.
#[test]
fn the_shared_role_is_the_union_of_the_current_sidecar_roles_but_the_resizers() {
    let current = render_for(Release::Current);
    let previous = render_for(Release::Previous);
    let mut union = BTreeSet::new();
    for sidecar in ["provisioner", "attacher", "snapshotter"] {
        union.extend(rights(find(
            &current,
            &format!("ClusterRole openstack-cinder-csi-{sidecar}"),
        )));
    }
    let shared = rights(find(
        &previous,
        "ClusterRole openstack-cinder-csi-controllerplugin",
    ));
    assert_eq!(shared, union);
    let binding = find(
        &previous,
        "ClusterRoleBinding openstack-cinder-csi-controllerplugin",
    );
    assert_eq!(
        binding.data["roleRef"]["name"],
        "openstack-cinder-csi-controllerplugin"
    );
    assert_eq!(
        binding.data["subjects"][0]["name"],
        "openstack-cinder-csi-controllerplugin"
    );
}

#[test]
fn the_previous_release_differs_from_the_current_one_only_as_documented() {
    let current = render_for(Release::Current);
    let previous = render_for(Release::Previous);
    let only_current = [
        "ClusterRole openstack-cinder-csi-provisioner",
        "ClusterRoleBinding openstack-cinder-csi-provisioner",
        "ClusterRole openstack-cinder-csi-attacher",
        "ClusterRoleBinding openstack-cinder-csi-attacher",
        "ClusterRole openstack-cinder-csi-resizer",
        "ClusterRoleBinding openstack-cinder-csi-resizer",
        "ClusterRole openstack-cinder-csi-snapshotter",
        "ClusterRoleBinding openstack-cinder-csi-snapshotter",
    ];
    let only_previous = [
        "ClusterRole openstack-cinder-csi-controllerplugin",
        "ClusterRoleBinding openstack-cinder-csi-controllerplugin",
    ];
    for object in &current {
        let name = key(object);
        if only_current.contains(&name.as_str()) {
            assert!(!previous.iter().any(|o| key(o) == name), "{name}");
            continue;
        }
        let old = find(&previous, &name).clone();
        let mut new = object.clone();
        if name == format!("Deployment {CONTROLLER_DEPLOYMENT}") {
            let containers = new.data["spec"]["template"]["spec"]["containers"]
                .as_array_mut()
                .unwrap();
            let before = containers.len();
            containers.retain(|c| c["name"] != "csi-resizer");
            assert_eq!(containers.len(), before - 1, "N runs a resizer");
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
