//! The objects of e2e workloads, built and read: claims (also restored from a snapshot), pods
//! mounting a claim, and the fields of claims, PVs and pods the tests look at.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeClaimVolumeSource, Pod, PodSpec, TypedLocalObjectReference, Volume,
    VolumeMount, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

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

/// A raw block claim (`volumeMode: Block`), otherwise as [`claim`].
pub fn block_claim(
    name: &str,
    class: Option<&str>,
    size: &str,
    access_mode: &str,
) -> PersistentVolumeClaim {
    let mut claim = claim(name, class, size, access_mode);
    if let Some(spec) = claim.spec.as_mut() {
        spec.volume_mode = Some("Block".into());
    }
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
            api_group: Some(super::super::snapshots::GROUP.into()),
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
