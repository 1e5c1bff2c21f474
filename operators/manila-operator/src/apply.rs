//! Server-side apply of the driver's objects, each owned by the ClusterCSIDriver: the
//! garbage collector removes them with it, and the controller's watches see every change of
//! a child (a deleted or edited child is put back by the next reconcile).
//!
//! The owner is cluster-scoped, so it may own both cluster-scoped and namespaced objects.
//! Each object's API is looked up in a static table of the kinds the operator applies
//! ([`api_resource`]): no discovery round trip, and an object of any other kind is an error
//! rather than a surprise.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams,
};

/// Applying or deleting an object failed. Every variant names the object as
/// `Kind namespace/name` (`Kind name` for cluster-scoped ones).
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The object's kind is not one the operator manages.
    #[error("{what}: the operator does not manage objects of kind {kind}")]
    UnknownKind {
        /// `Kind namespace/name`.
        what: String,
        /// Its apiVersion/kind.
        kind: String,
    },
    /// The object cannot be sent as it is (no name, or a namespaced kind without namespace).
    #[error("{what}: {reason}")]
    Invalid {
        /// `Kind namespace/name`.
        what: String,
        /// What is missing.
        reason: String,
    },
    /// The API refused.
    #[error("{action} {what}: {}", api_message(source))]
    Kube {
        /// `applying`, `reading`, `deleting`.
        action: &'static str,
        /// `Kind namespace/name`.
        what: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

/// The API's own words for an error: its message, reason and code for a refusal, the
/// error's text otherwise (kube's text of an API error also dumps the whole Status).
pub(crate) fn api_message(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => {
            let mut text = status.message.clone();
            let details: Vec<String> = [
                (!status.reason.is_empty()).then(|| status.reason.clone()),
                (status.code != 0).then(|| status.code.to_string()),
            ]
            .into_iter()
            .flatten()
            .collect();
            if !details.is_empty() {
                text.push_str(&format!(" ({})", details.join(", ")));
            }
            text
        }
        other => other.to_string(),
    }
}

/// What an apply did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The object did not exist.
    Created,
    /// The object changed (its `resourceVersion` moved).
    Updated,
    /// Nothing changed.
    Unchanged,
}

/// One applied object.
#[derive(Clone, Debug)]
pub struct Applied {
    /// `Deployment`, `DaemonSet`, ….
    pub kind: String,
    /// Namespace, for namespaced objects.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// What happened.
    pub outcome: Outcome,
    /// `metadata.generation` after the apply.
    pub generation: Option<i64>,
}

/// The kinds the operator applies: (group, version, kind, plural, namespaced). The rendered
/// assets, the driver Secret, and nothing else (a test checks the assets against it).
const KINDS: &[(&str, &str, &str, &str, bool)] = &[
    ("", "v1", "ServiceAccount", "serviceaccounts", true),
    ("", "v1", "Secret", "secrets", true),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
    ),
    ("rbac.authorization.k8s.io", "v1", "Role", "roles", true),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        true,
    ),
    ("storage.k8s.io", "v1", "CSIDriver", "csidrivers", false),
    ("apps", "v1", "Deployment", "deployments", true),
    ("apps", "v1", "DaemonSet", "daemonsets", true),
    (
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        true,
    ),
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

/// The API resource of `api_version`/`kind` and whether it is namespaced, for the kinds the
/// operator applies; `None` for any other kind.
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

