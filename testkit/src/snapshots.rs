//! Objects of the `snapshot.storage.k8s.io/v1` API for tests: VolumeSnapshots,
//! pre-provisioned VolumeSnapshotContents and VolumeSnapshotClasses.
//!
//! Each is written as the API's JSON and read into the type the caller names (e.g.
//! `snapshot_controller::VolumeSnapshot`, or `serde_json::Value` to tamper with it), so the
//! kit does not depend on the crate under test.

use std::fmt::Debug;

use kube::api::{Api, PostParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

const API_VERSION: &str = "snapshot.storage.k8s.io/v1";

/// The annotation marking a class as its driver's default.
const IS_DEFAULT_CLASS_ANNOTATION: &str = "snapshot.storage.kubernetes.io/is-default-class";

/// A VolumeSnapshot `name` of the claim `claim` (in the snapshot's namespace) through the
/// class `class`, or the driver's default class when `None`.
pub fn snapshot_of_claim<K: DeserializeOwned>(name: &str, claim: &str, class: Option<&str>) -> K {
    let mut spec = json!({"source": {"persistentVolumeClaimName": claim}});
    if let Some(class) = class {
        spec["volumeSnapshotClassName"] = json!(class);
    }
    object("VolumeSnapshot", name, spec)
}

/// Creates the VolumeSnapshot `name` of the claim `claim` (see [`snapshot_of_claim`]) with
/// `snapshots` and returns it as created.
pub async fn create_snapshot_of_claim<K>(
    snapshots: &Api<K>,
    name: &str,
    claim: &str,
    class: Option<&str>,
) -> K
where
    K: Resource + Clone + Debug + Serialize + DeserializeOwned,
{
    snapshots
        .create(
            &PostParams::default(),
            &snapshot_of_claim(name, claim, class),
        )
        .await
        .unwrap_or_else(|e| panic!("creating VolumeSnapshot {name}: {e}"))
}

/// The name the snapshot controller gives the content it makes for the dynamic `snapshot`:
/// `snapcontent-<uid>`.
pub fn dynamic_content_name(snapshot: &impl Resource) -> String {
    let uid = snapshot
        .uid()
        .unwrap_or_else(|| panic!("VolumeSnapshot {} has no uid", snapshot.name_any()));
    format!("snapcontent-{uid}")
}

/// A VolumeSnapshot `name` of the pre-provisioned content `content`.
pub fn snapshot_of_content<K: DeserializeOwned>(name: &str, content: &str) -> K {
    object(
        "VolumeSnapshot",
        name,
        json!({"source": {"volumeSnapshotContentName": content}}),
    )
}

/// A pre-provisioned VolumeSnapshotContent `name` for `driver`'s existing snapshot `handle`,
/// meant for the VolumeSnapshot `snapshot_namespace/snapshot`, deletion policy Delete.
pub fn pre_provisioned_content<K: DeserializeOwned>(
    name: &str,
    driver: &str,
    handle: &str,
    snapshot_namespace: &str,
    snapshot: &str,
) -> K {
    object(
        "VolumeSnapshotContent",
        name,
        json!({
            "volumeSnapshotRef": {"name": snapshot, "namespace": snapshot_namespace},
            "deletionPolicy": "Delete",
            "driver": driver,
            "source": {"snapshotHandle": handle},
        }),
    )
}

/// A VolumeSnapshotClass `name` for `driver` with `deletion_policy` (`Delete` or `Retain`)
/// and `parameters`, annotated as the driver's default when `default` is set.
pub fn snapshot_class<K: DeserializeOwned>(
    name: &str,
    driver: &str,
    deletion_policy: &str,
    default: bool,
    parameters: &[(&str, &str)],
) -> K {
    let mut class = json!({
        "apiVersion": API_VERSION,
        "kind": "VolumeSnapshotClass",
        "metadata": {"name": name},
        "driver": driver,
        "deletionPolicy": deletion_policy,
        "parameters": parameters.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
    });
    if default {
        class["metadata"]["annotations"] = json!({IS_DEFAULT_CLASS_ANNOTATION: "true"});
    }
    read(class)
}

/// The object of `kind` named `name` with `spec`.
fn object<K: DeserializeOwned>(kind: &str, name: &str, spec: Value) -> K {
    read(json!({
        "apiVersion": API_VERSION,
        "kind": kind,
        "metadata": {"name": name},
        "spec": spec,
    }))
}

/// `object` as the caller's type.
fn read<K: DeserializeOwned>(object: Value) -> K {
    serde::Deserialize::deserialize(&object)
        .unwrap_or_else(|e| panic!("reading {object} into the caller's type: {e}"))
}
