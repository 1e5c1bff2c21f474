//! The kinds operators apply, in a static table: their API resource and whether they are
//! namespaced, without a discovery round trip. An object of any other kind cannot be
//! rendered ([`crate::templates`]), applied or deleted ([`crate::apply`]) or pruned
//! ([`crate::prune`]).

use kube::api::{ApiResource, GroupVersionKind};

/// One kind: (group, version, kind, plural, namespaced).
type Kind = (&'static str, &'static str, &'static str, &'static str, bool);

/// The kinds operators apply: identities and RBAC, the driver object, workloads, their
/// disruption budget, configuration, storage and snapshot classes, and the namespace they
/// live in.
const KINDS: &[Kind] = &[
    ("", "v1", "Namespace", "namespaces", false),
    ("", "v1", "ServiceAccount", "serviceaccounts", true),
    ("", "v1", "Secret", "secrets", true),
    ("", "v1", "ConfigMap", "configmaps", true),
    (RBAC, "v1", "ClusterRole", "clusterroles", false),
    (
        RBAC,
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
    ),
    (RBAC, "v1", "Role", "roles", true),
    (RBAC, "v1", "RoleBinding", "rolebindings", true),
    ("storage.k8s.io", "v1", "CSIDriver", "csidrivers", false),
    // Rendered and labelled like the others; created and re-created through
    // `crate::storage_classes` (storageClassState), never pruned.
    (
        "storage.k8s.io",
        "v1",
        "StorageClass",
        "storageclasses",
        false,
    ),
    ("apps", "v1", "Deployment", "deployments", true),
    ("apps", "v1", "DaemonSet", "daemonsets", true),
    (
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        true,
    ),
    // Kubernetes 1.20 (the embedded cluster's) serves PodDisruptionBudgets only as v1beta1.
    (
        "policy",
        "v1beta1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        true,
    ),
    (
        "snapshot.storage.k8s.io",
        "v1",
        "VolumeSnapshotClass",
        "volumesnapshotclasses",
        false,
    ),
];

const RBAC: &str = "rbac.authorization.k8s.io";

/// The API resource of `api_version`/`kind` and whether it is namespaced, for the kinds
/// operators apply; `None` for any other kind.
pub fn api_resource(api_version: &str, kind: &str) -> Option<(ApiResource, bool)> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    KINDS
        .iter()
        .find(|(g, v, k, _, _)| *g == group && *v == version && *k == kind)
        .map(|(_, _, _, plural, namespaced)| {
            (
                ApiResource::from_gvk_with_plural(
                    &GroupVersionKind::gvk(group, version, kind),
                    plural,
                ),
                *namespaced,
            )
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[rstest::rstest]
    #[case("v1", "Namespace", "", "namespaces", false)]
    #[case("v1", "ConfigMap", "", "configmaps", true)]
    #[case(
        "policy/v1",
        "PodDisruptionBudget",
        "policy",
        "poddisruptionbudgets",
        true
    )]
    #[case(
        "rbac.authorization.k8s.io/v1",
        "ClusterRole",
        RBAC,
        "clusterroles",
        false
    )]
    #[case("apps/v1", "DaemonSet", "apps", "daemonsets", true)]
    #[case("apps/v1", "Deployment", "apps", "deployments", true)]
    #[case("v1", "Secret", "", "secrets", true)]
    #[case(
        "storage.k8s.io/v1",
        "StorageClass",
        "storage.k8s.io",
        "storageclasses",
        false
    )]
    #[case(
        "snapshot.storage.k8s.io/v1",
        "VolumeSnapshotClass",
        "snapshot.storage.k8s.io",
        "volumesnapshotclasses",
        false
    )]
    fn a_known_kind_has_its_resource_and_scope(
        #[case] api_version: &str,
        #[case] kind: &str,
        #[case] group: &str,
        #[case] plural: &str,
        #[case] namespaced: bool,
    ) {
        let (resource, is_namespaced) = api_resource(api_version, kind).unwrap();
        assert_eq!(resource.group, group);
        assert_eq!(resource.plural, plural);
        assert_eq!(resource.api_version, api_version);
        assert_eq!(is_namespaced, namespaced);
    }

    #[test]
    fn other_kinds_and_versions_are_unknown() {
        assert!(api_resource("v1", "Pod").is_none());
        assert!(api_resource("apps/v1beta1", "Deployment").is_none());
        assert!(api_resource("storage.k8s.io/v1beta1", "StorageClass").is_none());
        assert!(api_resource("storage.k8s.io/v1", "VolumeAttachment").is_none());
    }
}
