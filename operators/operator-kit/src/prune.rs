//! Pruning: the driver objects an earlier run of the operator installed that this one no
//! longer renders are deleted, so that an upgrade (or a changed configuration) leaves no stale
//! object behind — e.g. the Manila operator's previous release's ClusterRole shared by every
//! sidecar, replaced by one ClusterRole per sidecar.
//!
//! What a prune may delete is narrow on purpose. An object is stale only if it is
//!
//! - of one of the kinds the operator names ([`Scope::kinds`]; only kinds of
//!   [`PRUNABLE_KINDS`]: never a Namespace or a VolumeSnapshotClass, which snapshots refer to;
//!   StorageClasses are not among them either: PVs refer to them, and they are never deleted
//!   except to be re-created),
//! - labelled with the operator's `app.kubernetes.io/managed-by` value,
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

use crate::apply::{Applier, ApplyError, api_message};
use crate::identity::OperatorIdentity;
use crate::kinds::api_resource;

/// The kinds a prune may look at (`apiVersion`, `kind`), in deletion order: workloads and
/// their disruption budget first, then the driver object and what the workloads used. An
/// operator prunes those of them it applies and may list and delete ([`Scope::kinds`]).
pub const PRUNABLE_KINDS: &[(&str, &str)] = &[
    ("apps/v1", "Deployment"),
    ("apps/v1", "DaemonSet"),
    ("policy/v1", "PodDisruptionBudget"),
    ("storage.k8s.io/v1", "CSIDriver"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("v1", "ServiceAccount"),
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
];

/// What one operator's prune looks at.
#[derive(Clone, Copy, Debug)]
pub struct Scope<'a> {
    /// Whose `managed-by` label an object must carry.
    pub identity: &'a OperatorIdentity,
    /// The namespace of its namespaced objects.
    pub namespace: &'a str,
    /// The uid of the ClusterCSIDriver that must own an object.
    pub owner_uid: &'a str,
    /// The kinds it prunes (`Deployment`, …); they go in the order of [`PRUNABLE_KINDS`],
    /// and a kind not in it is ignored.
    pub kinds: &'a [&'a str],
}

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

impl Scope<'_> {
    /// Whether `meta` is the operator's: its `managed-by` label and an owner reference to
    /// the owner.
    fn is_ours(&self, meta: &ObjectMeta) -> bool {
        let owned = meta
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.uid == self.owner_uid);
        self.identity.is_managed(meta.labels.as_ref()) && owned
    }

    /// The kinds it prunes (`apiVersion`, `kind`), in deletion order.
    pub fn prunable_kinds(&self) -> impl Iterator<Item = &(&'static str, &'static str)> {
        PRUNABLE_KINDS
            .iter()
            .filter(|(_, kind)| self.kinds.contains(kind))
    }
}

/// The stale objects among `found` (objects as listed, with their metadata): of the scope's
/// prunable kinds, the operator's (its label, owned by the owner), in the scope's namespace
/// when namespaced, and not in `wanted`. In the order of `found`.
pub fn stale(
    found: &[(ObjectKey, ObjectMeta)],
    wanted: &BTreeSet<ObjectKey>,
    scope: &Scope<'_>,
) -> Vec<ObjectKey> {
    found
        .iter()
        .filter(|(key, meta)| {
            let prunable = scope
                .prunable_kinds()
                .any(|(v, k)| *v == key.api_version && *k == key.kind);
            let in_scope = key
                .namespace
                .as_deref()
                .is_none_or(|ns| ns == scope.namespace);
            prunable && in_scope && scope.is_ours(meta) && !wanted.contains(key)
        })
        .map(|(key, _)| key.clone())
        .collect()
}

