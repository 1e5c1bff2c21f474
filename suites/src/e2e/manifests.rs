//! The fixtures of `fixtures/manila-csi/`: `${VAR}` substitution, multi-document YAML parsing
//! and server-side apply of any kind (resolved by discovery), remembering what was applied so
//! it can be deleted again in reverse order.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiResource, Scope};
use kube_support::wait;
use serde::Deserialize;

use super::binaries::workspace_root;
use super::error::{Error, Result};

/// The field manager of every apply.
pub const FIELD_MANAGER: &str = "manila-csi-e2e";

/// `fixtures/manila-csi/` of this workspace.
pub fn fixtures_dir() -> PathBuf {
    workspace_root().join("fixtures/manila-csi")
}

/// `fixtures/crds/` (the snapshot CRDs).
pub fn crds_dir() -> PathBuf {
    workspace_root().join("fixtures/crds")
}

/// Replaces every `${NAME}` in `text` with `vars[NAME]`. A placeholder without a value is an
/// error naming it; `$(NAME)` (Kubernetes' own expansion in `args`/`env`) is left alone.
pub fn substitute(path: &Path, text: &str, vars: &BTreeMap<String, String>) -> Result<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').ok_or_else(|| Error::Fixture {
            path: path.to_path_buf(),
            reason: format!(
                "unterminated placeholder at {:?}",
                &after[..after.len().min(20)]
            ),
        })?;
        let name = &after[..end];
        let value = vars.get(name).ok_or_else(|| Error::Fixture {
            path: path.to_path_buf(),
            reason: format!(
                "placeholder ${{{name}}} has no value (known: {})",
                vars.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
        })?;
        out.push_str(value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The objects of a multi-document YAML text (empty documents skipped); each needs
/// `apiVersion`, `kind` and `metadata.name`.
pub fn parse(path: &Path, text: &str) -> Result<Vec<DynamicObject>> {
    let fail = |reason: String| Error::Fixture {
        path: path.to_path_buf(),
        reason,
    };
    let mut objects = Vec::new();
    for (index, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let value = serde_json::Value::deserialize(document)
            .map_err(|e| fail(format!("document {}: {e}", index + 1)))?;
        if value.is_null() {
            continue;
        }
        let object: DynamicObject = serde_json::from_value(value)
            .map_err(|e| fail(format!("document {}: {e}", index + 1)))?;
        if object.types.is_none() || object.metadata.name.is_none() {
            return Err(fail(format!(
                "document {} lacks apiVersion, kind or metadata.name",
                index + 1
            )));
        }
        objects.push(object);
    }
    Ok(objects)
}

/// Reads `path`, substitutes `vars` and parses it.
pub fn load(path: &Path, vars: &BTreeMap<String, String>) -> Result<Vec<DynamicObject>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::Fixture {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    parse(path, &substitute(path, &text, vars)?)
}

/// One applied object, for deletion.
#[derive(Debug, Clone)]
pub struct AppliedObject {
    /// Its API resource.
    pub resource: ApiResource,
    /// Its namespace (`None`: cluster-scoped).
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
}

impl AppliedObject {
    /// `Kind namespace/name` for messages.
    pub fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.resource.kind, self.name),
            None => format!("{} {}", self.resource.kind, self.name),
        }
    }

    fn api(&self, client: &kube::Client) -> Api<DynamicObject> {
        match &self.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &self.resource),
            None => Api::all_with(client.clone(), &self.resource),
        }
    }
}

/// Applies objects with server-side apply and remembers them.
pub struct Applier {
    client: kube::Client,
    resources: HashMap<(String, String, String), (ApiResource, bool)>,
    applied: Vec<AppliedObject>,
}

impl std::fmt::Debug for Applier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Applier")
            .field("applied", &self.applied)
            .finish_non_exhaustive()
    }
}

impl Applier {
    /// An applier using `client`.
    pub fn new(client: kube::Client) -> Self {
        Applier {
            client,
            resources: HashMap::new(),
            applied: Vec::new(),
        }
    }

    /// What was applied so far, in order.
    pub fn applied(&self) -> &[AppliedObject] {
        &self.applied
    }

    /// Applies every object of `path` (after substitution), in file order.
    pub async fn apply_file(
        &mut self,
        path: &Path,
        vars: &BTreeMap<String, String>,
    ) -> Result<Vec<AppliedObject>> {
        let mut applied = Vec::new();
        for object in load(path, vars)? {
            applied.push(self.apply(object).await?);
        }
        Ok(applied)
    }

