//! Waits on workload objects, with timeouts that report what was last seen: pods Ready
//! (described as the suites describe pods); the PV a claim is bound to, and the events about
//! an object. Claims Bound and events are awaited with [`kube_support::wait`]'s.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{Api, ListParams};
use kube_support::wait;

use super::super::error::{Error, Result};
use super::objects::{describe_pod, pod_is_ready};

/// Waits until the pod `name` is Running with every container ready.
pub async fn wait_pod_ready(api: &Api<Pod>, name: &str, timeout: Duration) -> Result<Pod> {
    let what = format!("pod {name} Ready");
    let result = wait::wait_until(what, timeout, || {
        let api = api.clone();
        async move {
            match api.get_opt(name).await.map_err(|e| e.to_string())? {
                Some(pod) if pod_is_ready(&pod) => Ok(Some(pod)),
                Some(pod) => Err(describe_pod(&pod)),
                None => Err("absent".into()),
            }
        }
    })
    .await?;
    Ok(result)
}

/// The PV bound to a claim.
pub async fn bound_volume(
    client: &kube::Client,
    claim: &PersistentVolumeClaim,
) -> Result<PersistentVolume> {
    let name = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.clone())
        .ok_or_else(|| {
            Error::Unexpected(format!(
                "PVC {} has no volumeName",
                claim.metadata.name.as_deref().unwrap_or("?")
            ))
        })?;
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    volumes
        .get(&name)
        .await
        .map_err(Error::kube(format!("reading PV {name}")))
}

/// Events in `namespace` about the object `name` (any kind).
pub async fn events_about(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Vec<Event>> {
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    let list = events
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .map_err(Error::kube(format!("listing events of {namespace}/{name}")))?;
    Ok(list.items)
}
