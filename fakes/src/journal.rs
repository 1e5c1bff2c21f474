//! The request journal and the leftover-resource report.

use serde::{Deserialize, Serialize};

/// Which API a journalled request went to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Service {
    /// Keystone (`/identity/...`).
    Keystone,
    /// Manila (`/share/...`).
    Manila,
    /// Cinder (`/volume/...`).
    Cinder,
    /// Nova (`/compute/...`).
    Nova,
    /// The instance metadata service (`/nodes/<node>/...`).
    Metadata,
    /// Anything else (unknown paths).
    Other,
}

/// One request the cloud served (control-API requests are not journalled).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalEntry {
    /// Order of arrival, from 1 (not reset by clearing the journal; reset by a cloud reset).
    pub seq: u64,
    /// When it was answered (RFC 3339).
    pub at: String,
    /// HTTP method.
    pub method: String,
    /// URL path.
    pub path: String,
    /// Query string, if any.
    pub query: Option<String>,
    /// The API it addressed.
    pub service: Service,
    /// The microversion header as sent (Manila only).
    pub microversion: Option<String>,
    /// The `X-Auth-Token` as sent (fake tokens only; never a real credential).
    pub token: Option<String>,
    /// The status code answered.
    pub status: u16,
}

/// A resource still present.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Leftover {
    /// Resource id.
    pub id: String,
    /// Resource name (access rules: `<type>:<to>`).
    pub name: Option<String>,
    /// Current status/state.
    pub status: String,
    /// For access rules and snapshots, the share they belong to.
    pub share_id: Option<String>,
}

/// Resources still present: what a suite that cleaned up should find empty.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Leftovers {
    /// Shares not yet deleted (including those still `deleting`).
    pub shares: Vec<Leftover>,
    /// Snapshots not yet deleted.
    pub snapshots: Vec<Leftover>,
    /// Access rules of those shares.
    pub access_rules: Vec<Leftover>,
}

impl Leftovers {
    /// True when nothing is left.
    pub fn is_empty(&self) -> bool {
        self.shares.is_empty() && self.snapshots.is_empty() && self.access_rules.is_empty()
    }
}
