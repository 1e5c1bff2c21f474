//! What the e2e tests create and wait for: claims, pods mounting them, events.

use std::collections::BTreeMap;
use std::time::Duration;

use harness::cluster::wait;
use k8s_openapi::api::core::v1::{
    Container, Event, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeClaimVolumeSource, Pod, PodSpec, TypedLocalObjectReference, Volume,
    VolumeMount, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, ListParams};

use super::error::{Error, Result};

/// The image of the test pods (generic: runs the host's `sh`).
pub const TEST_IMAGE: &str = "busybox:1.36";
/// Where the test pods mount their claim.
pub const MOUNT_PATH: &str = "/data";

/// A claim `name` of `size` (e.g. `1Gi`) with `access_mode` (`ReadWriteMany`, …) and the
/// class `class` (`None`: the default class).
pub fn claim(
    name: &str,
    class: Option<&str>,
    size: &str,
    access_mode: &str,
) -> PersistentVolumeClaim {
    let mut claim = PersistentVolumeClaim::default();
    claim.metadata.name = Some(name.into());
    claim.spec = Some(PersistentVolumeClaimSpec {
        access_modes: Some(vec![access_mode.into()]),
        storage_class_name: class.map(str::to_owned),
        resources: Some(VolumeResourceRequirements {
            requests: Some(BTreeMap::from([(
                "storage".to_string(),
                Quantity(size.into()),
            )])),
            ..Default::default()
        }),
        ..Default::default()
    });
    claim
}

/// A claim restored from the VolumeSnapshot `snapshot`.
pub fn claim_from_snapshot(
    name: &str,
    class: Option<&str>,
    size: &str,
    access_mode: &str,
    snapshot: &str,
) -> PersistentVolumeClaim {
    let mut claim = claim(name, class, size, access_mode);
    if let Some(spec) = claim.spec.as_mut() {
        spec.data_source = Some(TypedLocalObjectReference {
            api_group: Some(super::snapshots::GROUP.into()),
            kind: "VolumeSnapshot".into(),
            name: snapshot.into(),
        });
    }
    claim
}

/// A pod `name` mounting the claim `claim` at [`MOUNT_PATH`] and running `script` (`sh -c`)
/// then sleeping until deleted; pinned to `node` by its hostname label when given.
pub fn pod_with_claim(name: &str, claim: &str, node: Option<&str>, script: &str) -> Pod {
    let mut pod = Pod::default();
    pod.metadata.name = Some(name.into());
    pod.spec = Some(PodSpec {
        containers: vec![Container {
            name: "app".into(),
            image: Some(TEST_IMAGE.into()),
            command: Some(vec![
                "sh".into(),
                "-c".into(),
                format!("{script}\ntrap 'exit 0' TERM\nwhile true; do sleep 1; done"),
            ]),
            volume_mounts: Some(vec![VolumeMount {
                name: "data".into(),
                mount_path: MOUNT_PATH.into(),
                ..Default::default()
            }]),
            ..Default::default()
        }],
        volumes: Some(vec![Volume {
            name: "data".into(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.into(),
                read_only: None,
            }),
            ..Default::default()
        }]),
        node_selector: node
            .map(|n| BTreeMap::from([("kubernetes.io/hostname".to_string(), n.to_string())])),
        termination_grace_period_seconds: Some(5),
        ..Default::default()
    });
    pod
}

/// Whether a pod's `Ready` condition is `True`.
pub fn pod_is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// `name phase [container: state (restarts)]…` for messages.
pub fn describe_pod(pod: &Pod) -> String {
    let name = pod.metadata.name.as_deref().unwrap_or("?");
    let node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("unscheduled");
    let status = pod.status.clone().unwrap_or_default();
    let containers: Vec<String> = status
        .container_statuses
        .unwrap_or_default()
        .iter()
        .map(|c| {
            let state = c.state.clone().unwrap_or_default();
            let state = if let Some(w) = state.waiting {
                format!(
                    "waiting {} {}",
                    w.reason.unwrap_or_default(),
                    w.message.unwrap_or_default()
                )
            } else if let Some(t) = state.terminated {
                format!(
                    "terminated {} (exit {})",
                    t.reason.unwrap_or_default(),
                    t.exit_code
                )
            } else if state.running.is_some() {
                "running".into()
            } else {
                "unknown".into()
            };
            format!(
                "{}: {state} ready={} restarts={}",
                c.name, c.ready, c.restart_count
            )
        })
        .collect();
    format!(
        "{name} on {node} {} [{}]",
        status.phase.unwrap_or_default(),
        containers.join(", ")
    )
}

/// Waits until the claim `name` is Bound and returns it.
pub async fn wait_claim_bound(
    api: &Api<PersistentVolumeClaim>,
    name: &str,
    timeout: Duration,
) -> Result<PersistentVolumeClaim> {
    let found = wait::wait_for_described(
        api,
        name,
        &format!("PVC {name} Bound"),
        |c: Option<&PersistentVolumeClaim>| {
            c.and_then(|c| c.status.as_ref())
                .and_then(|s| s.phase.as_deref())
                == Some("Bound")
        },
        timeout,
    )
    .await?;
    found.ok_or_else(|| Error::Unexpected(format!("PVC {name} vanished")))
}

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

/// The CSI volume handle (the Manila share id) of a PV.
pub fn volume_handle(volume: &PersistentVolume) -> Option<String> {
    volume
        .spec
        .as_ref()
        .and_then(|s| s.csi.as_ref())
        .map(|c| c.volume_handle.clone())
}

/// The storage capacity of a PV (`spec.capacity.storage`).
pub fn volume_capacity(volume: &PersistentVolume) -> Option<String> {
    volume
        .spec
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| c.get("storage"))
        .map(|q| q.0.clone())
}

/// The status capacity of a claim (`status.capacity.storage`).
pub fn claim_capacity(claim: &PersistentVolumeClaim) -> Option<String> {
    claim
        .status
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| c.get("storage"))
        .map(|q| q.0.clone())
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

/// Waits for an event about `name` with `reason` whose message contains `contains`.
pub async fn wait_event(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    reason: &str,
    contains: &str,
    timeout: Duration,
) -> Result<Event> {
    let what = format!("a {reason} event about {namespace}/{name} containing {contains:?}");
    let event = wait::wait_until(what, timeout, || async move {
        let events = events_about(client, namespace, name)
            .await
            .map_err(|e| e.to_string())?;
        if let Some(event) = events.iter().find(|e| {
            e.reason.as_deref() == Some(reason)
                && e.message.as_deref().is_some_and(|m| m.contains(contains))
        }) {
            return Ok(Some(event.clone()));
        }
        Err(format!(
            "events: {}",
            events
                .iter()
                .map(|e| format!(
                    "{} {}",
                    e.reason.as_deref().unwrap_or("?"),
                    e.message.as_deref().unwrap_or("")
                ))
                .collect::<Vec<_>>()
                .join(" | ")
        ))
    })
    .await?;
    Ok(event)
}
