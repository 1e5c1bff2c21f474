//! Fault injection: rules that make an operation fail, slow down, hang or end in error.
//!
//! A rule names an [`Operation`], optionally a resource (share/snapshot id or name), what to
//! do ([`FaultAction`]) and how often ([`Times`]). Rules are consulted in the order they
//! were added; the first that matches is consumed.

use serde::{Deserialize, Serialize};

/// The operations faults can target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    /// `POST /v3/auth/tokens`.
    Auth,
    /// Manila version documents.
    ManilaVersions,
    /// `POST /shares`.
    ShareCreate,
    /// `GET /shares/{id}`.
    ShareGet,
    /// `GET /shares`, `GET /shares/detail`.
    ShareList,
    /// `DELETE /shares/{id}`.
    ShareDelete,
    /// The `extend` action.
    ShareExtend,
    /// The `shrink` action.
    ShareShrink,
    /// Share metadata reads and writes.
    ShareMetadata,
    /// `GET /shares/{id}/export_locations[/{id}]`.
    ExportLocations,
    /// The `allow_access` action.
    AccessAllow,
    /// The `deny_access` action.
    AccessDeny,
    /// The `access_list` action and `GET /share-access-rules`.
    AccessList,
    /// `GET /types...`.
    ShareTypes,
    /// `POST /snapshots`.
    SnapshotCreate,
    /// `GET /snapshots/{id}`.
    SnapshotGet,
    /// `GET /snapshots[/detail]`.
    SnapshotList,
    /// `DELETE /snapshots/{id}`.
    SnapshotDelete,
    /// Availability zones.
    AvailabilityZones,
    /// Share networks.
    ShareNetworks,
    /// Quota sets.
    Quotas,
    /// User messages.
    Messages,
    /// Cinder version documents.
    CinderVersions,
    /// `POST /volumes`.
    VolumeCreate,
    /// `GET /volumes/{id}`.
    VolumeGet,
    /// `GET /volumes[/detail]`.
    VolumeList,
    /// `DELETE /volumes/{id}`.
    VolumeDelete,
    /// The `os-extend` action.
    VolumeExtend,
    /// `GET /types...` (Cinder).
    VolumeTypes,
    /// `POST /snapshots` (Cinder).
    VolumeSnapshotCreate,
    /// `GET /snapshots/{id}` (Cinder).
    VolumeSnapshotGet,
    /// `GET /snapshots[/detail]` (Cinder).
    VolumeSnapshotList,
    /// `DELETE /snapshots/{id}` (Cinder).
    VolumeSnapshotDelete,
    /// Cinder's availability zones.
    VolumeAvailabilityZones,
    /// Nova's availability zones (`GET /os-availability-zone` under `/compute`).
    ComputeAvailabilityZones,
    /// Cinder's quota sets and limits.
    VolumeQuotas,
    /// Cinder's user messages.
    VolumeMessages,
    /// Nova `POST /servers/{id}/os-volume_attachments` (resource: volume id, server id or
    /// name; `error` answers 500).
    VolumeAttach,
    /// Nova `DELETE /servers/{id}/os-volume_attachments/{volume_id}`.
    VolumeDetach,
}

/// What a fault does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum FaultAction {
    /// Answer this HTTP status with the service's error body instead of doing the operation.
    HttpError {
        /// The status code (400–599).
        status: u16,
        /// The error message; a generic one when absent.
        #[serde(default)]
        message: Option<String>,
    },
    /// Do the operation normally but answer after this many milliseconds.
    Latency {
        /// The delay.
        ms: u64,
    },
    /// Accept the asynchronous operation but never finish it: the resource stays in the
    /// transitional state (`creating`, `deleting`, `extending`, `queued_to_apply`, ...), or in
    /// `status` when given.
    Stuck {
        /// The state to hang in instead of the operation's transitional state.
        #[serde(default)]
        status: Option<String>,
    },
    /// Accept the asynchronous operation and end it in the operation's error state (`error`,
    /// `error_deleting`, `extending_error`, ...) with a user message carrying `detail_id`.
    Error {
        /// Manila's message detail id, e.g. `"002"` (no valid host), `"009"` (capacity).
        #[serde(default = "default_detail_id")]
        detail_id: String,
        /// The user message text; Manila's text for the detail id when absent.
        #[serde(default)]
        message: Option<String>,
    },
}

fn default_detail_id() -> String {
    "001".into()
}

/// How many times a rule fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Times {
    /// This many matching requests, then the rule is spent.
    Count(u32),
    /// Every matching request.
    Always(AlwaysKeyword),
}

/// The literal `"always"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlwaysKeyword {
    /// `"always"`.
    Always,
}

impl Times {
    /// Every time.
    pub const ALWAYS: Self = Self::Always(AlwaysKeyword::Always);
}

impl Default for Times {
    fn default() -> Self {
        Self::Count(1)
    }
}

/// A fault rule as given to [`crate::FakeCloud::add_fault`] or `POST /_fake/faults`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultRule {
    /// The operation it targets.
    pub operation: Operation,
    /// Only requests about this resource (an id, or the name of a share/snapshot; for
    /// creates, the requested name).
    #[serde(default)]
    pub resource: Option<String>,
    /// What happens.
    pub action: FaultAction,
    /// How often (default once).
    #[serde(default)]
    pub times: Times,
}

