//! What the cloud knows of Manila ([`ManilaState`]): share types, shares with their access
//! rules, snapshots, share networks and groups, user messages, and the backend directories;
//! seeded from the `manila:` section, moved along by [`ManilaState::advance`].

use std::collections::HashMap;
use std::time::Instant;

use chrono::Utc;

use super::model::{
    AccessOutcome, Failure, MessageAction, Share, ShareNetwork, ShareOutcome, ShareType, Snapshot,
    SnapshotOutcome, UserMessage, detail_text,
};
use crate::backend::{Backend, Copy};
use crate::config::{ManilaConfig, ShareGroupSeed, ShareGroupTypeSeed, ShareTypeSeed};
use crate::error::{Error, Result};
use crate::journal::{Leftover, Leftovers};
use crate::lifecycle::{Lifecycle, Plan, new_id};

/// Everything the cloud knows about Manila.
#[derive(Debug)]
pub(crate) struct ManilaState {
    pub share_types: Vec<ShareType>,
    /// The name of the default share type (`GET /types/default`), if any.
    pub default_share_type: Option<String>,
    pub shares: HashMap<String, Share>,
    pub snapshots: HashMap<String, Snapshot>,
    pub share_networks: Vec<ShareNetwork>,
    /// The seeded share group types, given ids when first looked at.
    pub share_group_types: Vec<ShareGroupTypeSeed>,
    /// The seeded share groups and those created through the API.
    pub share_groups: Vec<ShareGroupSeed>,
    pub messages: Vec<UserMessage>,
    /// The directories behind shares and snapshots.
    pub backend: Backend,
    /// Data copies a request asked for, which the router runs after releasing the lock.
    pub copies: Vec<(Copy, CopyTarget)>,
    seq: u64,
}

/// The resource a copy fills: it stays in its initial status, with nothing pending, until
/// the copy is done, then starts the plan it was created with.
#[derive(Debug)]
pub(crate) enum CopyTarget {
    /// A share made from a snapshot.
    Share {
        id: String,
        plan: Plan<ShareOutcome>,
    },
    /// A snapshot of a share.
    Snapshot {
        id: String,
        plan: Plan<SnapshotOutcome>,
    },
}

impl ManilaState {
    /// The state `config` seeds, over `backend`.
    pub(crate) fn new(config: &ManilaConfig, backend: Backend) -> Self {
        let mut state = Self {
            share_types: Vec::new(),
            default_share_type: None,
            shares: HashMap::new(),
            snapshots: HashMap::new(),
            share_networks: Vec::new(),
            share_group_types: Vec::new(),
            share_groups: Vec::new(),
            messages: Vec::new(),
            backend,
            copies: Vec::new(),
            seq: 0,
        };
        state.seed(config);
        state
    }

    /// Types, the default type, share networks and share groups of the seed.
    fn seed(&mut self, config: &ManilaConfig) {
        self.share_types = config
            .share_types
            .iter()
            .map(ShareType::from_seed)
            .collect();
        self.default_share_type = config.default_share_type.clone();
        let now = Utc::now();
        self.share_networks = config
            .share_networks
            .iter()
            .map(|name| ShareNetwork {
                id: new_id(),
                name: Some(name.clone()),
                description: None,
                created_at: now,
            })
            .collect();
        self.share_group_types = config.share_group_types.clone();
        self.share_groups = config.share_groups.clone();
    }

    /// Back to the seed: no shares, snapshots or messages (the backend's directories are
    /// emptied separately, with [`Backend::clear`]).
    pub(crate) fn reseed(&mut self, config: &ManilaConfig) {
        self.shares.clear();
        self.snapshots.clear();
        self.messages.clear();
        self.seed(config);
    }

    /// A creation counter, for listing in creation order.
    pub(crate) fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// A share type by id, else by name.
    pub(crate) fn share_type(&self, name_or_id: &str) -> Option<&ShareType> {
        self.share_types
            .iter()
            .find(|t| t.id == name_or_id)
            .or_else(|| self.share_types.iter().find(|t| t.name == name_or_id))
    }

