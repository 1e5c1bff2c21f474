//! The operator's own RBAC (`fixtures/manila-operator/rbac.yaml`) against what it renders:
//! it must be able to apply every object, and, since it holds neither `escalate` nor `bind`,
//! it must hold every right of each role it creates (RBAC refuses the role or its binding
//! otherwise; cluster-wide for a ClusterRole, in the namespace for a Role). For every release:
//! the current operator adopts and prunes what the previous one installed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use kube::api::DynamicObject;
use operator_kit::api::LogLevel;
use operator_kit::kinds::api_resource;
use operator_kit::test_support::{OperatorRights, Right, missing, needs, rights};
use serde::Deserialize;
use serde_json::Value;

use super::{AssetInputs, render};
use crate::config::OperatorConfig;
use crate::release::Release;

const RBAC: &str = include_str!("../../../../fixtures/manila-operator/rbac.yaml");

/// The operator's ClusterRole and Role rights.
fn operator() -> (Vec<Right>, Vec<Right>) {
    let held = OperatorRights::parse(RBAC, "manila-csi");
    (held.cluster, held.role)
}

fn rendered(release: Release) -> Vec<DynamicObject> {
    let mut config = OperatorConfig::new("manila-csi");
    config.set_release(release);
    render(&AssetInputs {
        config: &config,
        log_level: LogLevel::Normal,
        credentials_hash: String::new(),
        snapshot_crds_present: true,
        // Every object a setting can add: the runtime configuration's ConfigMap.
        settings: crate::driver_config::DriverSettings {
            topology: true,
            nfs_share_client: None,
            match_export_location_address: Some("10.0.0.0/8".into()),
        },
    })
    .unwrap()
}

#[rstest::rstest]
#[case::current(Release::Current, 4)]
#[case::previous(Release::Previous, 2)]
fn the_operator_holds_every_right_of_the_roles_it_creates(
    #[case] release: Release,
    #[case] expected_roles: usize,
) {
    let (cluster, namespaced) = operator();
    let both: Vec<Right> = cluster.iter().chain(&namespaced).cloned().collect();
    let mut roles = 0;
    for object in rendered(release) {
        let kind = object.types.as_ref().unwrap().kind.as_str();
        let name = object.metadata.name.clone().unwrap();
        let held = match kind {
            "ClusterRole" => &cluster,
            "Role" => &both,
            _ => continue,
        };
        roles += 1;
        let gaps = missing(held, &rights(&object.data["rules"]));
        assert!(
            gaps.is_empty(),
            "{kind} {name} grants what the operator lacks: {gaps:?}"
        );
    }
    assert_eq!(roles, expected_roles);
}

#[rstest::rstest]
fn the_operator_may_apply_watch_and_remove_every_object_it_renders(
    #[values(Release::Current, Release::Previous)] release: Release,
) {
    let (cluster, namespaced) = operator();
    let both: Vec<Right> = cluster.iter().chain(&namespaced).cloned().collect();
    for object in rendered(release) {
        let types = object.types.clone().unwrap();
        let (resource, is_namespaced) = api_resource(&types.api_version, &types.kind).unwrap();
        // Never deleted (kept when Removed, never pruned) nor watched: the snapshot class.
        // Everything else may be pruned, which lists by label and deletes.
        let verbs: &[&str] = if types.kind == "VolumeSnapshotClass" {
            &["get", "create", "patch"]
        } else {
            &["get", "list", "watch", "create", "patch", "delete"]
        };
        let held = if is_namespaced { &both } else { &cluster };
        let gaps = missing(held, &needs(&resource.group, &resource.plural, verbs));
        assert!(
            gaps.is_empty(),
            "{} {:?}: {gaps:?}",
            types.kind,
            object.metadata.name
        );
    }
}

