//! Cinder's and Nova's resources as the fake stores them, with their lazy transitions
//! (applied by [`super::BlockState::advance`] at the start of every request, as Manila's
//! are; see [`crate::lifecycle`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use chrono::{DateTime, Utc};

use crate::config::VolumeTypeSeed;
use crate::lifecycle::{Lifecycle, Pending, new_id};

/// How an asynchronous operation ends in error.
#[derive(Debug, Clone)]
pub(crate) struct BlockFailure {
    /// The error status (`error`, `error_deleting`, `error_extending`).
    pub status: String,
    /// The action of the user message (`VOLUME_001` create, `VOLUME_003` extend, …).
    pub action: &'static str,
    pub detail_id: String,
    pub message: Option<String>,
}

/// What a pending volume operation does when due.
#[derive(Debug, Clone)]
pub(crate) enum VolumeOutcome {
    /// Takes this status and size.
    Settle { status: String, size: u64 },
    /// Disappears (delete).
    Gone,
    /// Ends in error.
    Failed(BlockFailure),
}

/// What a pending snapshot operation does when due.
#[derive(Debug, Clone)]
pub(crate) enum SnapshotOutcome {
    Available,
    Gone,
    Failed(BlockFailure),
}

/// A volume attached to a server (by Nova).
#[derive(Debug, Clone)]
pub(crate) struct Attachment {
    pub id: String,
    pub server_id: String,
    pub host_name: String,
    pub device: String,
    pub attached_at: DateTime<Utc>,
}

/// A volume.
#[derive(Debug, Clone)]
pub(crate) struct Volume {
    pub id: String,
    pub seq: u64,
    pub name: Option<String>,
    pub description: Option<String>,
    pub size: u64,
    pub type_id: String,
    pub type_name: String,
    pub availability_zone: String,
    pub snapshot_id: Option<String>,
    pub source_volid: Option<String>,
    pub metadata: BTreeMap<String, String>,
    /// `same_host`/`different_host` of `OS-SCH-HNT:scheduler_hints`, as volume id lists.
    pub scheduler_hints: BTreeMap<String, Vec<String>>,
    pub multiattach: bool,
    pub status: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: Option<DateTime<Utc>>,
    pub pending: Option<Pending<VolumeOutcome>>,
    pub attachments: Vec<Attachment>,
}

impl Volume {
    pub(crate) fn keys(&self) -> Vec<String> {
        let mut keys = vec![self.id.clone()];
        keys.extend(self.name.clone());
        keys
    }
}

/// A volume snapshot.
#[derive(Debug, Clone)]
pub(crate) struct VolumeSnapshot {
    pub id: String,
    pub seq: u64,
    pub name: Option<String>,
    pub description: Option<String>,
    pub volume_id: String,
    pub size: u64,
    pub status: String,
    pub metadata: BTreeMap<String, String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: Option<DateTime<Utc>>,
    pub pending: Option<Pending<SnapshotOutcome>>,
}

/// Volume and snapshot transitions: status, pending outcome and `updated_at`.
macro_rules! lifecycle {
    ($resource:ty, $outcome:ty) => {
        impl Lifecycle for $resource {
            type Outcome = $outcome;
            fn status_mut(&mut self) -> &mut String {
                &mut self.status
            }
            fn pending_mut(&mut self) -> &mut Option<Pending<$outcome>> {
                &mut self.pending
            }
            fn touch(&mut self, at: DateTime<Utc>) {
                self.updated_at = Some(at);
            }
        }
    };
}

lifecycle!(Volume, VolumeOutcome);
lifecycle!(VolumeSnapshot, SnapshotOutcome);

impl VolumeSnapshot {
    pub(crate) fn keys(&self) -> Vec<String> {
        let mut keys = vec![self.id.clone()];
        keys.extend(self.name.clone());
        keys
    }
}

/// A volume type.
#[derive(Debug, Clone)]
pub(crate) struct VolumeType {
    pub id: String,
    pub name: String,
    pub description: Option<String>,
    pub extra_specs: BTreeMap<String, String>,
}

impl VolumeType {
    /// Whether the type makes multiattach volumes (`multiattach: "<is> True"`).
    pub(crate) fn multiattach(&self) -> bool {
        self.extra_specs
            .get("multiattach")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("<is> true"))
    }
}

/// A Nova server.
#[derive(Debug, Clone)]
pub(crate) struct Server {
    pub id: String,
    pub name: String,
    pub availability_zone: String,
    pub disk_dir: PathBuf,
    pub created_at: DateTime<Utc>,
}

/// A Cinder user message.
#[derive(Debug, Clone)]
pub(crate) struct BlockMessage {
    pub id: String,
    pub resource_type: &'static str,
    pub resource_id: String,
    pub event_id: String,
    pub user_message: String,
    pub request_id: String,
    pub created_at: DateTime<Utc>,
}

impl VolumeType {
    /// A runtime volume type from its seed (a fresh id unless the seed names one).
    pub(crate) fn from_seed(seed: &VolumeTypeSeed) -> Self {
        Self {
            id: seed.id.clone().unwrap_or_else(new_id),
            name: seed.name.clone(),
            description: seed.description.clone(),
            extra_specs: seed.extra_specs.clone(),
        }
    }
}
