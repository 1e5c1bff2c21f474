//! Server-side apply of the driver's objects, each owned by the ClusterCSIDriver: the
//! garbage collector removes them with it, and the controller's watches see every change of
//! a child (a deleted or edited child is put back by the next reconcile).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams,
};

/// Applying or deleting an object failed.
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
    /// The API refused.
    #[error("{action} {what}: {source}")]
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

/// What an apply did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The object did not exist.
    Created,
    /// The object changed.
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

/// The kinds the operator applies: (group, version, kind, plural, namespaced).
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
        "snapshot.storage.k8s.io",
        "v1",
        "VolumeSnapshotClass",
        "volumesnapshotclasses",
        false,
    ),
];

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

    /// The API of `object`'s kind (in its namespace), and `Kind namespace/name`.
    fn api(&self, object: &DynamicObject) -> Result<(Api<DynamicObject>, String), ApplyError> {
        let types = object.types.clone().unwrap_or_default();
        let name = object.metadata.name.clone().unwrap_or_default();
        let namespace = object.metadata.namespace.clone();
        let what = match &namespace {
            Some(ns) => format!("{} {ns}/{name}", types.kind),
            None => format!("{} {name}", types.kind),
        };
        let (group, version) = match types.api_version.split_once('/') {
            Some((group, version)) => (group, version),
            None => ("", types.api_version.as_str()),
        };
        let Some((_, _, _, plural, namespaced)) = KINDS
            .iter()
            .find(|(g, v, k, _, _)| *g == group && *v == version && *k == types.kind)
        else {
            return Err(ApplyError::UnknownKind {
                what,
                kind: format!("{}/{}", types.api_version, types.kind),
            });
        };
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(group, version, &types.kind),
            plural,
        );
        let api = match (namespaced, namespace) {
            (true, Some(ns)) => Api::namespaced_with(self.client.clone(), &ns, &resource),
            _ => Api::all_with(self.client.clone(), &resource),
        };
        Ok((api, what))
    }

    /// Server-side applies `object` (forcing conflicts: the operator owns these fields).
    pub async fn apply(&self, object: &DynamicObject) -> Result<Applied, ApplyError> {
        let (api, what) = self.api(object)?;
        let name = object.metadata.name.clone().unwrap_or_default();
        let before = api
            .get_metadata_opt(&name)
            .await
            .map_err(|source| ApplyError::Kube {
                action: "reading",
                what: what.clone(),
                source,
            })?;
        let mut object = object.clone();
        object.metadata.owner_references = Some(vec![self.owner.clone()]);
        object.metadata.managed_fields = None;
        object.metadata.resource_version = None;
        let params = PatchParams::apply(&self.field_manager).force();
        let after = api
            .patch(&name, &params, &Patch::Apply(&object))
            .await
            .map_err(|source| ApplyError::Kube {
                action: "applying",
                what: what.clone(),
                source,
            })?;
        let outcome = match before {
            None => Outcome::Created,
            Some(before) if before.metadata.resource_version != after.metadata.resource_version => {
                Outcome::Updated
            }
            Some(_) => Outcome::Unchanged,
        };
        Ok(Applied {
            kind: object.types.map(|t| t.kind).unwrap_or_default(),
            namespace: object.metadata.namespace,
            name,
            outcome,
            generation: after.metadata.generation,
        })
    }

    /// Deletes `object`; `Ok(false)` when it was already gone.
    pub async fn delete(&self, object: &DynamicObject) -> Result<bool, ApplyError> {
        let (api, what) = self.api(object)?;
        let name = object.metadata.name.clone().unwrap_or_default();
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
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn every_rendered_kind_is_known() {
        let config = crate::OperatorConfig::new("ns");
        let inputs = crate::assets::AssetInputs {
            config: &config,
            log_level: crate::api::LogLevel::Normal,
            credentials_hash: String::new(),
            snapshot_crds_present: true,
        };
        let objects = crate::assets::render(&inputs).unwrap_or_default();
        assert!(!objects.is_empty());
        for object in objects {
            let types = object.types.unwrap_or_default();
            let (group, version) = types
                .api_version
                .split_once('/')
                .unwrap_or(("", types.api_version.as_str()));
            assert!(
                KINDS
                    .iter()
                    .any(|(g, v, k, _, _)| *g == group && *v == version && *k == types.kind),
                "{}/{}",
                types.api_version,
                types.kind
            );
        }
    }
}
