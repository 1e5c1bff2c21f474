//! Manila's resources as the fake stores them, with their lazy state transitions.
//!
//! An asynchronous operation records a [`Pending`] outcome and when it is due; every Manila
//! request first calls [`super::ManilaState::advance`], which applies the outcomes that are
//! due. No background task runs; time alone moves resources along ([`crate::lifecycle`]).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use crate::config::ShareTypeSeed;
use crate::lifecycle::{Lifecycle, Pending, new_id};

/// Manila's message action ids (`action_id` of a user message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MessageAction {
    Create,
    Delete,
    Extend,
    Shrink,
    UpdateAccessRules,
}

impl MessageAction {
    pub(crate) fn id(self) -> &'static str {
        match self {
            Self::Create => "002",
            Self::Delete => "007",
            Self::Extend => "008",
            Self::Shrink => "009",
            Self::UpdateAccessRules => "010",
        }
    }
    pub(crate) fn text(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Delete => "delete",
            Self::Extend => "extend",
            Self::Shrink => "shrink",
            Self::UpdateAccessRules => "update access rules",
        }
    }
}

/// Manila's text for a message detail id.
pub(crate) fn detail_text(detail_id: &str) -> &'static str {
    match detail_id {
        "002" => {
            "No storage could be allocated for this share request. Trying again with a different size or share type may succeed."
        }
        "003" => "Driver does not expect share-network to be provided with current configuration.",
        "004" => {
            "Could not find an existing share server or allocate one on the share network provided. You may use a different share network, or verify the network details in the share network and retry your request."
        }
        "007" => {
            "No storage could be allocated for this share request, AvailabilityZone filter didn't succeed."
        }
        "008" => {
            "No storage could be allocated for this share request, Capabilities filter didn't succeed."
        }
        "009" => {
            "No storage could be allocated for this share request, Capacity filter didn't succeed."
        }
        _ => "An unknown error occurred.",
    }
}

/// How an asynchronous operation ends in error.
#[derive(Debug, Clone)]
pub(crate) struct Failure {
    /// The error state, e.g. `error`, `extending_error`.
    pub status: String,
    pub action: MessageAction,
    pub detail_id: String,
    pub message: Option<String>,
}

/// What a pending share operation does when due.
#[derive(Debug, Clone)]
pub(crate) enum ShareOutcome {
    /// Becomes `available` (after create, or resize to the new size).
    Available { size: u64 },
    /// Disappears (delete).
    Gone,
    /// Ends in error.
    Failed(Failure),
}

/// A share.
#[derive(Debug, Clone)]
pub(crate) struct Share {
    pub id: String,
    pub seq: u64,
    pub name: Option<String>,
    pub description: Option<String>,
    pub size: u64,
    pub share_proto: String,
    pub share_type_id: String,
    pub share_type_name: String,
    pub availability_zone: String,
    pub share_network_id: Option<String>,
    /// The share group it was created in (2.31).
    pub share_group_id: Option<String>,
    pub snapshot_id: Option<String>,
    pub metadata: BTreeMap<String, String>,
    pub is_public: bool,
    pub status: String,
    pub snapshot_support: bool,
    pub create_share_from_snapshot_support: bool,
    pub instance_id: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: Option<DateTime<Utc>>,
    pub pending: Option<Pending<ShareOutcome>>,
    pub export_locations: Vec<ExportLocation>,
    pub access_rules: Vec<AccessRule>,
}

impl Share {
    /// Matches a fault rule's resource filter.
    pub(crate) fn keys(&self) -> Vec<String> {
        let mut keys = vec![self.id.clone()];
        keys.extend(self.name.clone());
        keys
    }

    /// `active` unless a rule is still moving.
    pub(crate) fn access_rules_status(&self) -> &'static str {
        if self.access_rules.iter().any(|r| r.state == "error") {
            "error"
        } else if self.access_rules.iter().any(|r| r.state != "active") {
            "syncing"
        } else {
            "active"
        }
    }
}

/// An export location of a share.
#[derive(Debug, Clone)]
pub(crate) struct ExportLocation {
    pub id: String,
    pub path: String,
    pub preferred: bool,
    pub is_admin_only: bool,
}

/// What a pending access-rule operation does when due.
#[derive(Debug, Clone)]
pub(crate) enum AccessOutcome {
    Active,
    Gone,
    Failed(Failure),
}

/// An access rule of a share.
#[derive(Debug, Clone)]
pub(crate) struct AccessRule {
    pub id: String,
    pub access_type: String,
    pub access_to: String,
    pub access_level: String,
    pub access_key: Option<String>,
    pub state: String,
    pub metadata: BTreeMap<String, String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: Option<DateTime<Utc>>,
    pub pending: Option<Pending<AccessOutcome>>,
}

/// What a pending snapshot operation does when due.
#[derive(Debug, Clone)]
pub(crate) enum SnapshotOutcome {
    Available,
    Gone,
    Failed(Failure),
}

/// A share snapshot.
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    pub id: String,
    pub seq: u64,
    pub share_id: String,
    pub name: Option<String>,
    pub description: Option<String>,
    pub size: u64,
    pub share_size: u64,
    pub share_proto: String,
    pub status: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: Option<DateTime<Utc>>,
    pub pending: Option<Pending<SnapshotOutcome>>,
}

/// Share, snapshot and access-rule transitions: status (an access rule's `state`), pending
/// outcome and `updated_at`.
macro_rules! lifecycle {
    ($resource:ty, $status:ident, $outcome:ty) => {
        impl Lifecycle for $resource {
            type Outcome = $outcome;
            fn status_mut(&mut self) -> &mut String {
                &mut self.$status
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

lifecycle!(Share, status, ShareOutcome);
lifecycle!(Snapshot, status, SnapshotOutcome);
lifecycle!(AccessRule, state, AccessOutcome);

impl Snapshot {
    pub(crate) fn keys(&self) -> Vec<String> {
        let mut keys = vec![self.id.clone()];
        keys.extend(self.name.clone());
        keys
    }
}

/// A share type.
#[derive(Debug, Clone)]
pub(crate) struct ShareType {
    pub id: String,
    pub name: String,
    pub description: Option<String>,
    pub dhss: bool,
    pub snapshot_support: bool,
    pub create_share_from_snapshot_support: bool,
    pub extra_specs: BTreeMap<String, String>,
}

impl ShareType {
    /// A runtime share type from its seed (a fresh id unless the seed names one).
    pub(crate) fn from_seed(seed: &ShareTypeSeed) -> Self {
        Self {
            id: seed.id.clone().unwrap_or_else(new_id),
            name: seed.name.clone(),
            description: seed.description.clone(),
            dhss: seed.driver_handles_share_servers,
            snapshot_support: seed.snapshot_support,
            create_share_from_snapshot_support: seed.create_share_from_snapshot_support,
            extra_specs: seed.extra_specs.clone(),
        }
    }
}

/// A share network.
#[derive(Debug, Clone)]
pub(crate) struct ShareNetwork {
    pub id: String,
    pub name: Option<String>,
    pub description: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// A user message (Manila `/messages`).
#[derive(Debug, Clone)]
pub(crate) struct UserMessage {
    pub id: String,
    pub resource_type: &'static str,
    pub resource_id: String,
    pub action_id: &'static str,
    pub detail_id: String,
    pub user_message: String,
    pub request_id: String,
    pub created_at: DateTime<Utc>,
}