/// Lists the operator's objects of the scope's kinds (by its label; namespaced kinds in its
/// namespace only), in deletion order.
async fn list_managed(
    client: &Client,
    scope: &Scope<'_>,
) -> Result<Vec<(ObjectKey, ObjectMeta)>, PruneError> {
    let managed = ListParams::default().labels(&scope.identity.managed_by_selector());
    let namespace = scope.namespace;
    let mut found = Vec::new();
    for (api_version, kind) in scope.prunable_kinds() {
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

/// Deletes the operator's objects in `scope` that are not in `wanted` (see the module docs)
/// and returns those it deleted (not those already gone). Stops at the first failure.
pub async fn prune(
    client: &Client,
    applier: &Applier,
    scope: &Scope<'_>,
    wanted: &BTreeSet<ObjectKey>,
) -> Result<Vec<ObjectKey>, PruneError> {
    let found = list_managed(client, scope).await?;
    let mut deleted = Vec::new();
    for key in stale(&found, wanted, scope) {
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
    use crate::api::MANAGED_BY_LABEL;
    use crate::identity::TEST_IDENTITY;

    const OWNER: &str = "uid-of-the-clustercsidriver";
    const NS: &str = "example-ns";
    /// The kinds the test operator names: every prunable kind, and two kinds it applies
    /// that are not prunable (naming them does not make them so).
    static KINDS: std::sync::LazyLock<Vec<&str>> = std::sync::LazyLock::new(|| {
        let mut kinds: Vec<&str> = PRUNABLE_KINDS.iter().map(|(_, kind)| *kind).collect();
        kinds.push("VolumeSnapshotClass");
        kinds.push("StorageClass");
        kinds
    });

    fn scope() -> Scope<'static> {
        Scope {
            identity: &TEST_IDENTITY,
            namespace: NS,
            owner_uid: OWNER,
            kinds: &KINDS,
        }
    }

    fn meta(labelled: bool, owner: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            labels: labelled.then(|| TEST_IDENTITY.labels()),
            owner_references: owner.map(|uid| {
                vec![OwnerReference {
                    api_version: "operator.openshift.io/v1".into(),
                    kind: "ClusterCSIDriver".into(),
                    name: "example.csi.test".into(),
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

    #[test]
    fn every_prunable_kind_can_be_applied_and_none_holds_volumes_or_everything() {
        for (api_version, kind) in PRUNABLE_KINDS {
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
                        | "Namespace"
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
            // Another operator's label (the Manila operator's), owned by the same uid.
            (
                key(role, "ClusterRole", None, "another-operators"),
                ObjectMeta {
                    labels: Some(BTreeMap::from([(
                        MANAGED_BY_LABEL.to_string(),
                        "manila-csi-driver-operator".to_string(),
                    )])),
                    ..meta(false, Some(OWNER))
                },
            ),
            // In another namespace.
            (
                key("apps/v1", "Deployment", Some("elsewhere"), "old"),
                meta(true, Some(OWNER)),
            ),
            // Kinds a prune never deletes, even when ours and not wanted.
            (
                key("storage.k8s.io/v1", "StorageClass", None, "example-gone"),
                meta(true, Some(OWNER)),
            ),
            (
                key(
                    "snapshot.storage.k8s.io/v1",
                    "VolumeSnapshotClass",
                    None,
                    "example-snapclass",
                ),
                meta(true, Some(OWNER)),
            ),
            (
                key("v1", "PersistentVolume", None, "pvc-1"),
                meta(true, Some(OWNER)),
            ),
        ];
        assert_eq!(
            stale(&found, &wanted, &scope()),
            vec![
                key(role, "ClusterRole", None, "old"),
                key("apps/v1", "Deployment", Some(NS), "old"),
            ]
        );
    }

    #[test]
    fn a_key_describes_itself_and_becomes_a_deletable_object() {
        let namespaced = key("apps/v1", "Deployment", Some(NS), "d");
        assert_eq!(namespaced.describe(), "Deployment example-ns/d");
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
        let secrets = "/api/v1/namespaces/example-ns/secrets";
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
                    vec![named("example-secrets", meta(true, Some(OWNER)))],
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
            key("v1", "Secret", Some(NS), "example-secrets"),
        ]);
        let deleted = prune(&client, &applier, &scope(), &wanted).await.unwrap();
        assert_eq!(
            deleted,
            vec![
                key(role, "ClusterRoleBinding", None, "shared"),
                key(role, "ClusterRole", None, "shared"),
            ]
        );
        let state = state.lock().unwrap();
        let selector = "labelSelector=app.kubernetes.io%2Fmanaged-by%3Dexample-operator";
        let lists: Vec<&str> = state
            .seen
            .iter()
            .filter(|(method, _, _)| method == "GET")
            .map(|(_, path, query)| {
                assert!(query.contains(selector), "{path}?{query}");
                path.as_str()
            })
            .collect();
        // Every kind of the scope but the snapshot class and the StorageClass, which are not
        // prunable.
        assert_eq!(lists.len(), KINDS.len() - 2);
        assert!(lists.contains(&"/apis/apps/v1/namespaces/example-ns/deployments"));
        assert!(!lists.iter().any(|l| l.contains("snapshot")), "{lists:?}");
        assert!(
            !lists.iter().any(|l| l.contains("storageclasses")),
            "{lists:?}"
        );
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
        let found = list_managed(&client, &scope()).await.unwrap();
        state.lock().unwrap().collections.clear();
        let stale_keys = stale(&found, &BTreeSet::new(), &scope());
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