    pub(crate) fn default_share_type(&self) -> Option<&ShareType> {
        let name = self.default_share_type.as_deref()?;
        self.share_types.iter().find(|t| t.name == name)
    }

    /// Adds a share type at run time; its id.
    pub(crate) fn add_share_type(&mut self, seed: &ShareTypeSeed) -> Result<String> {
        if seed.name.is_empty() {
            return Err(Error::Control("a share type needs a name".into()));
        }
        if self.share_types.iter().any(|t| t.name == seed.name) {
            return Err(Error::Control(format!(
                "share type {:?} already exists",
                seed.name
            )));
        }
        let t = ShareType::from_seed(seed);
        let id = t.id.clone();
        self.share_types.push(t);
        Ok(id)
    }

    /// Removes a share type (by name or id); shares keep their type id, as in Manila.
    pub(crate) fn remove_share_type(&mut self, name_or_id: &str) -> Result<()> {
        let Some(index) = self
            .share_types
            .iter()
            .position(|t| t.name == name_or_id || t.id == name_or_id)
        else {
            return Err(Error::Control(format!(
                "no share type named {name_or_id:?}"
            )));
        };
        let removed = self.share_types.remove(index);
        if self.default_share_type.as_deref() == Some(removed.name.as_str()) {
            self.default_share_type = None;
        }
        Ok(())
    }

    /// Sets (or clears) the default share type.
    pub(crate) fn set_default_share_type(&mut self, name: Option<&str>) -> Result<()> {
        if let Some(name) = name
            && !self.share_types.iter().any(|t| t.name == name)
        {
            return Err(Error::Control(format!("no share type named {name:?}")));
        }
        self.default_share_type = name.map(str::to_owned);
        Ok(())
    }

    /// GiB of all shares (saturating: quota arithmetic never overflows).
    pub(crate) fn share_gigabytes(&self) -> u64 {
        self.shares
            .values()
            .map(|s| s.size)
            .fold(0, u64::saturating_add)
    }

    /// GiB of all snapshots (saturating).
    pub(crate) fn snapshot_gigabytes(&self) -> u64 {
        self.snapshots
            .values()
            .map(|s| s.size)
            .fold(0, u64::saturating_add)
    }

    /// Records a user message about a failed operation on a resource.
    pub(crate) fn record_failure(
        &mut self,
        resource_type: &'static str,
        resource_id: &str,
        failure: &Failure,
    ) {
        let text = failure
            .message
            .clone()
            .unwrap_or_else(|| detail_text(&failure.detail_id).to_owned());
        self.messages.push(UserMessage {
            id: new_id(),
            resource_type,
            resource_id: resource_id.to_owned(),
            action_id: failure.action.id(),
            detail_id: failure.detail_id.clone(),
            user_message: format!("{}: {}", failure.action.text(), text),
            request_id: format!("req-{}", new_id()),
            created_at: Utc::now(),
        });
    }

