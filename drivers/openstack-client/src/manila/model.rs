//! Manila API resources as the driver reads them, and the fields of a new share.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// A Manila API microversion `major.minor`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Microversion(pub u32, pub u32);

impl Microversion {
    /// Parses `2.45`.
    pub fn parse(text: &str) -> Option<Self> {
        let (major, minor) = text.trim().split_once('.')?;
        Some(Microversion(major.parse().ok()?, minor.parse().ok()?))
    }
}

impl std::fmt::Display for Microversion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.0, self.1)
    }
}

/// A Manila share.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct Share {
    /// UUID (= CSI volume id).
    pub id: String,
    /// Name (= CSI volume name).
    pub name: Option<String>,
    /// `creating`, `available`, `error`, …
    pub status: String,
    /// Size in GiB.
    pub size: u64,
    /// `NFS`, `CEPHFS`, …
    pub share_proto: Option<String>,
    /// Share type id.
    pub share_type: Option<String>,
    /// Share type name.
    pub share_type_name: Option<String>,
    /// Availability zone.
    pub availability_zone: Option<String>,
    /// Share network id.
    pub share_network_id: Option<String>,
    /// The share group it is in (microversion 2.31).
    #[serde(default)]
    pub share_group_id: Option<String>,
    /// Metadata.
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    /// Source snapshot.
    pub snapshot_id: Option<String>,
    /// Description.
    pub description: Option<String>,
    /// Whether snapshots can be taken of this share (microversion 2.2), as Manila reports
    /// it on the share: fixed when the share was created, whatever its type says now.
    #[serde(default)]
    pub snapshot_support: Option<bool>,
    /// Whether new shares can be created from this share's snapshots (microversion 2.24).
    #[serde(default)]
    pub create_share_from_snapshot_support: Option<bool>,
}

impl Share {
    /// Whether the share is of `protocol` (case-insensitive); a share that does not say is
    /// taken to be.
    pub fn is_protocol(&self, protocol: &str) -> bool {
        self.share_proto
            .as_deref()
            .is_none_or(|p| p.eq_ignore_ascii_case(protocol))
    }
}

/// A share's export location.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct ExportLocation {
    /// `server:/path` for NFS, `mon1,mon2:/path` for CephFS.
    pub path: String,
    /// Only reachable by administrators.
    #[serde(default)]
    pub is_admin_only: bool,
    /// Preferred by the back end.
    #[serde(default)]
    pub preferred: bool,
}

/// An access rule.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct AccessRule {
    /// Rule id.
    pub id: String,
    /// `ip`, `cephx`, `user`, `cert`.
    pub access_type: String,
    /// Address, CIDR or cephx user.
    pub access_to: String,
    /// cephx key once the rule is applied.
    pub access_key: Option<String>,
    /// `rw` or `ro`.
    pub access_level: String,
    /// `queued_to_apply`, `applying`, `active`, `error`, …
    #[serde(alias = "status")]
    pub state: Option<String>,
}

/// A share type.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct ShareType {
    /// Type id.
    pub id: String,
    /// Type name.
    pub name: String,
    /// Extra specs (values are usually strings such as `"True"`).
    #[serde(default)]
    pub extra_specs: BTreeMap<String, Value>,
}

impl ShareType {
    /// Whether the extra spec `key` is true (`True`, `true`, `<is> True`, or a JSON bool).
    pub fn spec_enabled(&self, key: &str) -> bool {
        match self.extra_specs.get(key) {
            Some(Value::Bool(b)) => *b,
            Some(Value::String(s)) => s
                .trim()
                .trim_start_matches("<is>")
                .trim()
                .eq_ignore_ascii_case("true"),
            _ => false,
        }
    }
}

/// A share snapshot.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct Snapshot {
    /// UUID (= CSI snapshot id).
    pub id: String,
    /// Name (= CSI snapshot name).
    pub name: Option<String>,
    /// `creating`, `available`, `error`, …
    pub status: String,
    /// Source share.
    pub share_id: String,
    /// Size in GiB.
    pub size: u64,
    /// Creation time (ISO 8601, no zone).
    pub created_at: Option<String>,
}

/// A user message.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct Message {
    /// Message id.
    pub id: String,
    /// `001`…: what went wrong.
    pub detail_id: Option<String>,
    /// `ERROR`, …
    pub message_level: Option<String>,
    /// Human text.
    pub user_message: Option<String>,
    /// Creation time, for ordering.
    pub created_at: Option<String>,
}

/// Fields of `POST /shares`.
#[derive(Clone, Debug, Default)]
pub struct NewShare {
    /// Name.
    pub name: String,
    /// Size in GiB.
    pub size: u64,
    /// Protocol.
    pub protocol: String,
    /// Share type name or id.
    pub share_type: String,
    /// Availability zone.
    pub availability_zone: Option<String>,
    /// Share network.
    pub share_network_id: Option<String>,
    /// Share group (microversion 2.31).
    pub share_group_id: Option<String>,
    /// Metadata.
    pub metadata: BTreeMap<String, String>,
    /// Source snapshot.
    pub snapshot_id: Option<String>,
    /// Description.
    pub description: String,
    /// Scheduler hints (microversion 2.65): share ids, comma-joined.
    pub scheduler_hints: Option<SchedulerHints>,
}

/// `scheduler_hints` of `POST /shares` (2.65).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SchedulerHints {
    /// `same_host`: share ids, comma-joined.
    pub same_host: Option<String>,
    /// `different_host`: share ids, comma-joined.
    pub different_host: Option<String>,
}
