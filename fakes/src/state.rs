//! The state of one fake cloud: tokens, Manila resources, messages, faults and journal.
//! One instance per [`crate::FakeCloud`], behind an `Arc<Mutex<…>>`; never global.

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use chrono::{DateTime, Utc};

use crate::backend::{Backend, Copy, CopyPause};
use crate::config::{CloudConfig, ShareTypeSeed};
use crate::error::Result;
use crate::faults::FaultTable;
use crate::journal::{JournalEntry, Leftover, Leftovers};
use crate::lifecycle::Pending;
use crate::lifecycle::new_id;
use crate::manila::model::{
    AccessOutcome, Failure, MessageAction, Share, ShareNetwork, ShareOutcome, ShareType, Snapshot,
    SnapshotOutcome, UserMessage, detail_text,
};

/// How many requests the journal keeps (the oldest are dropped beyond that).
pub(crate) const JOURNAL_LIMIT: usize = 100_000;

/// An issued Keystone token.
#[derive(Debug, Clone)]
pub(crate) struct Token {
    pub issued_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub method: &'static str,
    /// Scoped to the project (carries a catalog); unscoped tokens cannot call Manila.
    pub scoped: bool,
    /// The user's roles make it a Manila administrator.
    pub admin: bool,
    /// Issued to the seed's administrator user ([`crate::config::Account::admin`]).
    pub admin_user: bool,
}

/// Everything one cloud knows.
#[derive(Debug)]
pub(crate) struct CloudState {
    pub config: CloudConfig,
    seed: CloudConfig,
    /// `http://127.0.0.1:<port>`, without trailing slash.
    pub base_url: String,
    pub tokens: HashMap<String, Token>,
    /// The ids of the newest [`JOURNAL_LIMIT`] tokens issued, expired or revoked ones too
    /// (kept by [`CloudState::reset`]): what a test looks for in logs.
    pub issued_tokens: VecDeque<String>,
    pub share_types: Vec<ShareType>,
    pub shares: HashMap<String, Share>,
    pub snapshots: HashMap<String, Snapshot>,
    pub share_networks: Vec<ShareNetwork>,
    pub messages: Vec<UserMessage>,
    pub faults: FaultTable,
    /// The newest [`JOURNAL_LIMIT`] requests.
    pub journal: VecDeque<JournalEntry>,
    /// Sequence number of the last journalled request (survives clearing).
    pub journal_seq: u64,
    pub backend: Backend,
    /// With TLS: the CA (PEM) and the file holding it, for the clouds.yaml and secret the
    /// control API hands out.
    pub ca: Option<(String, std::path::PathBuf)>,
    /// The metadata service's documents, by node name.
    pub node_metadata: std::collections::BTreeMap<String, crate::metadata::NodeMetadata>,
    /// Data copies a request asked for, which the router runs after releasing the lock.
    pub copies: Vec<PendingCopy>,
    /// The test hook every copy passes ([`crate::FakeCloud::pause_backend_copies`]).
    pub copy_pause: Option<CopyPause>,
    /// Cinder and Nova: volumes, volume snapshots, types, servers, loop devices.
    pub block: crate::cinder::BlockState,
    seq: u64,
}

/// A backend copy and the resource waiting for it: the resource stays in its transitional
/// status, with no pending outcome, until the copy is done.
#[derive(Debug)]
pub(crate) struct PendingCopy {
    pub copy: Copy,
    pub target: CopyTarget,
}

/// The resource a copy fills, with the outcome it gets once the copy succeeded.
#[derive(Debug)]
pub(crate) enum CopyTarget {
    Share {
        id: String,
        pending: Option<Pending<ShareOutcome>>,
        stuck: Option<String>,
    },
    Snapshot {
        id: String,
        pending: Option<Pending<SnapshotOutcome>>,
        stuck: Option<String>,
    },
    /// A Cinder volume or snapshot (a sparse file).
    Block(crate::cinder::model::BlockCopyTarget),
}

/// Builds a runtime share type from its seed.
pub(crate) fn share_type_from_seed(seed: &ShareTypeSeed) -> ShareType {
    ShareType {
        id: seed.id.clone().unwrap_or_else(new_id),
        name: seed.name.clone(),
        description: seed.description.clone(),
        dhss: seed.driver_handles_share_servers,
        snapshot_support: seed.snapshot_support,
        create_share_from_snapshot_support: seed.create_share_from_snapshot_support,
        extra_specs: seed.extra_specs.clone(),
    }
}

impl CloudState {
    pub(crate) fn new(
        config: CloudConfig,
        base_url: String,
        backend: Backend,
        loops: crate::cinder::disk::LoopRegistry,
    ) -> Self {
        let block = crate::cinder::BlockState::new(backend.root(), loops);
        let mut state = Self {
            block,
            seed: config.clone(),
            config,
            base_url,
            ca: None,
            tokens: HashMap::new(),
            issued_tokens: VecDeque::new(),
            share_types: Vec::new(),
            shares: HashMap::new(),
            snapshots: HashMap::new(),
            share_networks: Vec::new(),
            messages: Vec::new(),
            faults: FaultTable::default(),
            journal: VecDeque::new(),
            journal_seq: 0,
            backend,
            node_metadata: std::collections::BTreeMap::new(),
            copies: Vec::new(),
            copy_pause: None,
            seq: 0,
        };
        state.seed_resources();
        state.seed_block();
        state
    }