    /// Applies one object (namespaced objects need `metadata.namespace`).
    pub async fn apply(&mut self, object: DynamicObject) -> Result<AppliedObject> {
        let types = object.types.clone().unwrap_or_default();
        let name = object.metadata.name.clone().unwrap_or_default();
        let (group, version) = match types.api_version.split_once('/') {
            Some((group, version)) => (group.to_string(), version.to_string()),
            None => (String::new(), types.api_version.clone()),
        };
        let key = (group.clone(), version.clone(), types.kind.clone());
        let (resource, namespaced) = match self.resources.get(&key) {
            Some(found) => found.clone(),
            None => {
                let gvk = GroupVersionKind::gvk(&group, &version, &types.kind);
                let (resource, caps) = kube::discovery::pinned_kind(&self.client, &gvk)
                    .await
                    .map_err(Error::kube(format!(
                        "discovering {} {}",
                        types.api_version, types.kind
                    )))?;
                let found = (resource, caps.scope == Scope::Namespaced);
                self.resources.insert(key, found.clone());
                found
            }
        };
        let namespace = match (namespaced, &object.metadata.namespace) {
            (true, Some(ns)) => Some(ns.clone()),
            (true, None) => {
                return Err(Error::Unexpected(format!(
                    "{} {name} is namespaced but names no namespace",
                    types.kind
                )));
            }
            (false, _) => None,
        };
        let applied = AppliedObject {
            resource,
            namespace,
            name,
        };
        applied
            .api(&self.client)
            .patch(
                &applied.name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&object),
            )
            .await
            .map_err(Error::kube(format!("applying {}", applied.describe())))?;
        tracing::debug!(object = %applied.describe(), "applied");
        self.applied.push(applied.clone());
        Ok(applied)
    }

    /// Deletes everything applied, newest first (foreground for workloads, so their pods go
    /// too), then waits until each object is gone. CustomResourceDefinitions go last, once
    /// every other object is gone: a custom object whose type vanished could no longer be
    /// watched (the API answers 404 for its whole resource).
    pub async fn delete_all(&mut self, timeout: Duration) -> Result<()> {
        let applied = std::mem::take(&mut self.applied);
        let (definitions, objects): (Vec<AppliedObject>, Vec<AppliedObject>) = applied
            .into_iter()
            .partition(|o| o.resource.kind == "CustomResourceDefinition");
        self.delete_and_wait(&objects, timeout).await?;
        self.delete_and_wait(&definitions, timeout).await
    }

    async fn delete_and_wait(&self, applied: &[AppliedObject], timeout: Duration) -> Result<()> {
        let params = DeleteParams::foreground();
        for object in applied.iter().rev() {
            match object.api(&self.client).delete(&object.name, &params).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(e) => {
                    return Err(Error::Kube {
                        action: format!("deleting {}", object.describe()),
                        source: e,
                    });
                }
            }
        }
        for object in applied.iter().rev() {
            wait::wait_for_described(
                &object.api(&self.client),
                &object.name,
                &format!("{} to be deleted", object.describe()),
                |found: Option<&DynamicObject>| found.is_none(),
                timeout,
            )
            .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn vars() -> BTreeMap<String, String> {
        [
            ("NAMESPACE", "manila-csi"),
            ("DRIVER_NAME", "manila.csi.openstack.org"),
            ("INSTANCE", "openstack-manila-csi"),
            ("NFS_MOUNTER", "local"),
            ("SECRET_NAME", "manila-csi-secrets"),
            ("EXPORT_ROOT", "/srv/exports"),
            ("ZONE", "zone-a"),
            ("WITH_TOPOLOGY", "false"),
            ("CONTROLLER_HEALTH_PORT", "39808"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    #[test]
    fn placeholders_are_replaced_and_kubernetes_expansion_kept() {
        let out = substitute(
            Path::new("x.yaml"),
            "a: ${NAMESPACE}\nb: \"--nodeid=$(NODE_ID)\"\n",
            &vars(),
        )
        .unwrap();
        assert_eq!(out, "a: manila-csi\nb: \"--nodeid=$(NODE_ID)\"\n");
    }

    #[test]
    fn an_unknown_placeholder_is_named() {
        let err = substitute(Path::new("x.yaml"), "a: ${NOPE}", &vars())
            .unwrap_err()
            .to_string();
        assert!(err.contains("x.yaml") && err.contains("${NOPE}"), "{err}");
    }

    #[test]
    fn every_fixture_renders_and_parses() {
        let mut kinds = Vec::new();
        for entry in std::fs::read_dir(fixtures_dir()).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "yaml") {
                for object in load(&path, &vars()).unwrap() {
                    kinds.push(object.types.unwrap().kind);
                }
            }
        }
        for kind in [
            "CSIDriver",
            "Deployment",
            "DaemonSet",
            "StorageClass",
            "VolumeSnapshotClass",
            "ClusterRole",
            "ServiceAccount",
        ] {
            assert!(kinds.iter().any(|k| k == kind), "no {kind} in {kinds:?}");
        }
    }

    #[test]
    fn the_node_plugin_mounts_the_export_root_and_kubelet_dirs() {
        let objects = load(&fixtures_dir().join("nodeplugin.yaml"), &vars()).unwrap();
        let text = serde_json::to_string(&objects[0]).unwrap();
        for needle in [
            r#""path":"/srv/exports""#,
            r#""mountPath":"/srv/exports""#,
            r#""mountPropagation":"Bidirectional""#,
            r#""path":"/var/lib/kubelet/plugins_registry""#,
            r#""path":"/var/lib/kubelet/plugins/manila.csi.openstack.org""#,
            "--mounter=local",
            "--nodeaz=zone-a",
        ] {
            assert!(text.contains(needle), "{needle} missing in {text}");
        }
    }
}
