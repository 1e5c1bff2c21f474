//! The operator's own RBAC (`fixtures/cinder-operator/rbac.yaml`) against what it renders and
//! does: it must be able to apply, watch and remove every object, prune its kinds, and,
//! holding neither `escalate` nor `bind`, hold every right of each role it creates (RBAC
//! refuses the role or its binding otherwise).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use kube::api::DynamicObject;
use operator_kit::kinds::api_resource;
use operator_kit::prune::{PRUNABLE_KINDS, Scope};
use operator_kit::test_support::{OperatorRights, Right, missing, needs, rights};

use super::{AssetInputs, PRUNED_KINDS, render};
use crate::config::OperatorConfig;
use crate::identity::IDENTITY;

const RBAC: &str = include_str!("../../../../fixtures/cinder-operator/rbac.yaml");

/// The operator's ClusterRole rights, and those it holds in its namespace (Role and
/// ClusterRole).
fn operator() -> (Vec<Right>, Vec<Right>) {
    let held = OperatorRights::parse(RBAC, "cinder-csi");
    let in_namespace = held.in_namespace();
    (held.cluster, in_namespace)
}

fn rendered() -> Vec<DynamicObject> {
    let config = OperatorConfig::new("cinder-csi");
    render(&AssetInputs {
        config: &config,
        verbosity: 2,
        config_hash: String::new(),
        topology: true,
        snapshot_crds_present: true,
    })
    .unwrap()
}

#[test]
fn the_operator_holds_every_right_of_the_roles_it_creates() {
    let (cluster, in_namespace) = operator();
    let mut roles = 0;
    for object in rendered() {
        let kind = object.types.as_ref().unwrap().kind.as_str();
        let held = match kind {
            "ClusterRole" => &cluster,
            "Role" => &in_namespace,
            _ => continue,
        };
        roles += 1;
        let gaps = missing(held, &rights(&object.data["rules"]));
        assert!(
            gaps.is_empty(),
            "{kind} {:?} grants what the operator lacks: {gaps:?}",
            object.metadata.name
        );
    }
    // provisioner, attacher, resizer, snapshotter and the Lease Role.
    assert_eq!(roles, 5);
}

#[test]
fn the_operator_may_apply_watch_and_remove_every_object_it_renders() {
    let (cluster, in_namespace) = operator();
    for object in rendered() {
        let types = object.types.clone().unwrap();
        let (resource, is_namespaced) = api_resource(&types.api_version, &types.kind).unwrap();
        let verbs: &[&str] = match types.kind.as_str() {
            // Applied, never deleted (kept when Removed, never pruned) nor watched.
            "VolumeSnapshotClass" => &["get", "create", "patch"],
            // Created, patched in place (mutable fields), re-created, deleted under
            // storageClassState Removed, watched.
            "StorageClass" => &["get", "list", "watch", "create", "patch", "delete"],
            _ => &["get", "list", "watch", "create", "patch", "delete"],
        };
        let held = if is_namespaced {
            &in_namespace
        } else {
            &cluster
        };
        let gaps = missing(held, &needs(&resource.group, &resource.plural, verbs));
        assert!(
            gaps.is_empty(),
            "{} {:?}: {gaps:?}",
            types.kind,
            object.metadata.name
        );
    }
}

#[test]
fn the_operator_may_do_what_its_controller_does_beyond_the_assets() {
    let (cluster, in_namespace) = operator();
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
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            &["get"],
        ),
        needs("", "events", &["create", "patch"]),
        // managementState Removed counts the driver's PersistentVolumes.
        needs("", "persistentvolumes", &["list"]),
    ]
    .concat();
    let gaps = missing(&cluster, &cluster_wide);
    assert!(gaps.is_empty(), "{gaps:?}");
    let local = [
        // The driver Secret it writes and the credentials it reads (and watches).
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
    let gaps = missing(&in_namespace, &local);
    assert!(gaps.is_empty(), "{gaps:?}");
    for right in &in_namespace {
        assert!(
            !matches!(right.2.as_str(), "escalate" | "bind" | "impersonate" | "*"),
            "no shortcut around RBAC's escalation check: {right:?}"
        );
    }
}

#[test]
fn the_operator_may_list_and_delete_every_kind_it_prunes() {
    let (cluster, in_namespace) = operator();
    let scope = Scope {
        identity: &IDENTITY,
        namespace: "cinder-csi",
        owner_uid: "",
        kinds: PRUNED_KINDS,
    };
    let kinds: Vec<_> = scope.prunable_kinds().collect();
    assert_eq!(
        kinds.len(),
        PRUNED_KINDS.len(),
        "every kind named is prunable"
    );
    for (api_version, kind) in kinds {
        let (resource, is_namespaced) = api_resource(api_version, kind).unwrap();
        let held = if is_namespaced {
            &in_namespace
        } else {
            &cluster
        };
        let gaps = missing(
            held,
            &needs(&resource.group, &resource.plural, &["list", "delete"]),
        );
        assert!(gaps.is_empty(), "{kind}: {gaps:?}");
    }
    assert!(
        !PRUNED_KINDS
            .iter()
            .any(|k| matches!(*k, "StorageClass" | "VolumeSnapshotClass")),
        "{PRUNABLE_KINDS:?}"
    );
}
