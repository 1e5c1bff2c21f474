//! Cinder's and Nova's resources as the fake stores them, with their lazy transitions
//! (applied by [`BlockState::advance`] at the start of every request, as Manila's are).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Instant;

use chrono::{DateTime, Utc};

use super::disk::{self, LoopRegistry};
use crate::config::{CinderConfig, NovaConfig, ServerSeed, VolumeTypeSeed};
use crate::error::Result;
use crate::lifecycle::Pending;
use crate::lifecycle::new_id;
use crate::metadata::NodeMetadata;

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

/// A copy of a file the block backend waits for, and what the resource becomes after it.
#[derive(Debug)]
pub(crate) enum BlockCopyTarget {
    Volume {
        id: String,
        pending: Option<Pending<VolumeOutcome>>,
        stuck: Option<String>,
    },
    Snapshot {
        id: String,
        pending: Option<Pending<SnapshotOutcome>>,
        stuck: Option<String>,
    },
}

/// Everything the cloud knows about block storage and servers.
#[derive(Debug)]
pub(crate) struct BlockState {
    pub types: Vec<VolumeType>,
    pub volumes: HashMap<String, Volume>,
    pub snapshots: HashMap<String, VolumeSnapshot>,
    pub servers: BTreeMap<String, Server>,
    pub messages: Vec<BlockMessage>,
    pub loops: LoopRegistry,
    root: PathBuf,
    seq: u64,
}

fn type_from_seed(seed: &VolumeTypeSeed) -> VolumeType {
    VolumeType {
        id: seed.id.clone().unwrap_or_else(new_id),
        name: seed.name.clone(),
        description: seed.description.clone(),
        extra_specs: seed.extra_specs.clone(),
    }
}

impl BlockState {
    pub(crate) fn new(root: &Path, loops: LoopRegistry) -> Self {
        Self {
            types: Vec::new(),
            volumes: HashMap::new(),
            snapshots: HashMap::new(),
            servers: BTreeMap::new(),
            messages: Vec::new(),
            loops,
            root: root.to_path_buf(),
            seq: 0,
        }
    }