    /// Cinder's types and Nova's servers (with their metadata documents) from the seed.
    fn seed_block(&mut self) {
        let (cinder, nova) = (self.config.cinder.clone(), self.config.nova.clone());
        if let Err(e) = self.block.seed(&cinder, &nova, &mut self.node_metadata) {
            tracing::warn!(error = %e, "cannot seed the Nova servers");
        }
    }

    fn seed_resources(&mut self) {
        self.share_types = self
            .config
            .manila
            .share_types
            .iter()
            .map(share_type_from_seed)
            .collect();
        let now = Utc::now();
        self.share_networks = self
            .config
            .manila
            .share_networks
            .iter()
            .map(|name| ShareNetwork {
                id: new_id(),
                name: Some(name.clone()),
                description: None,
                created_at: now,
            })
            .collect();
    }

    /// Back to the seed: no resources, tokens, messages, faults or journal entries.
    pub(crate) fn reset(&mut self) -> Result<()> {
        self.config = self.seed.clone();
        self.tokens.clear();
        self.shares.clear();
        self.snapshots.clear();
        self.messages.clear();
        self.faults.clear();
        self.journal.clear();
        self.journal_seq = 0;
        self.node_metadata.clear();
        self.seed_resources();
        self.block.clear()?;
        self.seed_block();
        self.backend.clear()
    }

    /// A creation counter, for listing in creation order.
    pub(crate) fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    pub(crate) fn share_type(&self, name_or_id: &str) -> Option<&ShareType> {
        self.share_types
            .iter()
            .find(|t| t.id == name_or_id)
            .or_else(|| self.share_types.iter().find(|t| t.name == name_or_id))
    }

    pub(crate) fn default_share_type(&self) -> Option<&ShareType> {
        let name = self.config.manila.default_share_type.as_deref()?;
        self.share_types.iter().find(|t| t.name == name)
    }

    /// Ends a copy: the resource gets its outcome, or `error` and a user message when the
    /// copy failed; a resource removed meanwhile (reset) leaves no directory behind.
    pub(crate) fn finish_copy(&mut self, target: CopyTarget, result: Result<()>) {
        let failure = |e: &crate::error::Error| Failure {
            status: "error".into(),
            action: MessageAction::Create,
            detail_id: "001".into(),
            message: Some(format!("The backend could not copy the data: {e}")),
        };
        let stamp = Utc::now();
        match target {
            CopyTarget::Block(target) => self.block.finish_copy(target, result),
            CopyTarget::Share { id, pending, stuck } => {
                let Some(share) = self.shares.get_mut(&id) else {
                    if let Err(e) = self.backend.delete_share(&id) {
                        tracing::warn!(share = %id, error = %e, "could not remove the share's directory");
                    }
                    return;
                };
                share.updated_at = Some(stamp);
                match result {
                    Ok(()) => {
                        share.pending = pending;
                        if let Some(status) = stuck {
                            share.status = status;
                        }
                    }
                    Err(e) => {
                        let f = failure(&e);
                        share.status = f.status.clone();
                        self.record_failure("SHARE", &id, &f);
                    }
                }
            }
            CopyTarget::Snapshot { id, pending, stuck } => {
                let Some(snap) = self.snapshots.get_mut(&id) else {
                    if let Err(e) = self.backend.delete_snapshot(&id) {
                        tracing::warn!(snapshot = %id, error = %e, "could not remove the snapshot's directory");
                    }
                    return;
                };
                snap.updated_at = Some(stamp);
                match result {
                    Ok(()) => {
                        snap.pending = pending;
                        if let Some(status) = stuck {
                            snap.status = status;
                        }
                    }
                    Err(e) => {
                        let f = failure(&e);
                        snap.status = f.status.clone();
                        self.record_failure("SHARE_SNAPSHOT", &id, &f);
                    }
                }
            }
        }
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
        self.block.advance(now);
        let mut failures: Vec<(&'static str, String, Failure)> = Vec::new();
        let mut gone_shares = Vec::new();
        let stamp = Utc::now();
        for share in self.shares.values_mut() {
            if let Some(p) = share.pending.take_if(|p| p.due <= now) {
                share.updated_at = Some(stamp);
                match p.outcome {
                    ShareOutcome::Available { size } => {
                        share.status = "available".into();
                        share.size = size;
                    }
                    ShareOutcome::Gone => gone_shares.push(share.id.clone()),
                    ShareOutcome::Failed(f) => {
                        share.status = f.status.clone();
                        failures.push(("SHARE", share.id.clone(), f));
                    }
                }
            }
            let share_id = share.id.clone();
            share.access_rules.retain_mut(|rule| {
                let Some(p) = rule.pending.take_if(|p| p.due <= now) else {
                    return true;
                };
                rule.updated_at = Some(stamp);
                match p.outcome {
                    AccessOutcome::Active => {
                        rule.state = "active".into();
                        true
                    }
                    AccessOutcome::Gone => false,
                    AccessOutcome::Failed(f) => {
                        rule.state = f.status.clone();
                        failures.push(("SHARE", share_id.clone(), f));
                        true
                    }
                }
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
            let Some(p) = snap.pending.take_if(|p| p.due <= now) else {
                continue;
            };
            snap.updated_at = Some(stamp);
            match p.outcome {
                SnapshotOutcome::Available => snap.status = "available".into(),
                SnapshotOutcome::Gone => gone_snapshots.push(snap.id.clone()),
                SnapshotOutcome::Failed(f) => {
                    snap.status = f.status.clone();
                    failures.push(("SHARE_SNAPSHOT", snap.id.clone(), f));
                }
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

    /// What is still present, in creation order.
    pub(crate) fn leftovers(&mut self) -> Leftovers {
        self.advance(Instant::now());
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
