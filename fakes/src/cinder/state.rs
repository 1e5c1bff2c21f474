//! What the cloud knows of block storage and servers ([`BlockState`]): volume types,
//! volumes with their attachments, volume snapshots, Nova's servers, user messages and the
//! loop devices; seeded from the `cinder:` and `nova:` sections, moved along by
//! [`BlockState::advance`]; and what tests read of it ([`VolumeView`], [`BlockLeftovers`]).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Instant;

use chrono::Utc;
use serde::{Deserialize, Serialize};

use super::disk::{self, LoopRegistry};
use super::model::{
    BlockFailure, BlockMessage, Server, SnapshotOutcome, Volume, VolumeOutcome, VolumeSnapshot,
    VolumeType,
};
use crate::backend::Copy;
use crate::config::{CinderConfig, NovaConfig, ServerSeed};
use crate::error::Result;
use crate::lifecycle::{Lifecycle, Plan, new_id};
use crate::metadata::NodeMetadata;

/// The resource a copy of a file fills: it stays `creating`, with nothing pending, until the
/// copy is done, then starts the plan it was created with.
#[derive(Debug)]
pub(crate) enum CopyTarget {
    /// A volume made from a snapshot or another volume.
    Volume {
        id: String,
        plan: Plan<VolumeOutcome>,
    },
    /// A snapshot of a volume.
    Snapshot {
        id: String,
        plan: Plan<SnapshotOutcome>,
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
    /// File copies a request asked for, which the router runs after releasing the lock.
    pub copies: Vec<(Copy, CopyTarget)>,
    root: PathBuf,
    seq: u64,
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
            copies: Vec::new(),
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
        self.types = cinder
            .volume_types
            .iter()
            .map(VolumeType::from_seed)
            .collect();
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

    /// GiB of volumes and snapshots in use (what the `gigabytes` quota counts).
    pub(crate) fn gigabytes_used(&self) -> u64 {
        self.volumes.values().map(|v| v.size).sum::<u64>()
            + self.snapshots.values().map(|s| s.size).sum::<u64>()
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
            match v.take_due(now, stamp) {
                Some(VolumeOutcome::Settle { status, size }) => {
                    v.status = status;
                    v.size = size;
                }
                Some(VolumeOutcome::Gone) => gone.push(v.id.clone()),
                Some(VolumeOutcome::Failed(f)) => {
                    v.status = f.status.clone();
                    failures.push(("VOLUME", v.id.clone(), f));
                }
                None => {}
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
            match s.take_due(now, stamp) {
                Some(SnapshotOutcome::Available) => s.status = "available".into(),
                Some(SnapshotOutcome::Gone) => gone.push(s.id.clone()),
                Some(SnapshotOutcome::Failed(f)) => {
                    s.status = f.status.clone();
                    failures.push(("SNAPSHOT", s.id.clone(), f));
                }
                None => {}
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

    /// Ends a file copy: the resource starts its plan (a volume's file grown to its size
    /// first), or ends in `error` with a user message; a resource gone meanwhile leaves no
    /// file.
    pub(crate) fn finish_copy(&mut self, target: CopyTarget, result: Result<()>) {
        let failure = |e: &crate::Error| BlockFailure {
            status: "error".into(),
            action: "001",
            detail_id: "001".into(),
            message: Some(format!("The backend could not copy the data: {e}")),
        };
        match target {
            CopyTarget::Volume { id, plan } => {
                let file = disk::volume_file(&self.root, &id);
                let Some(v) = self.volumes.get_mut(&id) else {
                    let _ = disk::remove(&file);
                    return;
                };
                let result = result.and_then(|()| disk::allocate(&file, v.size));
                v.end_copy(plan, result.is_ok(), "error");
                if let Err(e) = result {
                    self.record_failure("VOLUME", &id, &failure(&e));
                }
            }
            CopyTarget::Snapshot { id, plan } => {
                let Some(s) = self.snapshots.get_mut(&id) else {
                    let _ = disk::remove(&disk::snapshot_file(&self.root, &id));
                    return;
                };
                s.end_copy(plan, result.is_ok(), "error");
                if let Err(e) = result {
                    self.record_failure("SNAPSHOT", &id, &failure(&e));
                }
            }
        }
    }

    /// The view of volume `id`, transitions due by now applied.
    pub(crate) fn volume_view(&mut self, id: &str) -> Option<VolumeView> {
        self.advance(Instant::now());
        self.volumes.get(id).map(|v| VolumeView {
            id: v.id.clone(),
            name: v.name.clone(),
            size: v.size,
            status: v.status.clone(),
            availability_zone: v.availability_zone.clone(),
            volume_type: v.type_name.clone(),
            multiattach: v.multiattach,
            snapshot_id: v.snapshot_id.clone(),
            source_volid: v.source_volid.clone(),
            attached_to: v.attachments.iter().map(|a| a.server_id.clone()).collect(),
            metadata: v.metadata.clone(),
            scheduler_hints: v.scheduler_hints.clone(),
        })
    }

    /// What is still present, in creation order.
    pub(crate) fn leftovers(&mut self) -> BlockLeftovers {
        self.advance(Instant::now());
        let mut volumes: Vec<&Volume> = self.volumes.values().collect();
        volumes.sort_by_key(|v| v.seq);
        let mut snapshots: Vec<&VolumeSnapshot> = self.snapshots.values().collect();
        snapshots.sort_by_key(|s| s.seq);
        BlockLeftovers {
            volumes: volumes
                .iter()
                .map(|v| BlockLeftover {
                    id: v.id.clone(),
                    name: v.name.clone(),
                    status: v.status.clone(),
                    volume_id: None,
                    server_id: None,
                })
                .collect(),
            volume_snapshots: snapshots
                .iter()
                .map(|s| BlockLeftover {
                    id: s.id.clone(),
                    name: s.name.clone(),
                    status: s.status.clone(),
                    volume_id: Some(s.volume_id.clone()),
                    server_id: None,
                })
                .collect(),
            attachments: volumes
                .iter()
                .flat_map(|v| {
                    v.attachments.iter().map(|a| BlockLeftover {
                        id: a.id.clone(),
                        name: Some(a.device.clone()),
                        status: "attached".into(),
                        volume_id: Some(v.id.clone()),
                        server_id: Some(a.server_id.clone()),
                    })
                })
                .collect(),
            loop_devices: self
                .loops
                .list()
                .into_iter()
                .map(|l| LoopLeftover {
                    device: l.device.display().to_string(),
                    file: l.file.display().to_string(),
                    link: l.link.display().to_string(),
                })
                .collect(),
        }
    }
}

/// Stuff the leftover report lists about block storage.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockLeftovers {
    /// Volumes not yet deleted (those still `deleting` too).
    pub volumes: Vec<BlockLeftover>,
    /// Volume snapshots not yet deleted.
    pub volume_snapshots: Vec<BlockLeftover>,
    /// Volumes still attached to servers (`id` is the attachment's).
    pub attachments: Vec<BlockLeftover>,
    /// Loop devices still set up on the host: `{device, file, link}`.
    pub loop_devices: Vec<LoopLeftover>,
}

impl BlockLeftovers {
    /// True when nothing is left.
    pub fn is_empty(&self) -> bool {
        self.volumes.is_empty()
            && self.volume_snapshots.is_empty()
            && self.attachments.is_empty()
            && self.loop_devices.is_empty()
    }
}

/// A volume, snapshot or attachment still present.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockLeftover {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: Option<String>,
    /// Its status.
    pub status: String,
    /// The volume it belongs to (snapshots, attachments).
    pub volume_id: Option<String>,
    /// The server (attachments).
    pub server_id: Option<String>,
}

/// What a test may want to know of a volume: where it is, how big, to which servers it is
/// attached (the cloud's view, as an administrator sees it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeView {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: Option<String>,
    /// Size in GiB.
    pub size: u64,
    /// Status (`available`, `in-use`, …).
    pub status: String,
    /// Availability zone.
    pub availability_zone: String,
    /// Volume type name.
    pub volume_type: String,
    /// Whether it may be attached to several servers.
    pub multiattach: bool,
    /// The snapshot it was made from.
    pub snapshot_id: Option<String>,
    /// The volume it was cloned from.
    pub source_volid: Option<String>,
    /// The ids of the servers it is attached to, in attachment order.
    pub attached_to: Vec<String>,
    /// Its metadata.
    pub metadata: BTreeMap<String, String>,
    /// The `same_host`/`different_host` scheduler hints it was created with (volume ids,
    /// a single-string hint as a one-item list); empty without hints.
    pub scheduler_hints: BTreeMap<String, Vec<String>>,
}

/// A loop device still set up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoopLeftover {
    /// `/dev/loopN`.
    pub device: String,
    /// The volume file behind it.
    pub file: String,
    /// Its link in the server's disk directory.
    pub link: String,
}