impl FaultRule {
    /// A rule for `operation` doing `action` once.
    pub fn new(operation: Operation, action: FaultAction) -> Self {
        Self {
            operation,
            resource: None,
            action,
            times: Times::default(),
        }
    }
    /// Restricts the rule to one resource (id or name).
    pub fn for_resource(mut self, resource: impl Into<String>) -> Self {
        self.resource = Some(resource.into());
        self
    }
    /// Sets how often the rule fires.
    pub fn times(mut self, times: Times) -> Self {
        self.times = times;
        self
    }

    /// Checks values serde accepts but that make no sense.
    pub fn validate(&self) -> Result<(), String> {
        match &self.action {
            FaultAction::HttpError { status, .. } if !(400..=599).contains(status) => Err(format!(
                "action.http_error.status {status} is not an error status (400-599)"
            )),
            FaultAction::Error { detail_id, .. }
                if detail_id.len() != 3 || !detail_id.bytes().all(|b| b.is_ascii_digit()) =>
            {
                Err(format!(
                    "action.error.detail_id {detail_id:?} is not three digits"
                ))
            }
            FaultAction::Latency { ms } if *ms > crate::config::MAX_DELAY_MS => {
                crate::config::check_delay("action.latency.ms", *ms)
            }
            _ if self.times == Times::Count(0) => Err("times 0 would never fire".into()),
            _ => Ok(()),
        }
    }
}

/// A rule in the table, with its id and remaining count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActiveFault {
    /// Id to remove it by.
    pub id: u64,
    /// The rule (its `times` counts down).
    #[serde(flatten)]
    pub rule: FaultRule,
    /// How many times it has fired.
    pub fired: u32,
}

/// The fault rules of one cloud.
#[derive(Debug, Default)]
pub(crate) struct FaultTable {
    rules: Vec<ActiveFault>,
    next_id: u64,
}

impl FaultTable {
    pub(crate) fn add(&mut self, rule: FaultRule) -> u64 {
        self.next_id += 1;
        self.rules.push(ActiveFault {
            id: self.next_id,
            rule,
            fired: 0,
        });
        self.next_id
    }

    pub(crate) fn remove(&mut self, id: u64) -> bool {
        let before = self.rules.len();
        self.rules.retain(|r| r.id != id);
        self.rules.len() != before
    }

    pub(crate) fn clear(&mut self) {
        self.rules.clear();
    }

    pub(crate) fn list(&self) -> Vec<ActiveFault> {
        self.rules.clone()
    }

    /// Consumes the first rule matching `operation` and one of `resources` (a rule without
    /// a resource matches everything).
    pub(crate) fn take(
        &mut self,
        operation: Operation,
        resources: &[String],
    ) -> Option<FaultAction> {
        let index = self.rules.iter().position(|r| {
            r.rule.operation == operation
                && r.rule
                    .resource
                    .as_deref()
                    .is_none_or(|want| resources.iter().any(|r| r == want))
        })?;
        let entry = &mut self.rules[index];
        entry.fired += 1;
        let action = entry.rule.action.clone();
        if let Times::Count(n) = &mut entry.rule.times {
            *n -= 1;
            if *n == 0 {
                self.rules.remove(index);
            }
        }
        Some(action)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn counted_rule_is_spent_after_n() {
        let mut t = FaultTable::default();
        t.add(
            FaultRule::new(Operation::ShareCreate, FaultAction::Latency { ms: 1 })
                .times(Times::Count(2)),
        );
        assert!(t.take(Operation::ShareCreate, &[]).is_some());
        assert!(t.take(Operation::ShareCreate, &[]).is_some());
        assert!(t.take(Operation::ShareCreate, &[]).is_none());
    }

    #[test]
    fn always_rule_stays_and_resource_filters() {
        let mut t = FaultTable::default();
        t.add(
            FaultRule::new(Operation::ShareDelete, FaultAction::Stuck { status: None })
                .for_resource("s1")
                .times(Times::ALWAYS),
        );
        assert!(t.take(Operation::ShareDelete, &["s2".to_owned()]).is_none());
        for _ in 0..5 {
            assert!(
                t.take(Operation::ShareDelete, &["id".to_owned(), "s1".to_owned()])
                    .is_some()
            );
        }
        assert_eq!(t.list()[0].fired, 5);
    }

    #[test]
    fn rule_json_shape() {
        let rule: FaultRule = serde_json::from_str(
            r#"{"operation":"share_create","action":{"error":{"detail_id":"009"}},"times":"always"}"#,
        )
        .unwrap();
        assert_eq!(rule.times, Times::ALWAYS);
        assert!(
            serde_json::from_str::<FaultRule>(
                r#"{"operation":"share_creat","action":{"latency":{"ms":1}}}"#
            )
            .is_err()
        );
        let bad = FaultRule::new(
            Operation::Auth,
            FaultAction::HttpError {
                status: 200,
                message: None,
            },
        );
        assert!(bad.validate().unwrap_err().contains("200"));
    }
}
