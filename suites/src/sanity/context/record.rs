//! The record a [`CaseContext`](super::CaseContext) keeps: what the case made, and the calls
//! whose answer never came.

use csi_proto::v1;

/// Something a case made that must be undone.
#[derive(Debug, Clone)]
pub(super) enum Made {
    Volume {
        id: String,
        staged_at: Option<String>,
        published_at: Vec<String>,
        published_to: Vec<String>,
    },
    Snapshot {
        id: String,
    },
}

/// A call that may have made something and whose answer never came: the case was
/// interrupted (Ctrl-C) or timed out while it ran. Cleanup repeats creates (they are
/// idempotent by name) to learn what they made, and reverses stages and publishes.
#[derive(Debug, Clone)]
pub(super) enum InFlight {
    CreateVolume(v1::CreateVolumeRequest),
    CreateSnapshot(v1::CreateSnapshotRequest),
    NodeStage { volume_id: String, path: String },
    NodePublish { volume_id: String, path: String },
}
