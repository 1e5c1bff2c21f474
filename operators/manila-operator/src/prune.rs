//! Pruning: the driver objects an earlier run of the operator installed that this one no
//! longer renders are deleted, so that an upgrade (or a changed configuration) leaves no stale
//! object behind — e.g. the previous release's ClusterRole shared by every sidecar, replaced
//! by one ClusterRole per sidecar.
//!
//! What a prune may delete is narrow on purpose. An object is stale only if it is
//!
//! - of one of the kinds in [`PRUNED_KINDS`] (the kinds the operator applies, minus the
//!   VolumeSnapshotClass, which snapshots refer to; StorageClasses are not among them either:
//!   PVs refer to them, and they are never deleted except to be re-created),
//! - labelled `app.kubernetes.io/managed-by: manila-csi-driver-operator`,
//! - owned by this ClusterCSIDriver (an owner reference with its uid),
//! - in the operator's namespace, if namespaced,
//! - and not among the objects the operator wants now.
//!
//! PVs, claims, snapshots, StorageClasses and objects of anyone else are never looked at.
//! The operator prunes only after every wanted object was applied, so a replacement (the
//! per-sidecar roles) exists before what it replaces goes.

use std::collections::BTreeSet;

use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, ObjectMeta, TypeMeta};

use crate::api::{MANAGED_BY, MANAGED_BY_LABEL};
use crate::apply::{Applier, ApplyError, api_message, api_resource};

