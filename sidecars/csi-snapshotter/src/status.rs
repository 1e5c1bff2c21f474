//! Writes to a VolumeSnapshotContent: its status (from a CSI snapshot, a pre-provisioned
//! handle or an error) and the being-created annotation.

use csi_proto::v1::Snapshot;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use snapshot_controller::VolumeSnapshotContent;
use snapshot_controller::api::BEING_CREATED_ANNOTATION;

use crate::{Error, Result};

/// The status a CSI snapshot gives a content: handle, readiness, size (when known), creation
/// time in Unix nanoseconds (when known); a previous error is cleared.
pub fn from_snapshot(snapshot: &Snapshot) -> Value {
    let mut status = json!({
        "snapshotHandle": snapshot.snapshot_id,
        "readyToUse": snapshot.ready_to_use,
        "error": null,
    });
    if snapshot.size_bytes > 0 {
        status["restoreSize"] = json!(snapshot.size_bytes);
    }
    if let Some(time) = &snapshot.creation_time {
        let nanos = time
            .seconds
            .saturating_mul(1_000_000_000)
            .saturating_add(i64::from(time.nanos));
        status["creationTime"] = json!(nanos);
    }
    status
}

/// The status of a pre-provisioned content whose driver cannot list snapshots: as upstream,
/// the handle is taken as valid and ready (size and creation time unknown).
pub fn pre_provisioned(handle: &str) -> Value {
    json!({"snapshotHandle": handle, "readyToUse": true, "error": null})
}

/// `status.error` with the current time and `message`.
pub fn error(message: &str) -> Value {
    json!({"error": {"time": Time(Timestamp::now()), "message": message}})
}

/// Merges `status` into the content's status; returns the content as it now is.
pub async fn write(client: &Client, name: &str, status: Value) -> Result<VolumeSnapshotContent> {
    let contents: Api<VolumeSnapshotContent> = Api::all(client.clone());
    contents
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({ "status": status })),
        )
        .await
        .map_err(|e| {
            Error::kube(
                format!("updating the status of VolumeSnapshotContent {name}"),
                e,
            )
        })
}

/// Whether the content carries the being-created annotation.
pub fn being_created(content: &VolumeSnapshotContent) -> bool {
    content.annotations().contains_key(BEING_CREATED_ANNOTATION)
}

/// Sets (`true`) or removes (`false`) the being-created annotation, which says a
/// CreateSnapshot was sent without a final answer yet (the content must not be deleted
/// meanwhile, or the snapshot could leak).
pub async fn mark_being_created(
    client: &Client,
    content: &VolumeSnapshotContent,
    on: bool,
) -> Result<()> {
    if being_created(content) == on {
        return Ok(());
    }
    let name = content.name_any();
    let value = if on { json!("yes") } else { Value::Null };
    let patch = json!({"metadata": {"annotations": {BEING_CREATED_ANNOTATION: value}}});
    Api::<VolumeSnapshotContent>::all(client.clone())
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| Error::kube(format!("annotating VolumeSnapshotContent {name}"), e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use csi_proto::prost_types::Timestamp as ProtoTimestamp;

    use super::*;

    #[test]
    fn a_csi_snapshot_becomes_a_content_status() {
        let snapshot = Snapshot {
            snapshot_id: "snap-1".into(),
            size_bytes: 1 << 30,
            ready_to_use: false,
            creation_time: Some(ProtoTimestamp {
                seconds: 1_700_000_000,
                nanos: 5,
            }),
            ..Default::default()
        };
        assert_eq!(
            from_snapshot(&snapshot),
            json!({
                "snapshotHandle": "snap-1",
                "readyToUse": false,
                "restoreSize": 1_i64 << 30,
                "creationTime": 1_700_000_000_000_000_005_i64,
                "error": null,
            })
        );
        let unknown = Snapshot {
            snapshot_id: "snap-2".into(),
            ready_to_use: true,
            ..Default::default()
        };
        assert_eq!(
            from_snapshot(&unknown),
            json!({"snapshotHandle": "snap-2", "readyToUse": true, "error": null})
        );
    }

    #[test]
    fn errors_carry_a_time_and_the_message() {
        let value = error("boom");
        assert_eq!(value["error"]["message"], "boom");
        assert!(value["error"]["time"].as_str().unwrap().ends_with('Z'));
    }
}
