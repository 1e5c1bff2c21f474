//! What the Manila operator prunes ([`operator_kit::prune`]): the driver objects an earlier
//! release installed and this one no longer renders (N-1's ClusterRole shared by every
//! sidecar, replaced by one ClusterRole per sidecar), or an earlier configuration did (the
//! runtime configuration's ConfigMap once `matchExportLocationAddress` is unset), of the
//! kinds in [`PRUNED_KINDS`].
//!
//! Its RBAC (`fixtures/manila-operator/rbac.yaml`) lets it list and delete exactly these
//! kinds (a test of `assets::operator_rbac` checks it); the VolumeSnapshotClass, which
//! snapshots refer to, and StorageClasses, which PVs refer to, are never among them.

use std::collections::BTreeSet;

use kube::Client;
use operator_kit::apply::Applier;
use operator_kit::prune::{self, ObjectKey, PruneError, Scope};

use crate::identity::IDENTITY;

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

/// Deletes the Manila operator's objects that are not in `wanted`; those it deleted.
pub async fn prune(
    client: &Client,
    applier: &Applier,
    namespace: &str,
    owner_uid: &str,
    wanted: &BTreeSet<ObjectKey>,
) -> Result<Vec<ObjectKey>, PruneError> {
    prune::prune(client, applier, &scope(namespace, owner_uid), wanted).await
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