/// The kinds a prune looks at (`apiVersion`, `kind`), in deletion order: workloads first, then
/// the driver object and what the workloads used.
pub const PRUNED_KINDS: &[(&str, &str)] = &[
    ("apps/v1", "Deployment"),
    ("apps/v1", "DaemonSet"),
    ("storage.k8s.io/v1", "CSIDriver"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("v1", "ServiceAccount"),
    ("v1", "Secret"),
];

/// A prune could not list or delete.
#[derive(Debug, thiserror::Error)]
pub enum PruneError {
    /// Listing the operator's objects of a kind failed.
    #[error("listing the operator's {kind}s: {}", api_message(source))]
    List {
        /// The kind.
        kind: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Deleting a stale object failed.
    #[error(transparent)]
    Delete(#[from] ApplyError),
}

/// One object by identity: kind, namespace (namespaced kinds only) and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ObjectKey {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// Namespace, for namespaced objects.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl ObjectKey {
    /// The key of `object`.
    pub fn of(object: &DynamicObject) -> ObjectKey {
        let types = object.types.clone().unwrap_or_default();
        ObjectKey {
            api_version: types.api_version,
            kind: types.kind,
            namespace: object.metadata.namespace.clone(),
            name: object.metadata.name.clone().unwrap_or_default(),
        }
    }

    /// `Kind namespace/name`, or `Kind name` for cluster-scoped objects.
    pub fn describe(&self) -> String {
        match &self.namespace {
            Some(namespace) => format!("{} {namespace}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }

    /// An object to hand to [`Applier::delete`].
    fn object(&self) -> DynamicObject {
        DynamicObject {
            types: Some(TypeMeta {
                api_version: self.api_version.clone(),
                kind: self.kind.clone(),
            }),
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: self.namespace.clone(),
                ..Default::default()
            },
            data: serde_json::Value::Null,
        }
    }
}

/// Whether `meta` is the operator's: the `managed-by` label and an owner reference to
/// `owner_uid`.
fn is_ours(meta: &ObjectMeta, owner_uid: &str) -> bool {
    let labelled = meta
        .labels
        .as_ref()
        .and_then(|l| l.get(MANAGED_BY_LABEL))
        .is_some_and(|v| v == MANAGED_BY);
    let owned = meta
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.uid == owner_uid);
    labelled && owned
}

/// The stale objects among `found` (objects of [`PRUNED_KINDS`] as listed, with their
/// metadata): the operator's (see [`is_ours`]), in `namespace` when namespaced, and not in
/// `wanted`. In the order of `found`.
pub fn stale(
    found: &[(ObjectKey, ObjectMeta)],
    wanted: &BTreeSet<ObjectKey>,
    owner_uid: &str,
    namespace: &str,
) -> Vec<ObjectKey> {
    found
        .iter()
        .filter(|(key, meta)| {
            let prunable = PRUNED_KINDS
                .iter()
                .any(|(v, k)| *v == key.api_version && *k == key.kind);
            let in_scope = key.namespace.as_deref().is_none_or(|ns| ns == namespace);
            prunable && in_scope && is_ours(meta, owner_uid) && !wanted.contains(key)
        })
        .map(|(key, _)| key.clone())
        .collect()
}

/// Lists the operator's objects of [`PRUNED_KINDS`] (by label; namespaced kinds in
/// `namespace` only), in deletion order.
async fn list_managed(
    client: &Client,
    namespace: &str,
) -> Result<Vec<(ObjectKey, ObjectMeta)>, PruneError> {
    let managed = ListParams::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}"));
    let mut found = Vec::new();
    for (api_version, kind) in PRUNED_KINDS {
        let Some((resource, namespaced)) = api_resource(api_version, kind) else {
            continue;
        };
        let api: Api<DynamicObject> = if namespaced {
            Api::namespaced_with(client.clone(), namespace, &resource)
        } else {
            Api::all_with(client.clone(), &resource)
        };
        let list = api
            .list_metadata(&managed)
            .await
            .map_err(|source| PruneError::List {
                kind: kind.to_string(),
                source,
            })?;
        found.extend(list.items.into_iter().map(|object| {
            let key = ObjectKey {
                api_version: api_version.to_string(),
                kind: kind.to_string(),
                namespace: namespaced.then(|| namespace.to_string()),
                name: object.metadata.name.clone().unwrap_or_default(),
            };
            (key, object.metadata)
        }));
    }
    Ok(found)
}

/// Deletes the operator's objects that are not in `wanted` (see the module docs) and
/// returns those it deleted (not those already gone). Stops at the first failure.
pub async fn prune(
    client: &Client,
    applier: &Applier,
    namespace: &str,
    owner_uid: &str,
    wanted: &BTreeSet<ObjectKey>,
) -> Result<Vec<ObjectKey>, PruneError> {
    let found = list_managed(client, namespace).await?;
    let mut deleted = Vec::new();
    for key in stale(&found, wanted, owner_uid, namespace) {
        if applier.delete(&key.object()).await? {
            tracing::info!(object = %key.describe(), "pruned: no longer installed by this release");
            deleted.push(key);
        }
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    use super::*;
    use crate::assets::{AssetInputs, render};
    use crate::config::OperatorConfig;
    use crate::release::Release;

    const OWNER: &str = "uid-of-the-clustercsidriver";
    const NS: &str = "manila-csi";

    fn meta(labelled: bool, owner: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            labels: labelled
                .then(|| BTreeMap::from([(MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string())])),
            owner_references: owner.map(|uid| {
                vec![OwnerReference {
                    api_version: "operator.openshift.io/v1".into(),
                    kind: "ClusterCSIDriver".into(),
                    name: "manila.csi.openstack.org".into(),
                    uid: uid.into(),
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                }]
            }),
            ..Default::default()
        }
    }

    fn key(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> ObjectKey {
        ObjectKey {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.map(str::to_string),
            name: name.into(),
        }
    }

    fn rendered(release: Release) -> BTreeSet<ObjectKey> {
        let mut config = OperatorConfig::new(NS);
        config.set_release(release);
        render(&AssetInputs {
            config: &config,
            log_level: crate::api::LogLevel::Normal,
            credentials_hash: String::new(),
            snapshot_crds_present: true,
        })
        .unwrap()
        .iter()
        .map(ObjectKey::of)
        .collect()
    }

    #[test]
    fn every_pruned_kind_is_applied_by_the_operator_and_none_holds_volumes() {
        for (api_version, kind) in PRUNED_KINDS {
            assert!(api_resource(api_version, kind).is_some(), "{kind}");
            assert!(
                !matches!(
                    *kind,
                    "StorageClass"
                        | "VolumeSnapshotClass"
                        | "PersistentVolume"
                        | "PersistentVolumeClaim"
                        | "VolumeSnapshot"
                        | "VolumeSnapshotContent"
                ),
                "{kind}"
            );
        }
    }

    #[test]
    fn only_the_operators_own_objects_that_are_no_longer_wanted_are_stale() {
        let role = "rbac.authorization.k8s.io/v1";
        let wanted = BTreeSet::from([key(role, "ClusterRole", None, "wanted")]);
        let found = vec![
            // Stale: ours, not wanted.
            (
                key(role, "ClusterRole", None, "old"),
                meta(true, Some(OWNER)),
            ),
            (
                key("apps/v1", "Deployment", Some(NS), "old"),
                meta(true, Some(OWNER)),
            ),
            // Wanted.
            (
                key(role, "ClusterRole", None, "wanted"),
                meta(true, Some(OWNER)),
            ),
            // Not labelled, owned by someone else, not owned at all.
            (
                key(role, "ClusterRole", None, "user"),
                meta(false, Some(OWNER)),
            ),
            (
                key(role, "ClusterRole", None, "other-owner"),
                meta(true, Some("another-uid")),
            ),
            (key(role, "ClusterRole", None, "orphan"), meta(true, None)),
            // In another namespace.
            (
                key("apps/v1", "Deployment", Some("elsewhere"), "old"),
                meta(true, Some(OWNER)),
            ),
            // Kinds a prune never deletes, even when ours and not wanted.
            (
                key("storage.k8s.io/v1", "StorageClass", None, "csi-manila-gone"),
                meta(true, Some(OWNER)),
            ),
            (
                key(
                    "snapshot.storage.k8s.io/v1",
                    "VolumeSnapshotClass",
                    None,
                    "csi-manila-snapclass",
                ),
                meta(true, Some(OWNER)),
            ),
            (
                key("v1", "PersistentVolume", None, "pvc-1"),
                meta(true, Some(OWNER)),
            ),
        ];
        assert_eq!(
            stale(&found, &wanted, OWNER, NS),
            vec![
                key(role, "ClusterRole", None, "old"),
                key("apps/v1", "Deployment", Some(NS), "old"),
            ]
        );
    }

    #[test]
    fn after_the_previous_release_the_current_one_prunes_exactly_the_shared_sidecar_role() {
        let previous = rendered(Release::Previous);
        let current = rendered(Release::Current);
        let found: Vec<(ObjectKey, ObjectMeta)> = previous
            .iter()
            .map(|k| (k.clone(), meta(true, Some(OWNER))))
            .collect();
        let role = "rbac.authorization.k8s.io/v1";
        assert_eq!(
            stale(&found, &current, OWNER, NS),
            vec![
                key(
                    role,
                    "ClusterRole",
                    None,
                    "openstack-manila-csi-controllerplugin"
                ),
                key(
                    role,
                    "ClusterRoleBinding",
                    None,
                    "openstack-manila-csi-controllerplugin"
                ),
            ]
        );
        // The other way round (a downgrade) would prune the per-sidecar roles; the snapshot
        // class is never a candidate.
        let found: Vec<(ObjectKey, ObjectMeta)> = current
            .iter()
            .map(|k| (k.clone(), meta(true, Some(OWNER))))
            .collect();
        let names: Vec<String> = stale(&found, &previous, OWNER, NS)
            .iter()
            .map(ObjectKey::describe)
            .collect();
        assert_eq!(names.len(), 6, "{names:?}");
        assert!(names.iter().all(|n| n.contains("provisioner")
            || n.contains("resizer")
            || n.contains("snapshotter")));
    }

    #[test]
    fn a_key_describes_itself_and_becomes_a_deletable_object() {
        let namespaced = key("apps/v1", "Deployment", Some(NS), "d");
        assert_eq!(namespaced.describe(), "Deployment manila-csi/d");
        let cluster = key("rbac.authorization.k8s.io/v1", "ClusterRole", None, "r");
        assert_eq!(cluster.describe(), "ClusterRole r");
        assert_eq!(ObjectKey::of(&cluster.object()), cluster);
        assert_eq!(ObjectKey::of(&namespaced.object()), namespaced);
    }

    /// A fake API server: a GET of a collection answers its items as a metadata list, a
    /// DELETE of an item removes it (404 when it is not there); every request is recorded.
    #[derive(Default)]
    struct FakeApi {
        collections: BTreeMap<String, Vec<ObjectMeta>>,
        seen: Vec<(String, String, String)>,
    }

    fn client(state: std::sync::Arc<std::sync::Mutex<FakeApi>>) -> Client {
        use bytes::Bytes;
        use http_body_util::Full;
        use serde_json::json;
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let state = state.clone();
            async move {
                let path = request.uri().path().to_string();
                let query = request.uri().query().unwrap_or("").to_string();
                let method = request.method().to_string();
                let mut state = state.lock().unwrap();
                state.seen.push((method.clone(), path.clone(), query));
                let not_found = json!({"kind": "Status", "apiVersion": "v1",
                    "status": "Failure", "reason": "NotFound", "code": 404});
                let (code, body) = match method.as_str() {
                    "GET" => {
                        let items: Vec<_> = state
                            .collections
                            .get(&path)
                            .into_iter()
                            .flatten()
                            .map(|meta| {
                                json!({"apiVersion": "meta.k8s.io/v1",
                                "kind": "PartialObjectMetadata", "metadata": meta})
                            })
                            .collect();
                        (
                            200,
                            json!({"apiVersion": "meta.k8s.io/v1",
                            "kind": "PartialObjectMetadataList",
                            "metadata": {"resourceVersion": "1"}, "items": items}),
                        )
                    }
                    "DELETE" => {
                        let (collection, name) = path.rsplit_once('/').unwrap();
                        let items = state.collections.entry(collection.to_string()).or_default();
                        match items.iter().position(|m| m.name.as_deref() == Some(name)) {
                            Some(i) => {
                                items.remove(i);
                                (
                                    200,
                                    json!({"kind": "Status", "apiVersion": "v1",
                                    "status": "Success", "code": 200}),
                                )
                            }
                            None => (404, not_found),
                        }
                    }
                    other => panic!("unexpected {other} {path}"),
                };
                Ok::<_, std::convert::Infallible>(
                    http::Response::builder()
                        .status(code)
                        .header(http::header::CONTENT_TYPE, "application/json")
                        .body(Full::new(Bytes::from(serde_json::to_vec(&body).unwrap())))
                        .unwrap(),
                )
            }
        });
        Client::new(service, "default")
    }

    fn named(name: &str, meta: ObjectMeta) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            ..meta
        }
    }

    #[tokio::test]
    async fn prune_lists_by_label_in_scope_and_deletes_only_stale_objects() {
        let roles = "/apis/rbac.authorization.k8s.io/v1/clusterroles";
        let bindings = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings";
        let secrets = "/api/v1/namespaces/manila-csi/secrets";
        let state = std::sync::Arc::new(std::sync::Mutex::new(FakeApi {
            collections: BTreeMap::from([
                (
                    roles.to_string(),
                    vec![
                        named("shared", meta(true, Some(OWNER))),
                        named("per-sidecar", meta(true, Some(OWNER))),
                        named("someone-elses", meta(true, Some("another-uid"))),
                    ],
                ),
                (
                    bindings.to_string(),
                    vec![named("shared", meta(true, Some(OWNER)))],
                ),
                (
                    secrets.to_string(),
                    vec![named("csi-manila-secrets", meta(true, Some(OWNER)))],
                ),
            ]),
            ..Default::default()
        }));
        let client = client(state.clone());
        let owner = OwnerReference {
            uid: OWNER.into(),
            ..Default::default()
        };
        let applier = Applier::new(client.clone(), "m", owner);
        let role = "rbac.authorization.k8s.io/v1";
        let wanted = BTreeSet::from([
            key(role, "ClusterRole", None, "per-sidecar"),
            key("v1", "Secret", Some(NS), "csi-manila-secrets"),
        ]);
        let deleted = prune(&client, &applier, NS, OWNER, &wanted).await.unwrap();
        assert_eq!(
            deleted,
            vec![
                key(role, "ClusterRoleBinding", None, "shared"),
                key(role, "ClusterRole", None, "shared"),
            ]
        );
        let state = state.lock().unwrap();
        let selector = "labelSelector=app.kubernetes.io%2Fmanaged-by%3Dmanila-csi-driver-operator";
        let lists: Vec<&str> = state
            .seen
            .iter()
            .filter(|(method, _, _)| method == "GET")
            .map(|(_, path, query)| {
                assert!(query.contains(selector), "{path}?{query}");
                path.as_str()
            })
            .collect();
        assert_eq!(lists.len(), PRUNED_KINDS.len());
        assert!(lists.contains(&"/apis/apps/v1/namespaces/manila-csi/deployments"));
        assert!(lists.contains(&roles));
        let deletes: Vec<&str> = state
            .seen
            .iter()
            .filter(|(method, _, _)| method == "DELETE")
            .map(|(_, path, _)| path.as_str())
            .collect();
        assert_eq!(
            deletes,
            [format!("{bindings}/shared"), format!("{roles}/shared")]
        );
        assert_eq!(state.collections[roles].len(), 2);
        assert_eq!(state.collections[secrets].len(), 1);
    }

    #[tokio::test]
    async fn an_object_already_gone_is_not_reported_and_a_refused_list_names_the_kind() {
        let roles = "/apis/rbac.authorization.k8s.io/v1/clusterroles";
        let state = std::sync::Arc::new(std::sync::Mutex::new(FakeApi {
            collections: BTreeMap::from([(
                roles.to_string(),
                vec![named("shared", meta(true, Some(OWNER)))],
            )]),
            ..Default::default()
        }));
        let client = client(state.clone());
        let applier = Applier::new(client.clone(), "m", OwnerReference::default());
        // Listed, then deleted by someone else before the prune gets to it.
        let found = list_managed(&client, NS).await.unwrap();
        state.lock().unwrap().collections.clear();
        let stale_keys = stale(&found, &BTreeSet::new(), OWNER, NS);
        assert_eq!(stale_keys.len(), 1);
        assert!(!applier.delete(&stale_keys[0].object()).await.unwrap());

        let error = PruneError::List {
            kind: "ClusterRole".into(),
            source: kube::Error::Api(
                kube::core::Status::failure("clusterroles is forbidden", "Forbidden")
                    .with_code(403)
                    .boxed(),
            ),
        };
        assert_eq!(
            error.to_string(),
            "listing the operator's ClusterRoles: clusterroles is forbidden (Forbidden, 403)"
        );
    }
}
