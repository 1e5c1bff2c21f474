//! What the Manila operator prunes ([`operator_kit::prune`]): the driver objects an earlier
//! release installed and this one no longer renders (N-1's ClusterRole shared by every
//! sidecar, replaced by one ClusterRole per sidecar), or an earlier configuration did (the
//! runtime configuration's ConfigMap once `matchExportLocationAddress` is unset), of the
//! kinds in [`PRUNED_KINDS`].
//!
//! The controller's PodDisruptionBudget is pruned here, not by the library: the library
//! lists its kinds at one API version each (`policy/v1` for the budget), while the operator
//! applies the budget at the version the cluster serves (`policy/v1beta1` before Kubernetes
//! 1.21, the embedded cluster's; [`crate::config::OperatorConfig::pdb_api_version`]), and
//! listing `policy/v1` there fails. After the library's prune (so after the workloads), the
//! budgets of the operator (its label, owned by the ClusterCSIDriver) in its namespace that
//! it does not render are deleted ([`stale_budgets`]), e.g. N's budget under N-1.
//!
//! Its RBAC (`fixtures/manila-operator/rbac.yaml`) lets it list and delete exactly these
//! kinds (a test of `assets::operator_rbac` checks it); the VolumeSnapshotClass, which
//! snapshots refer to, and StorageClasses, which PVs refer to, are never among them.

use std::collections::BTreeSet;

use kube::api::{Api, DynamicObject, ListParams, ObjectMeta, TypeMeta};
use kube::{Client, ResourceExt};
use operator_kit::apply::Applier;
use operator_kit::kinds::api_resource;
use operator_kit::prune::{self, ObjectKey, PruneError, Scope};

use crate::identity::IDENTITY;

/// The kind pruned here at the API version the cluster serves ([`prune_budgets`]).
pub const BUDGET_KIND: &str = "PodDisruptionBudget";

/// The kinds the Manila operator prunes (the library deletes workloads first, then the
/// driver object and what the workloads used): all it applies but the VolumeSnapshotClass.
pub const PRUNED_KINDS: &[&str] = &[
    "Deployment",
    "DaemonSet",
    "CSIDriver",
    "RoleBinding",
    "Role",
    "ClusterRoleBinding",
    "ClusterRole",
    "ServiceAccount",
    "ConfigMap",
    "Secret",
];

/// The scope of the Manila operator's prune in `namespace`, owned by `owner_uid`.
pub fn scope<'a>(namespace: &'a str, owner_uid: &'a str) -> Scope<'a> {
    Scope {
        identity: &IDENTITY,
        namespace,
        owner_uid,
        kinds: PRUNED_KINDS,
    }
}

/// Deletes the Manila operator's objects that are not in `wanted` (the library's kinds,
/// then its PodDisruptionBudgets at `pdb_api_version`); those it deleted.
pub async fn prune(
    client: &Client,
    applier: &Applier,
    namespace: &str,
    owner_uid: &str,
    wanted: &BTreeSet<ObjectKey>,
    pdb_api_version: &str,
) -> Result<Vec<ObjectKey>, PruneError> {
    let mut deleted = prune::prune(client, applier, &scope(namespace, owner_uid), wanted).await?;
    deleted.extend(
        prune_budgets(
            client,
            applier,
            namespace,
            owner_uid,
            wanted,
            pdb_api_version,
        )
        .await?,
    );
    Ok(deleted)
}