/// What the controller does beyond applying, watching and deleting the objects it renders:
/// (cluster-wide, in its namespace).
fn controller_needs() -> (Vec<Right>, Vec<Right>) {
    let cluster_wide = [
        needs(
            "operator.openshift.io",
            "clustercsidrivers",
            &["get", "list", "watch"],
        ),
        needs(
            "operator.openshift.io",
            "clustercsidrivers/status",
            &["patch"],
        ),
        needs(
            "config.openshift.io",
            "clusteroperators",
            &["get", "create", "patch"],
        ),
        needs("config.openshift.io", "clusteroperators/status", &["patch"]),
        needs(
            "storage.k8s.io",
            "storageclasses",
            &["get", "list", "watch", "create", "patch", "delete"],
        ),
        needs(
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            &["get"],
        ),
        needs("", "events", &["create"]),
        // managementState Removed counts the driver's PersistentVolumes.
        needs("", "persistentvolumes", &["list"]),
        // Owner references with blockOwnerDeletion (OwnerReferencesPermissionEnforcement).
        needs(
            "operator.openshift.io",
            "clustercsidrivers/finalizers",
            &["update"],
        ),
    ]
    .concat();
    let in_namespace = [
        // The driver Secret it writes and the credentials it reads.
        needs(
            "",
            "secrets",
            &["get", "list", "watch", "create", "patch", "delete"],
        ),
        needs("", "configmaps", &["get", "list", "watch"]),
        needs(
            "coordination.k8s.io",
            "leases",
            &["get", "create", "update", "patch"],
        ),
    ]
    .concat();
    (cluster_wide, in_namespace)
}

#[test]
fn the_operator_may_do_what_its_controller_does_beyond_the_assets() {
    let (cluster, namespaced) = operator();
    let both: Vec<Right> = cluster.iter().chain(&namespaced).cloned().collect();
    let (cluster_wide, in_namespace) = controller_needs();
    let gaps = missing(&cluster, &cluster_wide);
    assert!(gaps.is_empty(), "{gaps:?}");
    let gaps = missing(&both, &in_namespace);
    assert!(gaps.is_empty(), "{gaps:?}");
    // No shortcut around RBAC's escalation check.
    for right in cluster.iter().chain(&namespaced) {
        assert!(
            !matches!(right.2.as_str(), "escalate" | "bind" | "impersonate" | "*"),
            "{right:?}"
        );
    }
}

/// The rights the operator uses, as rbac.yaml says in its first lines: every rule is used.
/// Cluster-wide: the cluster-scoped objects it renders (apply, watch, delete; the snapshot
/// class only applied), what its controller does, and exactly the rights of the ClusterRoles
/// it creates ("Held for the sidecars"); in its namespace: the namespaced objects it renders
/// and prunes, what its controller does there, and the rights of the Roles it creates.
#[test]
fn the_operator_holds_nothing_it_does_not_use() {
    let (cluster, namespaced) = operator();
    let (mut used_cluster, mut used_namespaced) = controller_needs();
    for release in [Release::Current, Release::Previous] {
        for object in rendered(release) {
            let types = object.types.clone().unwrap();
            let (resource, is_namespaced) = api_resource(&types.api_version, &types.kind).unwrap();
            let verbs: &[&str] = if types.kind == "VolumeSnapshotClass" {
                &["get", "create", "patch"]
            } else {
                &["get", "list", "watch", "create", "patch", "delete"]
            };
            let object_rights = needs(&resource.group, &resource.plural, verbs);
            match (types.kind.as_str(), is_namespaced) {
                ("ClusterRole", _) => used_cluster.extend(rights(&object.data["rules"])),
                ("Role", _) => used_namespaced.extend(rights(&object.data["rules"])),
                _ => {}
            }
            if is_namespaced {
                used_namespaced.extend(object_rights);
            } else {
                used_cluster.extend(object_rights);
            }
        }
    }
    let unused = missing(&used_cluster, &cluster);
    assert!(
        unused.is_empty(),
        "the operator's ClusterRole grants what nothing uses: {unused:?}"
    );
    let unused = missing(&used_namespaced, &namespaced);
    assert!(
        unused.is_empty(),
        "the operator's Role grants what nothing uses: {unused:?}"
    );
}

