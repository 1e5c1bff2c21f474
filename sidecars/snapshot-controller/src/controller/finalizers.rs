//! Adding and removing finalizers without clobbering concurrent changes: each patch carries
//! the object's resourceVersion, so a stale view fails with a conflict and is retried.

use std::fmt::Debug;

use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::{Error, Result};

/// Whether `obj` carries `finalizer`.
pub fn has<K: Resource>(obj: &K, finalizer: &str) -> bool {
    obj.finalizers().iter().any(|f| f == finalizer)
}

/// Adds `finalizer` to `obj` unless present; returns the object as it now is.
pub async fn add<K>(api: &Api<K>, obj: &K, finalizer: &str) -> Result<K>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    if has(obj, finalizer) {
        return Ok(obj.clone());
    }
    let mut finalizers = obj.finalizers().to_vec();
    finalizers.push(finalizer.to_owned());
    write(api, obj, finalizers, "adding", finalizer).await
}

/// Removes `finalizers` from `obj` where present; returns the object as it now is.
pub async fn remove<K>(api: &Api<K>, obj: &K, finalizers: &[&str]) -> Result<K>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    if !finalizers.iter().any(|f| has(obj, f)) {
        return Ok(obj.clone());
    }
    let kept: Vec<String> = obj
        .finalizers()
        .iter()
        .filter(|f| !finalizers.contains(&f.as_str()))
        .cloned()
        .collect();
    write(api, obj, kept, "removing", &finalizers.join(", ")).await
}

async fn write<K>(
    api: &Api<K>,
    obj: &K,
    finalizers: Vec<String>,
    verb: &str,
    which: &str,
) -> Result<K>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let name = obj.name_any();
    let patch = json!({
        "metadata": {
            "resourceVersion": obj.resource_version(),
            "finalizers": finalizers,
        }
    });
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| Error::kube(format!("{verb} finalizer {which} on {name}"), e))
}