    /// Types and servers of the seed; the servers' metadata documents go into `metadata`.
    pub(crate) fn seed(
        &mut self,
        cinder: &CinderConfig,
        nova: &NovaConfig,
        metadata: &mut BTreeMap<String, NodeMetadata>,
    ) -> Result<()> {
        self.types = cinder.volume_types.iter().map(type_from_seed).collect();
        for server in &nova.servers {
            self.add_server(server, metadata)?;
        }
        Ok(())
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    pub(crate) fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Adds a server, creating its disk directory, and gives its node the metadata
    /// document that names it (one source of truth: the server).
    pub(crate) fn add_server(
        &mut self,
        seed: &ServerSeed,
        metadata: &mut BTreeMap<String, NodeMetadata>,
    ) -> Result<String> {
        if seed.name.is_empty() || seed.availability_zone.is_empty() {
            return Err(crate::Error::Control(
                "a server needs a name and an availability zone".into(),
            ));
        }
        if self.servers.values().any(|s| s.name == seed.name) {
            return Err(crate::Error::Control(format!(
                "server {:?} already exists",
                seed.name
            )));
        }
        let id = seed.id.clone().unwrap_or_else(new_id);
        let disk_dir = seed
            .disk_dir
            .clone()
            .unwrap_or_else(|| self.root.join("servers").join(&seed.name).join("by-id"));
        std::fs::create_dir_all(&disk_dir).map_err(|source| crate::Error::Backend {
            path: disk_dir.clone(),
            source,
        })?;
        metadata.insert(
            seed.name.clone(),
            NodeMetadata {
                uuid: id.clone(),
                availability_zone: seed.availability_zone.clone(),
                name: Some(seed.name.clone()),
            },
        );
        self.servers.insert(
            id.clone(),
            Server {
                id: id.clone(),
                name: seed.name.clone(),
                availability_zone: seed.availability_zone.clone(),
                disk_dir,
                created_at: Utc::now(),
            },
        );
        Ok(id)
    }

    /// A server by id or name.
    pub(crate) fn server(&self, id_or_name: &str) -> Option<&Server> {
        self.servers
            .get(id_or_name)
            .or_else(|| self.servers.values().find(|s| s.name == id_or_name))
    }

    pub(crate) fn volume_type(&self, name_or_id: &str) -> Option<&VolumeType> {
        self.types
            .iter()
            .find(|t| t.id == name_or_id)
            .or_else(|| self.types.iter().find(|t| t.name == name_or_id))
    }

    /// Back to nothing: every loop device detached, every file removed.
    pub(crate) fn clear(&mut self) -> Result<()> {
        self.loops.detach_all();
        self.volumes.clear();
        self.snapshots.clear();
        self.servers.clear();
        self.messages.clear();
        for sub in ["volumes", "volume-snapshots"] {
            let dir = self.root.join(sub);
            match std::fs::remove_dir_all(&dir) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(crate::Error::Backend {
                        path: dir,
                        source: e,
                    });
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Records a user message about a failed operation.
    pub(crate) fn record_failure(
        &mut self,
        resource_type: &'static str,
        resource_id: &str,
        failure: &BlockFailure,
    ) {
        let text = failure.message.clone().unwrap_or_else(|| {
            match failure.detail_id.as_str() {
                "002" => "schedule allocate volume:Could not find any available weighted backend.",
                "006" => "schedule allocate volume:Could not find any available weighted backend.",
                _ => "An unknown error occurred.",
            }
            .to_owned()
        });
        self.messages.push(BlockMessage {
            id: new_id(),
            resource_type,
            resource_id: resource_id.to_owned(),
            event_id: format!(
                "VOLUME_{resource_type}_{}_{}",
                failure.action, failure.detail_id
            ),
            user_message: text,
            request_id: format!("req-{}", new_id()),
            created_at: Utc::now(),
        });
    }

    /// Applies every pending outcome due at `now`.
    pub(crate) fn advance(&mut self, now: Instant) {
        let stamp = Utc::now();
        let mut failures = Vec::new();
        let mut gone = Vec::new();
        for v in self.volumes.values_mut() {
            let Some(p) = v.pending.take_if(|p| p.due <= now) else {
                continue;
            };
            v.updated_at = Some(stamp);
            match p.outcome {
                VolumeOutcome::Settle { status, size } => {
                    v.status = status;
                    v.size = size;
                }
                VolumeOutcome::Gone => gone.push(v.id.clone()),
                VolumeOutcome::Failed(f) => {
                    v.status = f.status.clone();
                    failures.push(("VOLUME", v.id.clone(), f));
                }
            }
        }
        for id in gone {
            self.volumes.remove(&id);
            if let Err(e) = disk::remove(&disk::volume_file(&self.root, &id)) {
                tracing::warn!(volume = %id, error = %e, "cannot remove the volume's file");
            }
        }
        let mut gone = Vec::new();
        for s in self.snapshots.values_mut() {
            let Some(p) = s.pending.take_if(|p| p.due <= now) else {
                continue;
            };
            s.updated_at = Some(stamp);
            match p.outcome {
                SnapshotOutcome::Available => s.status = "available".into(),
                SnapshotOutcome::Gone => gone.push(s.id.clone()),
                SnapshotOutcome::Failed(f) => {
                    s.status = f.status.clone();
                    failures.push(("SNAPSHOT", s.id.clone(), f));
                }
            }
        }
        for id in gone {
            self.snapshots.remove(&id);
            if let Err(e) = disk::remove(&disk::snapshot_file(&self.root, &id)) {
                tracing::warn!(snapshot = %id, error = %e, "cannot remove the snapshot's file");
            }
        }
        for (kind, id, f) in failures {
            self.record_failure(kind, &id, &f);
        }
    }

    /// Ends a file copy: the resource gets its outcome (a volume's file grown to its size
    /// first), or `error` with a user message; a resource gone meanwhile leaves no file.
    pub(crate) fn finish_copy(&mut self, target: BlockCopyTarget, result: Result<()>) {
        let failure = |e: &crate::Error| BlockFailure {
            status: "error".into(),
            action: "001",
            detail_id: "001".into(),
            message: Some(format!("The backend could not copy the data: {e}")),
        };
        match target {
            BlockCopyTarget::Volume { id, pending, stuck } => {
                let file = disk::volume_file(&self.root, &id);
                let Some(v) = self.volumes.get_mut(&id) else {
                    let _ = disk::remove(&file);
                    return;
                };
                v.updated_at = Some(Utc::now());
                let result = result.and_then(|()| disk::allocate(&file, v.size));
                match result {
                    Ok(()) => {
                        v.pending = pending;
                        if let Some(status) = stuck {
                            v.status = status;
                        }
                    }
                    Err(e) => {
                        let f = failure(&e);
                        v.status = f.status.clone();
                        self.record_failure("VOLUME", &id, &f);
                    }
                }
            }
            BlockCopyTarget::Snapshot { id, pending, stuck } => {
                let Some(s) = self.snapshots.get_mut(&id) else {
                    let _ = disk::remove(&disk::snapshot_file(&self.root, &id));
                    return;
                };
                s.updated_at = Some(Utc::now());
                match result {
                    Ok(()) => {
                        s.pending = pending;
                        if let Some(status) = stuck {
                            s.status = status;
                        }
                    }
                    Err(e) => {
                        let f = failure(&e);
                        s.status = f.status.clone();
                        self.record_failure("SNAPSHOT", &id, &f);
                    }
                }
            }
        }
    }
}
