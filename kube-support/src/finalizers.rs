//! Adding and removing finalizers on any object without clobbering concurrent changes: each
//! patch carries the resourceVersion of the object as the caller saw it, so a stale view
//! fails with a conflict (409) and the caller's reconcile is retried on a fresh one.
//!
//! Every sidecar uses these, whether the finalizer is its own (the attacher's on
//! VolumeAttachments, the provisioner's on PVs) or protects another object (the snapshot
//! controller's on PVCs). kube-runtime's `finalizer` helper does not fit those cases: it
//! owns one finalizer on the reconciled object only.

use std::fmt::Debug;

use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;

/// A finalizer patch failed.
#[derive(Debug, thiserror::Error)]
#[error("{what}")]
pub struct FinalizerError {
    /// What was being done, e.g. `adding finalizer f to PersistentVolume pv-1`.
    pub what: String,
    /// The client's error.
    #[source]
    pub source: kube::Error,
}

/// Whether `obj` carries `finalizer`.
pub fn has<K: Resource>(obj: &K, finalizer: &str) -> bool {
    obj.finalizers().iter().any(|f| f == finalizer)
}

/// Adds `finalizer` to `obj` unless present; returns the object as it now is.
pub async fn add<K>(api: &Api<K>, obj: &K, finalizer: &str) -> Result<K, FinalizerError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    if has(obj, finalizer) {
        return Ok(obj.clone());
    }
    let mut finalizers = obj.finalizers().to_vec();
    finalizers.push(finalizer.to_owned());
    write(api, obj, finalizers)
        .await
        .map_err(|source| FinalizerError {
            what: format!("adding finalizer {finalizer} to {}", describe(obj)),
            source,
        })
}

/// Removes `finalizers` from `obj` where present. An object already gone (404) counts as
/// done.
pub async fn remove<K>(api: &Api<K>, obj: &K, finalizers: &[&str]) -> Result<(), FinalizerError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    if !finalizers.iter().any(|f| has(obj, f)) {
        return Ok(());
    }
    let kept: Vec<String> = obj
        .finalizers()
        .iter()
        .filter(|f| !finalizers.contains(&f.as_str()))
        .cloned()
        .collect();
    match write(api, obj, kept).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(source) => Err(FinalizerError {
            what: format!(
                "removing finalizer {} from {}",
                finalizers.join(", "),
                describe(obj)
            ),
            source,
        }),
    }
}

async fn write<K>(api: &Api<K>, obj: &K, finalizers: Vec<String>) -> kube::Result<K>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let patch = json!({
        "metadata": {
            "resourceVersion": obj.resource_version(),
            "finalizers": finalizers,
        }
    });
    api.patch(
        &obj.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
}

/// `Kind name` (or `Kind namespace/name`) for messages.
fn describe<K: Resource<DynamicType = ()>>(obj: &K) -> String {
    match obj.namespace() {
        Some(namespace) => format!("{} {namespace}/{}", K::kind(&()), obj.name_any()),
        None => format!("{} {}", K::kind(&()), obj.name_any()),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

    use super::*;

    #[test]
    fn has_looks_for_the_exact_name() {
        let mut pv = PersistentVolume::default();
        pv.metadata.finalizers = Some(vec!["external-attacher/d".into()]);
        assert!(has(&pv, "external-attacher/d"));
        assert!(!has(&pv, "external-attacher"));
        assert!(!has(&PersistentVolume::default(), "external-attacher/d"));
    }

    #[test]
    fn messages_name_the_kind_and_the_object() {
        let mut pvc = PersistentVolumeClaim::default();
        pvc.metadata.name = Some("data".into());
        pvc.metadata.namespace = Some("apps".into());
        assert_eq!(describe(&pvc), "PersistentVolumeClaim apps/data");
        let mut pv = PersistentVolume::default();
        pv.metadata.name = Some("pv-1".into());
        assert_eq!(describe(&pv), "PersistentVolume pv-1");
    }
}