/// The "Held for the sidecars" rules are exactly the union of the sidecars' ClusterRoles of
/// both releases (rbac.yaml says so): none extra, and none missing but the Events the
/// operator holds for itself above.
#[test]
fn the_rights_held_for_the_sidecars_are_exactly_their_roles() {
    let text = RBAC.replace("${NAMESPACE}", "manila-csi");
    let (_, section) = text.split_once("# --- Held for the sidecars ---").unwrap();
    let (section, _) = section.split_once("\n---\n").unwrap();
    // The rules of the section, without its comments.
    let rules: Vec<&str> = section
        .lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .collect();
    let rules: Value =
        serde_json::to_value(serde_yaml::from_str::<serde_yaml::Value>(&rules.join("\n")).unwrap())
            .unwrap();
    assert!(rules.as_array().is_some_and(|r| !r.is_empty()), "{rules}");
    let mut held = rights(&rules);
    held.sort();
    held.dedup();
    let mut union = Vec::new();
    for release in [Release::Current, Release::Previous] {
        for object in rendered(release) {
            if object.types.as_ref().unwrap().kind == "ClusterRole" {
                union.extend(rights(&object.data["rules"]));
            }
        }
    }
    union.sort();
    union.dedup();
    let extra: Vec<&Right> = held.iter().filter(|r| !union.contains(r)).collect();
    assert!(extra.is_empty(), "held for no sidecar: {extra:?}");
    // What the section lacks the operator holds above for itself (Events).
    let (cluster, _) = operator();
    let own: Vec<Right> = cluster.into_iter().filter(|r| !held.contains(r)).collect();
    let lacking: Vec<&Right> = union.iter().filter(|r| !held.contains(r)).collect();
    assert_eq!(lacking, [&("".into(), "events".into(), "create".into())]);
    assert!(own.contains(lacking[0]));
}

#[test]
fn the_operator_may_list_and_delete_every_kind_it_prunes() {
    let (cluster, namespaced) = operator();
    let both: Vec<Right> = cluster.iter().chain(&namespaced).cloned().collect();
    // The library's kinds, and the budget at both versions the operator may apply it at.
    let budgets = [
        ("policy/v1", crate::prune::BUDGET_KIND),
        ("policy/v1beta1", crate::prune::BUDGET_KIND),
    ];
    for (api_version, kind) in crate::prune::scope("manila-csi", "")
        .prunable_kinds()
        .chain(&budgets)
    {
        let (resource, is_namespaced) = api_resource(api_version, kind).unwrap();
        let held = if is_namespaced { &both } else { &cluster };
        let gaps = missing(
            held,
            &needs(&resource.group, &resource.plural, &["list", "delete"]),
        );
        assert!(gaps.is_empty(), "{kind}: {gaps:?}");
    }
}

/// The sidecars' roles the operator installs grant exactly what those of the plain manifests
/// (`fixtures/manila-csi/controllerplugin-rbac.yaml`, least privilege, proven against a real
/// API server by `suites/tests/e2e_rbac.rs`) grant: one list of rights, two renderings.
#[test]
fn the_sidecar_roles_are_those_of_the_plain_manifests() {
    const PLAIN: &str = include_str!("../../../../fixtures/manila-csi/controllerplugin-rbac.yaml");
    let sorted = |mut rights: Vec<Right>| {
        rights.sort();
        rights
    };
    let mut plain = std::collections::BTreeMap::new();
    let text = PLAIN
        .replace("${NAMESPACE}", "manila-csi")
        .replace("${INSTANCE}", "openstack-manila-csi");
    for document in serde_yaml::Deserializer::from_str(&text) {
        let value =
            serde_json::to_value(serde_yaml::Value::deserialize(document).unwrap()).unwrap();
        if matches!(value["kind"].as_str(), Some("ClusterRole" | "Role")) {
            let key = format!(
                "{} {}",
                value["kind"].as_str().unwrap(),
                value["metadata"]["name"].as_str().unwrap()
            );
            plain.insert(key, sorted(rights(&value["rules"])));
        }
    }
    let objects = rendered(Release::Current);
    let mut compared = 0;
    for object in &objects {
        let Some(kind) = object.types.as_ref().map(|t| t.kind.as_str()) else {
            continue;
        };
        if !matches!(kind, "ClusterRole" | "Role") {
            continue;
        }
        let key = format!("{kind} {}", object.metadata.name.as_deref().unwrap());
        let want = plain
            .get(&key)
            .unwrap_or_else(|| panic!("{key} is not in the plain manifests"));
        assert_eq!(&sorted(rights(&object.data["rules"])), want, "{key}");
        compared += 1;
    }
    // provisioner, resizer, snapshotter and the Lease Role (no attacher: attachRequired false).
    assert_eq!(compared, 4);
}