/// Deletes the operator's PodDisruptionBudgets (listed at `api_version`) that are not in
/// `wanted`; those it deleted.
async fn prune_budgets(
    client: &Client,
    applier: &Applier,
    namespace: &str,
    owner_uid: &str,
    wanted: &BTreeSet<ObjectKey>,
    api_version: &str,
) -> Result<Vec<ObjectKey>, PruneError> {
    let Some((resource, _)) = api_resource(api_version, BUDGET_KIND) else {
        // Not a version the operator applies budgets at: it applied none.
        return Ok(Vec::new());
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    let managed = ListParams::default().labels(&IDENTITY.managed_by_selector());
    let list = api
        .list_metadata(&managed)
        .await
        .map_err(|source| PruneError::List {
            kind: BUDGET_KIND.into(),
            source,
        })?;
    let found: Vec<(ObjectKey, ObjectMeta)> = list
        .items
        .into_iter()
        .map(|object| {
            let key = ObjectKey {
                api_version: api_version.to_string(),
                kind: BUDGET_KIND.to_string(),
                namespace: Some(namespace.to_string()),
                name: object.name_any(),
            };
            (key, object.metadata)
        })
        .collect();
    let mut deleted = Vec::new();
    for key in stale_budgets(&found, wanted, namespace, owner_uid) {
        let object = DynamicObject {
            types: Some(TypeMeta {
                api_version: key.api_version.clone(),
                kind: key.kind.clone(),
            }),
            metadata: ObjectMeta {
                name: Some(key.name.clone()),
                namespace: key.namespace.clone(),
                ..ObjectMeta::default()
            },
            data: serde_json::Value::Null,
        };
        if applier.delete(&object).await? {
            deleted.push(key);
        }
    }
    Ok(deleted)
}

/// The stale budgets among `found`: PodDisruptionBudgets in `namespace` with the operator's
/// label and an owner reference to `owner_uid`, whose name `wanted` has no budget of (at any
/// API version: the same budget is the same object whatever version it is read at).
pub fn stale_budgets(
    found: &[(ObjectKey, ObjectMeta)],
    wanted: &BTreeSet<ObjectKey>,
    namespace: &str,
    owner_uid: &str,
) -> Vec<ObjectKey> {
    found
        .iter()
        .filter(|(key, meta)| {
            let owned = meta
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.uid == owner_uid);
            let still_wanted = wanted.iter().any(|w| {
                w.kind == BUDGET_KIND && w.namespace == key.namespace && w.name == key.name
            });
            key.kind == BUDGET_KIND
                && key.namespace.as_deref() == Some(namespace)
                && IDENTITY.is_managed(meta.labels.as_ref())
                && owned
                && !still_wanted
        })
        .map(|(key, _)| key.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::api::ObjectMeta;
    use operator_kit::api::LogLevel;
    use operator_kit::prune::{PRUNABLE_KINDS, stale};

    use super::*;
    use crate::assets::{AssetInputs, render};
    use crate::config::OperatorConfig;
    use crate::release::Release;

    const OWNER: &str = "uid-of-the-clustercsidriver";
    const NS: &str = "manila-csi";

    fn ours() -> ObjectMeta {
        ObjectMeta {
            labels: Some(IDENTITY.labels()),
            owner_references: Some(vec![OwnerReference {
                uid: OWNER.into(),
                ..Default::default()
            }]),
            ..Default::default()
        }
    }

    fn rendered(release: Release) -> BTreeSet<ObjectKey> {
        let mut config = OperatorConfig::new(NS);
        config.set_release(release);
        render(&AssetInputs {
            config: &config,
            log_level: LogLevel::Normal,
            credentials_hash: String::new(),
            snapshot_crds_present: true,
            settings: Default::default(),
        })
        .unwrap()
        .iter()
        .map(ObjectKey::of)
        .collect()
    }

    #[test]
    fn every_pruned_kind_may_be_pruned_and_goes_in_deletion_order() {
        let kinds: Vec<&str> = scope(NS, OWNER)
            .prunable_kinds()
            .map(|(_, kind)| *kind)
            .collect();
        assert_eq!(kinds, PRUNED_KINDS);
        assert!(
            !PRUNABLE_KINDS
                .iter()
                .any(|(_, k)| *k == "VolumeSnapshotClass")
        );
    }

    fn budget(api_version: &str, name: &str) -> ObjectKey {
        ObjectKey {
            api_version: api_version.into(),
            kind: BUDGET_KIND.into(),
            namespace: Some(NS.into()),
            name: name.into(),
        }
    }

    #[test]
    fn budgets_are_pruned_at_any_version_when_they_are_ours_and_no_longer_rendered() {
        let controller = "openstack-manila-csi-controllerplugin";
        let current = rendered(Release::Current);
        let previous = rendered(Release::Previous);
        // The library does not list budgets: they are pruned here.
        assert!(!PRUNED_KINDS.contains(&BUDGET_KIND));
        for version in ["policy/v1", "policy/v1beta1"] {
            let found = vec![(budget(version, controller), ours())];
            // Rendered (at either version): kept.
            assert!(
                stale_budgets(&found, &current, NS, OWNER).is_empty(),
                "{version}"
            );
            let mut other_version = BTreeSet::new();
            other_version.insert(budget("policy/v1", controller));
            assert!(stale_budgets(&found, &other_version, NS, OWNER).is_empty());
            // N-1 renders none: N's budget goes after a downgrade.
            assert_eq!(
                stale_budgets(&found, &previous, NS, OWNER),
                vec![budget(version, controller)],
                "{version}"
            );
        }
        // Not ours: another owner, no label, another namespace.
        let mut other_owner = ours();
        other_owner.owner_references.as_mut().unwrap()[0].uid = "someone-else".into();
        let mut unlabelled = ours();
        unlabelled.labels = None;
        let mut elsewhere = budget("policy/v1", controller);
        elsewhere.namespace = Some("other".into());
        let found = vec![
            (budget("policy/v1", "a"), other_owner),
            (budget("policy/v1", "b"), unlabelled),
            (elsewhere, ours()),
            (budget("policy/v1", "mine"), ours()),
        ];
        assert_eq!(
            stale_budgets(&found, &current, NS, OWNER),
            vec![budget("policy/v1", "mine")]
        );
    }

    #[test]
    fn after_the_previous_release_the_current_one_prunes_exactly_the_shared_sidecar_role() {
        let previous = rendered(Release::Previous);
        let current = rendered(Release::Current);
        let found: Vec<(ObjectKey, ObjectMeta)> =
            previous.iter().map(|k| (k.clone(), ours())).collect();
        let role = "rbac.authorization.k8s.io/v1";
        let shared = |kind: &str| ObjectKey {
            api_version: role.into(),
            kind: kind.into(),
            namespace: None,
            name: "openstack-manila-csi-controllerplugin".into(),
        };
        assert_eq!(
            stale(&found, &current, &scope(NS, OWNER)),
            vec![shared("ClusterRole"), shared("ClusterRoleBinding")]
        );
        // The other way round (a downgrade) would prune the per-sidecar roles; the snapshot
        // class is never a candidate.
        let found: Vec<(ObjectKey, ObjectMeta)> =
            current.iter().map(|k| (k.clone(), ours())).collect();
        let names: Vec<String> = stale(&found, &previous, &scope(NS, OWNER))
            .iter()
            .map(ObjectKey::describe)
            .collect();
        assert_eq!(names.len(), 6, "{names:?}");
        assert!(names.iter().all(|n| n.contains("provisioner")
            || n.contains("resizer")
            || n.contains("snapshotter")));
    }
}