    /// Applies every pending outcome that is due at `now`.
    pub(crate) fn advance(&mut self, now: Instant) {
        let mut failures: Vec<(&'static str, String, Failure)> = Vec::new();
        let mut gone_shares = Vec::new();
        let stamp = Utc::now();
        for share in self.shares.values_mut() {
            match share.take_due(now, stamp) {
                Some(ShareOutcome::Available { size }) => {
                    share.status = "available".into();
                    share.size = size;
                }
                Some(ShareOutcome::Gone) => gone_shares.push(share.id.clone()),
                Some(ShareOutcome::Failed(f)) => {
                    share.status = f.status.clone();
                    failures.push(("SHARE", share.id.clone(), f));
                }
                None => {}
            }
            let share_id = share.id.clone();
            share
                .access_rules
                .retain_mut(|rule| match rule.take_due(now, stamp) {
                    Some(AccessOutcome::Active) => {
                        rule.state = "active".into();
                        true
                    }
                    Some(AccessOutcome::Gone) => false,
                    Some(AccessOutcome::Failed(f)) => {
                        rule.state = f.status.clone();
                        failures.push(("SHARE", share_id.clone(), f));
                        true
                    }
                    None => true,
                });
        }
        for id in gone_shares {
            self.shares.remove(&id);
            if let Err(e) = self.backend.delete_share(&id) {
                tracing::warn!(share = %id, error = %e, "could not remove the share's directory");
            }
        }
        let mut gone_snapshots = Vec::new();
        for snap in self.snapshots.values_mut() {
            match snap.take_due(now, stamp) {
                Some(SnapshotOutcome::Available) => snap.status = "available".into(),
                Some(SnapshotOutcome::Gone) => gone_snapshots.push(snap.id.clone()),
                Some(SnapshotOutcome::Failed(f)) => {
                    snap.status = f.status.clone();
                    failures.push(("SHARE_SNAPSHOT", snap.id.clone(), f));
                }
                None => {}
            }
        }
        for id in gone_snapshots {
            self.snapshots.remove(&id);
            if let Err(e) = self.backend.delete_snapshot(&id) {
                tracing::warn!(snapshot = %id, error = %e, "could not remove the snapshot's directory");
            }
        }
        for (kind, id, f) in failures {
            self.record_failure(kind, &id, &f);
        }
    }

    /// Ends a copy: the resource starts its plan, or ends in `error` with a user message
    /// when the copy failed; a resource removed meanwhile (reset) leaves no directory behind.
    pub(crate) fn finish_copy(&mut self, target: CopyTarget, result: Result<()>) {
        let failure = |e: &Error| Failure {
            status: "error".into(),
            action: MessageAction::Create,
            detail_id: "001".into(),
            message: Some(format!("The backend could not copy the data: {e}")),
        };
        match target {
            CopyTarget::Share { id, plan } => {
                let Some(share) = self.shares.get_mut(&id) else {
                    if let Err(e) = self.backend.delete_share(&id) {
                        tracing::warn!(share = %id, error = %e, "could not remove the share's directory");
                    }
                    return;
                };
                share.end_copy(plan, result.is_ok(), "error");
                if let Err(e) = result {
                    self.record_failure("SHARE", &id, &failure(&e));
                }
            }
            CopyTarget::Snapshot { id, plan } => {
                let Some(snap) = self.snapshots.get_mut(&id) else {
                    if let Err(e) = self.backend.delete_snapshot(&id) {
                        tracing::warn!(snapshot = %id, error = %e, "could not remove the snapshot's directory");
                    }
                    return;
                };
                snap.end_copy(plan, result.is_ok(), "error");
                if let Err(e) = result {
                    self.record_failure("SHARE_SNAPSHOT", &id, &failure(&e));
                }
            }
        }
    }

    /// What is still present, in creation order (outcomes due by `now` applied).
    pub(crate) fn leftovers(&mut self, now: Instant) -> Leftovers {
        self.advance(now);
        let mut shares: Vec<&Share> = self.shares.values().collect();
        shares.sort_by_key(|s| s.seq);
        let mut snapshots: Vec<&Snapshot> = self.snapshots.values().collect();
        snapshots.sort_by_key(|s| s.seq);
        Leftovers {
            shares: shares
                .iter()
                .map(|s| Leftover {
                    id: s.id.clone(),
                    name: s.name.clone(),
                    status: s.status.clone(),
                    share_id: None,
                })
                .collect(),
            snapshots: snapshots
                .iter()
                .map(|s| Leftover {
                    id: s.id.clone(),
                    name: s.name.clone(),
                    status: s.status.clone(),
                    share_id: Some(s.share_id.clone()),
                })
                .collect(),
            access_rules: shares
                .iter()
                .flat_map(|s| {
                    s.access_rules.iter().map(|r| Leftover {
                        id: r.id.clone(),
                        name: Some(format!("{}:{}", r.access_type, r.access_to)),
                        status: r.state.clone(),
                        share_id: Some(s.id.clone()),
                    })
                })
                .collect(),
        }
    }
}