/// `Kind namespace/name` or `Kind name`.
fn describe(object: &DynamicObject) -> String {
    let kind = object.types.as_ref().map(|t| t.kind.as_str()).unwrap_or("");
    let name = object.metadata.name.as_deref().unwrap_or("");
    match &object.metadata.namespace {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// What is sent for `object`: owned by `owner` only, without the server-maintained fields a
/// read-back object carries (an apply with a stale `resourceVersion` would be refused).
fn prepared(object: &DynamicObject, owner: &OwnerReference) -> DynamicObject {
    let mut object = object.clone();
    let metadata = &mut object.metadata;
    metadata.owner_references = Some(vec![owner.clone()]);
    metadata.managed_fields = None;
    metadata.resource_version = None;
    metadata.uid = None;
    metadata.creation_timestamp = None;
    metadata.generation = None;
    object
}

/// Created, Updated or Unchanged from the `resourceVersion` before (`None`: no object) and
/// after the apply.
fn outcome(before: Option<Option<&str>>, after: Option<&str>) -> Outcome {
    match before {
        None => Outcome::Created,
        Some(before) if before != after => Outcome::Updated,
        Some(_) => Outcome::Unchanged,
    }
}

/// Applies objects with one field manager, each owned by one owner.
#[derive(Clone)]
pub struct Applier {
    client: Client,
    field_manager: String,
    owner: OwnerReference,
}

impl Applier {
    /// An applier for `field_manager`; every applied object gets `owner` as owner reference.
    pub fn new(client: Client, field_manager: &str, owner: OwnerReference) -> Self {
        Applier {
            client,
            field_manager: field_manager.to_string(),
            owner,
        }
    }

    /// The API of `object`'s kind (in its namespace), its name, and `Kind namespace/name`.
    fn api(
        &self,
        object: &DynamicObject,
    ) -> Result<(Api<DynamicObject>, String, String), ApplyError> {
        let what = describe(object);
        let types = object.types.clone().unwrap_or_default();
        let Some((resource, namespaced)) = api_resource(&types.api_version, &types.kind) else {
            return Err(ApplyError::UnknownKind {
                what,
                kind: format!("{}/{}", types.api_version, types.kind),
            });
        };
        let Some(name) = object.metadata.name.clone().filter(|n| !n.is_empty()) else {
            return Err(ApplyError::Invalid {
                what,
                reason: "the object has no metadata.name".into(),
            });
        };
        let api = match (namespaced, object.metadata.namespace.as_deref()) {
            (true, Some(ns)) if !ns.is_empty() => {
                Api::namespaced_with(self.client.clone(), ns, &resource)
            }
            (true, _) => {
                return Err(ApplyError::Invalid {
                    what,
                    reason: format!(
                        "{} is namespaced but the object has no namespace",
                        types.kind
                    ),
                });
            }
            (false, _) => Api::all_with(self.client.clone(), &resource),
        };
        Ok((api, name, what))
    }

    /// Server-side applies `object` (forcing conflicts: the operator owns these fields),
    /// owned by the applier's owner. Created, Updated or Unchanged compares the
    /// `resourceVersion` before and after.
    pub async fn apply(&self, object: &DynamicObject) -> Result<Applied, ApplyError> {
        let (api, name, what) = self.api(object)?;
        let before = api
            .get_metadata_opt(&name)
            .await
            .map_err(|source| ApplyError::Kube {
                action: "reading",
                what: what.clone(),
                source,
            })?;
        let object = prepared(object, &self.owner);
        let params = PatchParams::apply(&self.field_manager).force();
        let after = api
            .patch(&name, &params, &Patch::Apply(&object))
            .await
            .map_err(|source| ApplyError::Kube {
                action: "applying",
                what,
                source,
            })?;
        let outcome = outcome(
            before
                .as_ref()
                .map(|b| b.metadata.resource_version.as_deref()),
            after.metadata.resource_version.as_deref(),
        );
        Ok(Applied {
            kind: object.types.map(|t| t.kind).unwrap_or_default(),
            namespace: object.metadata.namespace,
            name,
            outcome,
            generation: after.metadata.generation,
        })
    }

    /// Deletes `object` (in the background: the garbage collector removes its dependents,
    /// such as a Deployment's ReplicaSets); `Ok(false)` when it was already gone.
    pub async fn delete(&self, object: &DynamicObject) -> Result<bool, ApplyError> {
        let (api, name, what) = self.api(object)?;
        match api.delete(&name, &DeleteParams::background()).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
            Err(source) => Err(ApplyError::Kube {
                action: "deleting",
                what,
                source,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    use serde_json::{Value, json};

    use super::*;

    /// One request the fake API server saw.
    #[derive(Debug, Clone)]
    struct Seen {
        method: String,
        path: String,
        query: BTreeMap<String, String>,
        content_type: String,
        body: Value,
    }

    /// A fake API server holding objects by URL path: GET answers them (404 without),
    /// PATCH stores the body with a bumped resourceVersion unless `changes` is false and the
    /// object exists, DELETE removes them; `refuse` answers every PATCH with that Status.
    #[derive(Default)]
    struct FakeApi {
        objects: BTreeMap<String, Value>,
        seen: Vec<Seen>,
        next_version: u64,
        unchanged: bool,
        refuse: Option<Value>,
    }

    fn client(state: Arc<Mutex<FakeApi>>) -> Client {
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let state = state.clone();
            async move {
                let (parts, body) = request.into_parts();
                let bytes = body.collect().await.unwrap().to_bytes();
                let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                let path = parts.uri.path().to_string();
                let query = parts
                    .uri
                    .query()
                    .unwrap_or("")
                    .split('&')
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect();
                let content_type = parts
                    .headers
                    .get(http::header::CONTENT_TYPE)
                    .map(|v| v.to_str().unwrap().to_string())
                    .unwrap_or_default();
                let mut state = state.lock().unwrap();
                state.seen.push(Seen {
                    method: parts.method.to_string(),
                    path: path.clone(),
                    query,
                    content_type,
                    body: body.clone(),
                });
                let not_found = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                    "message": "not found", "reason": "NotFound", "code": 404});
                let (code, answer) = match parts.method.as_str() {
                    "GET" => match state.objects.get(&path) {
                        Some(object) => (200, object.clone()),
                        None => (404, not_found),
                    },
                    "PATCH" => {
                        if let Some(refusal) = state.refuse.clone() {
                            let code = refusal["code"].as_u64().unwrap() as u16;
                            (code, refusal)
                        } else if state.unchanged && state.objects.contains_key(&path) {
                            (200, state.objects[&path].clone())
                        } else {
                            state.next_version += 1;
                            let mut stored = body;
                            stored["metadata"]["resourceVersion"] =
                                json!(state.next_version.to_string());
                            stored["metadata"]["generation"] = json!(state.next_version);
                            state.objects.insert(path, stored.clone());
                            (200, stored)
                        }
                    }
                    "DELETE" => match state.objects.remove(&path) {
                        Some(_) => (
                            200,
                            json!({"kind": "Status", "apiVersion": "v1",
                            "status": "Success", "code": 200}),
                        ),
                        None => (404, not_found),
                    },
                    other => panic!("unexpected {other} {path}"),
                };
                Ok::<_, std::convert::Infallible>(
                    http::Response::builder()
                        .status(code)
                        .header(http::header::CONTENT_TYPE, "application/json")
                        .body(Full::new(Bytes::from(serde_json::to_vec(&answer).unwrap())))
                        .unwrap(),
                )
            }
        });
        Client::new(service, "default")
    }

    fn owner() -> OwnerReference {
        OwnerReference {
            api_version: "operator.openshift.io/v1".into(),
            kind: "ClusterCSIDriver".into(),
            name: "manila.csi.openstack.org".into(),
            uid: "0000-1111".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    fn object(value: Value) -> DynamicObject {
        serde_json::from_value(value).unwrap()
    }

    fn daemon_set() -> DynamicObject {
        object(json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "csi-nodeplugin-nfsplugin", "namespace": "manila-csi"},
            "spec": {"template": {"spec": {"containers": []}}},
        }))
    }

    #[test]
    fn every_rendered_kind_is_known_with_its_scope() {
        let config = crate::OperatorConfig::new("ns");
        let inputs = crate::assets::AssetInputs {
            config: &config,
            log_level: crate::api::LogLevel::Normal,
            credentials_hash: String::new(),
            snapshot_crds_present: true,
        };
        let objects = crate::assets::render(&inputs).unwrap();
        assert!(!objects.is_empty());
        for object in objects {
            let types = object.types.clone().unwrap();
            let (_, namespaced) = api_resource(&types.api_version, &types.kind)
                .unwrap_or_else(|| panic!("{}/{}", types.api_version, types.kind));
            assert_eq!(
                object.metadata.namespace.is_some(),
                namespaced,
                "{}",
                describe(&object)
            );
        }
    }

    #[test]
    fn resources_resolve_group_version_and_plural() {
        let (resource, namespaced) = api_resource("apps/v1", "Deployment").unwrap();
        assert_eq!(
            (
                resource.group.as_str(),
                resource.plural.as_str(),
                namespaced
            ),
            ("apps", "deployments", true)
        );
        let (resource, namespaced) = api_resource("v1", "Secret").unwrap();
        assert_eq!(
            (
                resource.group.as_str(),
                resource.api_version.as_str(),
                namespaced
            ),
            ("", "v1", true)
        );
        let (resource, namespaced) =
            api_resource("snapshot.storage.k8s.io/v1", "VolumeSnapshotClass").unwrap();
        assert_eq!(
            (resource.plural.as_str(), namespaced),
            ("volumesnapshotclasses", false)
        );
        assert!(api_resource("apps/v1beta1", "Deployment").is_none());
        assert!(api_resource("v1", "Pod").is_none());
    }

    #[test]
    fn the_sent_object_is_owned_and_free_of_server_fields() {
        let mut read_back = daemon_set();
        read_back.metadata.resource_version = Some("42".into());
        read_back.metadata.uid = Some("abc".into());
        read_back.metadata.generation = Some(3);
        read_back.metadata.managed_fields = Some(vec![Default::default()]);
        read_back.metadata.owner_references = Some(vec![OwnerReference {
            name: "someone-else".into(),
            ..owner()
        }]);
        let sent = prepared(&read_back, &owner());
        assert_eq!(sent.metadata.owner_references, Some(vec![owner()]));
        assert!(sent.metadata.resource_version.is_none());
        assert!(sent.metadata.uid.is_none());
        assert!(sent.metadata.generation.is_none());
        assert!(sent.metadata.managed_fields.is_none());
        assert_eq!(sent.data, read_back.data);
    }

    #[test]
    fn the_outcome_follows_the_resource_version() {
        assert_eq!(outcome(None, Some("1")), Outcome::Created);
        assert_eq!(outcome(Some(Some("1")), Some("2")), Outcome::Updated);
        assert_eq!(outcome(Some(Some("2")), Some("2")), Outcome::Unchanged);
    }

    #[tokio::test]
    async fn apply_is_a_forced_server_side_apply_created_then_updated_then_unchanged() {
        let state = Arc::new(Mutex::new(FakeApi::default()));
        let applier = Applier::new(client(state.clone()), "manila-csi-driver-operator", owner());

        let applied = applier.apply(&daemon_set()).await.unwrap();
        assert_eq!(applied.outcome, Outcome::Created);
        assert_eq!(
            (
                applied.kind.as_str(),
                applied.namespace.as_deref(),
                applied.name.as_str()
            ),
            ("DaemonSet", Some("manila-csi"), "csi-nodeplugin-nfsplugin")
        );
        assert_eq!(applied.generation, Some(1));
        {
            let state = state.lock().unwrap();
            let path = "/apis/apps/v1/namespaces/manila-csi/daemonsets/csi-nodeplugin-nfsplugin";
            let methods: Vec<_> = state
                .seen
                .iter()
                .map(|s| (s.method.as_str(), s.path.as_str()))
                .collect();
            assert_eq!(methods, vec![("GET", path), ("PATCH", path)]);
            let patch = &state.seen[1];
            assert_eq!(patch.content_type, "application/apply-patch+yaml");
            assert_eq!(
                patch.query.get("fieldManager").map(String::as_str),
                Some("manila-csi-driver-operator")
            );
            assert_eq!(patch.query.get("force").map(String::as_str), Some("true"));
            assert_eq!(
                patch.body["metadata"]["ownerReferences"],
                json!([{"apiVersion": "operator.openshift.io/v1", "kind": "ClusterCSIDriver",
                    "name": "manila.csi.openstack.org", "uid": "0000-1111",
                    "controller": true, "blockOwnerDeletion": true}])
            );
        }

        let applied = applier.apply(&daemon_set()).await.unwrap();
        assert_eq!(applied.outcome, Outcome::Updated);
        assert_eq!(applied.generation, Some(2));

        state.lock().unwrap().unchanged = true;
        let applied = applier.apply(&daemon_set()).await.unwrap();
        assert_eq!(applied.outcome, Outcome::Unchanged);
        assert_eq!(applied.generation, Some(2));
    }

    #[tokio::test]
    async fn cluster_scoped_objects_go_to_the_cluster_path() {
        let state = Arc::new(Mutex::new(FakeApi::default()));
        let applier = Applier::new(client(state.clone()), "m", owner());
        let driver = object(json!({
            "apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
            "metadata": {"name": "manila.csi.openstack.org"},
            "spec": {"attachRequired": false},
        }));
        applier.apply(&driver).await.unwrap();
        let state = state.lock().unwrap();
        assert_eq!(
            state.seen[1].path,
            "/apis/storage.k8s.io/v1/csidrivers/manila.csi.openstack.org"
        );
    }

    #[tokio::test]
    async fn a_refusal_names_kind_namespace_name_and_the_api_message() {
        let state = Arc::new(Mutex::new(FakeApi {
            refuse: Some(
                json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                "message": "daemonsets.apps \"csi-nodeplugin-nfsplugin\" is forbidden: no",
                "reason": "Forbidden", "code": 403}),
            ),
            ..Default::default()
        }));
        let applier = Applier::new(client(state), "m", owner());
        let error = applier.apply(&daemon_set()).await.unwrap_err();
        assert_eq!(
            error.to_string(),
            "applying DaemonSet manila-csi/csi-nodeplugin-nfsplugin: daemonsets.apps \
             \"csi-nodeplugin-nfsplugin\" is forbidden: no (Forbidden, 403)"
        );
    }

    #[tokio::test]
    async fn delete_says_whether_the_object_was_there() {
        let state = Arc::new(Mutex::new(FakeApi::default()));
        let applier = Applier::new(client(state.clone()), "m", owner());
        applier.apply(&daemon_set()).await.unwrap();
        assert!(applier.delete(&daemon_set()).await.unwrap());
        assert!(!applier.delete(&daemon_set()).await.unwrap());
        let state = state.lock().unwrap();
        let delete = state.seen.iter().find(|s| s.method == "DELETE").unwrap();
        assert_eq!(delete.body["propagationPolicy"], "Background");
    }

    #[tokio::test]
    async fn unknown_kinds_and_namespaceless_namespaced_objects_are_refused_unsent() {
        let state = Arc::new(Mutex::new(FakeApi::default()));
        let applier = Applier::new(client(state.clone()), "m", owner());
        let pod = object(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns"}}));
        assert_eq!(
            applier.apply(&pod).await.unwrap_err().to_string(),
            "Pod ns/p: the operator does not manage objects of kind v1/Pod"
        );
        let mut no_namespace = daemon_set();
        no_namespace.metadata.namespace = None;
        assert_eq!(
            applier.delete(&no_namespace).await.unwrap_err().to_string(),
            "DaemonSet csi-nodeplugin-nfsplugin: DaemonSet is namespaced but the object has no \
             namespace"
        );
        assert!(state.lock().unwrap().seen.is_empty());
    }
}
