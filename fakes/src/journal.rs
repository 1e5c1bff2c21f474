//! The request journal and the leftover-resource report.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

/// How many requests the journal keeps (the oldest are dropped beyond that); Keystone keeps
/// as many issued token ids.
pub(crate) const JOURNAL_LIMIT: usize = 100_000;

/// The newest [`JOURNAL_LIMIT`] requests one cloud served.
#[derive(Debug, Default)]
pub(crate) struct Journal {
    entries: VecDeque<JournalEntry>,
    /// Sequence number of the last journalled request (survives clearing).
    seq: u64,
}

impl Journal {
    /// Records the entry `make` builds with the next sequence number.
    pub(crate) fn record(&mut self, make: impl FnOnce(u64) -> JournalEntry) {
        self.seq += 1;
        if self.entries.len() >= JOURNAL_LIMIT {
            self.entries.pop_front();
        }
        self.entries.push_back(make(self.seq));
    }

    /// The entries, oldest first.
    pub(crate) fn entries(&self) -> impl Iterator<Item = &JournalEntry> {
        self.entries.iter()
    }

    /// Forgets the entries; numbering goes on.
    pub(crate) fn clear(&mut self) {
        self.entries.clear();
    }

    /// Forgets the entries and numbers from 1 again.
    pub(crate) fn reset(&mut self) {
        self.entries.clear();
        self.seq = 0;
    }
}

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
    /// The microversion header as sent: Manila's `X-OpenStack-Manila-API-Version` (`2.45`),
    /// Cinder's and Nova's `OpenStack-API-Version` (`volume 3.50`); none for the others.
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
