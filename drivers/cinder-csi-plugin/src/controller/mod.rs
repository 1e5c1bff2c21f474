//! The CSI Controller service: Cinder volumes and snapshots, attached to Nova servers.
//!
//! The logic works on plain inputs and the [`BlockStorageCloud`] client; [`service`] only maps the CSI
//! messages. Operations are idempotent by name (volumes, snapshots) or by id, and wait for
//! the status the caller needs (`available`, `in-use`) with backoff ([`WaitPolicy`]).

pub mod page;
pub mod params;
mod service;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use csi_proto::v1;

use crate::error::{Error, Result};
use crate::pvc::{AFFINITY, ANTI_AFFINITY, ClaimHints, ClaimReader};
use crate::wait::{Progress, WaitPolicy};
use csi_proto::in_flight::InFlight;
use openstack_client::BlockStorageCloud;
use openstack_client::cinder::{NewVolume, SchedulerHints, Snapshot, Volume};
pub use page::page;
use params::{GIB, VolumeParameters};

/// The topology key of a volume's and a node's availability zone.
pub const TOPOLOGY_ZONE_KEY: &str = "topology.cinder.csi.openstack.org/zone";

/// Volume statuses in which Cinder accepts new operations (after a detach: no longer
/// `detaching`).
const SETTLED: &[&str] = &["available", "in-use", "error", "error_extending"];

/// Volume statuses that end by themselves; operations meanwhile are retried.
const TRANSIENT: &[&str] = &[
    "creating",
    "attaching",
    "detaching",
    "extending",
    "reserved",
    "downloading",
    "uploading",
    "backing-up",
    "restoring-backup",
    "maintenance",
];

/// Volume metadata naming the cluster (`--cluster`).
pub const CLUSTER_METADATA_KEY: &str = "cinder.csi.openstack.org/cluster";

/// Controller settings from flags and `[BlockStorage]`.
#[derive(Clone, Debug, Default)]
pub struct ControllerSettings {
    /// `--cluster`.
    pub cluster: String,
    /// `--with-topology`.
    pub with_topology: bool,
    /// `[BlockStorage] ignore-volume-az`.
    pub ignore_volume_az: bool,
    /// How long to wait for a status.
    pub wait: WaitPolicy,
    /// With `--pvc-annotations`: where the claims' annotations are read.
    pub claims: Option<ClaimReader>,
}

/// The Controller service.
#[derive(Clone, Debug)]
pub struct Controller {
    cloud: Arc<BlockStorageCloud>,
    settings: Arc<ControllerSettings>,
    operations: InFlight,
}

/// What CreateVolume asks for, out of its CSI message.
#[derive(Clone, Debug, Default)]
pub struct CreateRequest {
    /// The CSI name (the Cinder volume name).
    pub name: String,
    /// Size in GiB.
    pub size_gib: i64,
    /// StorageClass parameters.
    pub parameters: VolumeParameters,
    /// Provisioner metadata (`csi.storage.k8s.io/pvc/name` …), stored on the volume.
    pub metadata: BTreeMap<String, String>,
    /// The zone topology prefers, if any.
    pub topology_zone: Option<String>,
    /// Source snapshot.
    pub snapshot_id: Option<String>,
    /// Source volume.
    pub source_volume_id: Option<String>,
    /// The claim's affinity annotations (`--pvc-annotations`), names or ids unresolved.
    pub claim_hints: ClaimHints,
}

/// A created (or found) volume and the scheduler hints it was created with.
#[derive(Clone, Debug)]
pub struct Created {
    /// The volume.
    pub volume: Volume,
    /// The resolved hints of a new volume; None for one found by name or made without.
    pub scheduler_hints: Option<SchedulerHints>,
}

fn bytes(gib: i64) -> i64 {
    gib.saturating_mul(GIB)
}

impl Controller {
    /// A controller on `cloud`.
    pub fn new(cloud: Arc<BlockStorageCloud>, settings: ControllerSettings) -> Self {
        Controller {
            cloud,
            settings: Arc::new(settings),
            operations: InFlight::default(),
        }
    }

    /// The CSI volume for a Cinder volume.
    pub fn csi_volume(&self, volume: &Volume, fs_type: Option<&str>) -> v1::Volume {
        let mut context = HashMap::new();
        if let Some(fs) = fs_type {
            context.insert("fsType".to_string(), fs.to_string());
        }
        let content_source = match (&volume.snapshot_id, &volume.source_volid) {
            (Some(id), _) if !id.is_empty() => Some(v1::VolumeContentSource {
                r#type: Some(v1::volume_content_source::Type::Snapshot(
                    v1::volume_content_source::SnapshotSource {
                        snapshot_id: id.clone(),
                    },
                )),
            }),
            (_, Some(id)) if !id.is_empty() => Some(v1::VolumeContentSource {
                r#type: Some(v1::volume_content_source::Type::Volume(
                    v1::volume_content_source::VolumeSource {
                        volume_id: id.clone(),
                    },
                )),
            }),
            _ => None,
        };
        let accessible_topology = match &volume.availability_zone {
            Some(zone)
                if self.settings.with_topology
                    && !self.settings.ignore_volume_az
                    && !zone.is_empty() =>
            {
                vec![v1::Topology {
                    segments: HashMap::from([(TOPOLOGY_ZONE_KEY.to_string(), zone.clone())]),
                }]
            }
            _ => Vec::new(),
        };
        v1::Volume {
            capacity_bytes: bytes(volume.size),
            volume_id: volume.id.clone(),
            volume_context: context,
            content_source,
            accessible_topology,
        }
    }

    async fn wait_volume(&self, id: &str, wanted: &[&str]) -> Result<Volume> {
        self.settings
            .wait
            .wait(&format!("volume {id}"), || async {
                let volume = self.cloud.volume(id).await?;
                if wanted.contains(&volume.status.as_str()) {
                    Ok(Progress::Done(volume))
                } else if volume.status.starts_with("error") {
                    Err(Error::ResourceFailed(format!(
                        "volume {id} is in status {}: {}",
                        volume.status,
                        self.reason(id).await
                    )))
                } else {
                    Ok(Progress::Pending(format!("in status {}", volume.status)))
                }
            })
            .await
    }

    /// Cinder's newest user message about `id`, or a pointer to where to look.
    async fn reason(&self, id: &str) -> String {
        match self.cloud.user_messages(id).await {
            Ok(messages) if !messages.is_empty() => messages[0].clone(),
            Ok(_) => "Cinder left no user message about it".into(),
            Err(e) => format!("(Cinder's user messages could not be read: {e})"),
        }
    }

    /// Creates the volume, or finds the one made by an earlier call with the same name, and
    /// waits for it to be `available`.
    pub async fn create_volume(&self, request: CreateRequest) -> Result<Volume> {
        Ok(self.create_volume_with_hints(request).await?.volume)
    }

    /// The volume id of `entry` of `annotation`: a volume with that id, else the one volume
    /// with that name, as upstream resolves them. None found, or several of that name, is
    /// InvalidArgument naming the annotation.
    async fn resolve_volume(&self, annotation: &str, entry: &str) -> Result<String> {
        if crate::pvc::is_uuid(entry) {
            match self.cloud.volume(entry).await {
                Ok(volume) => return Ok(volume.id),
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e.into()),
            }
        }
        let named = self.cloud.volumes(Some(entry)).await?;
        match named.as_slice() {
            [volume] => Ok(volume.id.clone()),
            [] => Err(Error::InvalidArgument(format!(
                "annotation {annotation}: no Cinder volume has the id or name {entry:?}"
            ))),
            several => Err(Error::InvalidArgument(format!(
                "annotation {annotation}: {} Cinder volumes are named {entry:?}; name one by id",
                several.len()
            ))),
        }
    }

    /// The claim's hints with names resolved to volume ids; None when it asks for nothing.
    async fn resolve_hints(&self, claim: &ClaimHints) -> Result<Option<SchedulerHints>> {
        if claim.is_empty() {
            return Ok(None);
        }
        let mut hints = SchedulerHints::default();
        for (annotation, entries, ids) in [
            (AFFINITY, &claim.affinity, &mut hints.same_host),
            (
                ANTI_AFFINITY,
                &claim.anti_affinity,
                &mut hints.different_host,
            ),
        ] {
            for entry in entries {
                let id = self.resolve_volume(annotation, entry).await?;
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
        }
        Ok(Some(hints))
    }

    /// With `--pvc-annotations`, the hints the request's claim asks for (none when the
    /// request names no claim, as without the provisioner's `--extra-create-metadata`).
    pub async fn claim_hints(&self, parameters: &HashMap<String, String>) -> Result<ClaimHints> {
        let Some(claims) = &self.settings.claims else {
            return Ok(ClaimHints::default());
        };
        let (Some(name), Some(namespace)) = (
            parameters.get(crate::pvc::PVC_NAME),
            parameters.get(crate::pvc::PVC_NAMESPACE),
        ) else {
            tracing::debug!(
                "--pvc-annotations: the request names no claim (extra-create-metadata off?)"
            );
            return Ok(ClaimHints::default());
        };
        let annotations = claims.annotations(namespace, name).await?;
        ClaimHints::from_annotations(&format!("{namespace}/{name}"), &annotations)
    }

    /// [`Controller::create_volume`], also telling the scheduler hints the claim's
    /// annotations resolved to (upstream returns them in the volume context).
    pub async fn create_volume_with_hints(&self, request: CreateRequest) -> Result<Created> {
        let _in_flight = self.operations.begin(
            &format!("volume-name/{}", request.name),
            &format!("volume {:?}", request.name),
        )?;
        let existing = self.cloud.volumes(Some(&request.name)).await?;
        if existing.len() > 1 {
            return Err(Error::AlreadyExists(format!(
                "{} Cinder volumes are named {:?}; delete the extra ones",
                existing.len(),
                request.name
            )));
        }
        if let Some(volume) = existing.into_iter().next() {
            if volume.size != request.size_gib {
                return Err(Error::AlreadyExists(format!(
                    "volume {:?} exists ({}) with {} GiB, not the {} GiB asked",
                    request.name, volume.id, volume.size, request.size_gib
                )));
            }
            let source_matches = request
                .snapshot_id
                .as_deref()
                .is_none_or(|s| volume.snapshot_id.as_deref() == Some(s))
                && request
                    .source_volume_id
                    .as_deref()
                    .is_none_or(|s| volume.source_volid.as_deref() == Some(s));
            if !source_matches {
                return Err(Error::AlreadyExists(format!(
                    "volume {:?} exists ({}) from another source",
                    request.name, volume.id
                )));
            }
            let volume = self
                .wait_volume(&volume.id, &["available", "in-use"])
                .await?;
            return Ok(Created {
                volume,
                scheduler_hints: None,
            });
        }
        if let Some(snapshot_id) = &request.snapshot_id {
            let snapshot = self.cloud.snapshot(snapshot_id).await.map_err(|e| {
                if e.is_not_found() {
                    Error::NotFound(format!("source snapshot {snapshot_id} does not exist"))
                } else {
                    e.into()
                }
            })?;
            if snapshot.status != "available" {
                return Err(Error::Unavailable(format!(
                    "source snapshot {snapshot_id} is {}, not available yet",
                    snapshot.status
                )));
            }
        }
        if let Some(source) = &request.source_volume_id {
            self.cloud.volume(source).await.map_err(|e| {
                if e.is_not_found() {
                    Error::NotFound(format!("source volume {source} does not exist"))
                } else {
                    e.into()
                }
            })?;
        }
        let scheduler_hints = self.resolve_hints(&request.claim_hints).await?;
        let mut metadata = request.metadata.clone();
        if !self.settings.cluster.is_empty() {
            metadata.insert(CLUSTER_METADATA_KEY.into(), self.settings.cluster.clone());
        }
        let availability_zone = request
            .parameters
            .availability
            .clone()
            .or(request.topology_zone.clone());
        let created = self
            .cloud
            .create_volume(&NewVolume {
                name: request.name.clone(),
                size: request.size_gib,
                volume_type: request.parameters.volume_type.clone(),
                availability_zone,
                snapshot_id: request.snapshot_id.clone(),
                source_volid: request.source_volume_id.clone(),
                metadata,
                scheduler_hints: scheduler_hints.clone(),
            })
            .await?;
        tracing::info!(name = %request.name, volume_id = %created.id, hints = ?scheduler_hints, "volume created");
        match self.wait_volume(&created.id, &["available"]).await {
            Err(Error::ResourceFailed(message)) => {
                // A volume in error is of no use: delete it so that the retry starts afresh.
                let outcome = match self.cloud.delete_volume(&created.id).await {
                    Ok(()) => "it was deleted".to_string(),
                    Err(e) => format!("deleting it failed too: {e}"),
                };
                Err(Error::ResourceFailed(format!("{message}; {outcome}")))
            }
            other => other.map(|volume| Created {
                volume,
                scheduler_hints,
            }),
        }
    }

    /// Deletes the volume; a missing volume is no error, an attached one FailedPrecondition.
    pub async fn delete_volume(&self, id: &str) -> Result<()> {
        let _in_flight = self.operations.begin(id, &format!("volume {id}"))?;
        let volume = match self.cloud.volume(id).await {
            Ok(volume) => volume,
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        if !volume.attachments.is_empty() || volume.status == "in-use" {
            let servers: Vec<&str> = volume
                .attachments
                .iter()
                .map(|a| a.server_id.as_str())
                .collect();
            return Err(Error::FailedPrecondition(format!(
                "volume {id} is still attached to {}; unpublish it first",
                servers.join(", ")
            )));
        }
        if TRANSIENT.contains(&volume.status.as_str()) {
            return Err(Error::Unavailable(format!(
                "volume {id} is {}; it can be deleted once that is over",
                volume.status
            )));
        }
        if volume.status != "deleting" {
            match self.cloud.delete_volume(id).await {
                Err(e) if e.is_not_found() => return Ok(()),
                // Cinder refuses with 400 what the volume's state forbids (snapshots left).
                Err(openstack_client::Error::Api {
                    status: 400,
                    message,
                    ..
                }) => {
                    return Err(Error::FailedPrecondition(format!(
                        "Cinder refuses to delete volume {id}: {message}"
                    )));
                }
                Err(e) => return Err(e.into()),
                Ok(()) => {}
            }
        }
        // Gone before answering, so that a listing right after no longer shows it.
        self.wait_gone(&format!("deleting volume {id}"), || self.cloud.volume(id))
            .await
    }

    /// Waits until `get` answers NotFound; an `error_deleting` status ends the wait.
    async fn wait_gone<T, F, Fut>(&self, what: &str, get: F) -> Result<()>
    where
        T: HasStatus,
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T, openstack_client::Error>>,
    {
        self.settings
            .wait
            .wait(what, || async {
                match get().await {
                    Err(e) if e.is_not_found() => Ok(Progress::Done(())),
                    Err(e) => Err(e.into()),
                    Ok(item) if item.status() == "error_deleting" => Err(Error::ResourceFailed(
                        format!("{what}: Cinder failed (error_deleting)"),
                    )),
                    Ok(item) => Ok(Progress::Pending(format!("in status {}", item.status()))),
                }
            })
            .await
    }

    /// Attaches the volume to the node's server and waits until Cinder shows it `in-use`
    /// there; answers the device path Nova named.
    pub async fn publish(&self, volume_id: &str, node_id: &str) -> Result<String> {
        // Two attaches racing would both POST to Nova, and the second gets a 400.
        let _in_flight = self
            .operations
            .begin(volume_id, &format!("volume {volume_id}"))?;
        let volume = self.cloud.volume(volume_id).await.map_err(|e| {
            if e.is_not_found() {
                Error::NotFound(format!("volume {volume_id} does not exist"))
            } else {
                e.into()
            }
        })?;
        if !self.cloud.server_exists(node_id).await? {
            return Err(no_such_server(node_id));
        }
        let device = if volume.attached_to(node_id) {
            let known = volume
                .attachments
                .iter()
                .find(|a| a.server_id == node_id)
                .and_then(|a| a.device.clone());
            match known {
                Some(device) => Some(device),
                None => self.cloud.attachment_device(node_id, volume_id).await?,
            }
        } else {
            if !volume.attachments.is_empty() && !volume.multiattach {
                let others: Vec<&str> = volume
                    .attachments
                    .iter()
                    .map(|a| a.server_id.as_str())
                    .collect();
                return Err(Error::FailedPrecondition(format!(
                    "volume {volume_id} is attached to {} and is not multiattach",
                    others.join(", ")
                )));
            }
            self.cloud.attach(node_id, volume_id).await?
        };
        let attached = self
            .settings
            .wait
            .wait(
                &format!("attaching volume {volume_id} to {node_id}"),
                || async {
                    let volume = self.cloud.volume(volume_id).await?;
                    if volume.status == "in-use" && volume.attached_to(node_id) {
                        Ok(Progress::Done(volume))
                    } else if volume.status.starts_with("error") {
                        Err(Error::ResourceFailed(format!(
                            "volume {volume_id} went to {} while attaching to {node_id}",
                            volume.status
                        )))
                    } else {
                        Ok(Progress::Pending(format!("in status {}", volume.status)))
                    }
                },
            )
            .await?;
        Ok(device
            .or_else(|| {
                attached
                    .attachments
                    .iter()
                    .find(|a| a.server_id == node_id)
                    .and_then(|a| a.device.clone())
            })
            .unwrap_or_default())
    }

    /// Detaches the volume from the node's server and waits until Cinder no longer lists
    /// the attachment. Missing volumes, servers and attachments are no error.
    pub async fn unpublish(&self, volume_id: &str, node_id: &str) -> Result<()> {
        let _in_flight = self
            .operations
            .begin(volume_id, &format!("volume {volume_id}"))?;
        let volume = match self.cloud.volume(volume_id).await {
            Ok(volume) => volume,
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        if volume.attached_to(node_id) {
            self.cloud.detach(node_id, volume_id).await?;
        }
        self.settings
            .wait
            .wait(
                &format!("detaching volume {volume_id} from {node_id}"),
                || async {
                    match self.cloud.volume(volume_id).await {
                        // Done once Cinder no longer lists the attachment and has
                        // settled (`detaching` refuses deletes and new attachments).
                        Ok(v)
                            if v.attached_to(node_id) || !SETTLED.contains(&v.status.as_str()) =>
                        {
                            Ok(Progress::Pending(format!("in status {}", v.status)))
                        }
                        Ok(_) => Ok(Progress::Done(())),
                        Err(e) if e.is_not_found() => Ok(Progress::Done(())),
                        Err(e) => Err(e.into()),
                    }
                },
            )
            .await
    }

    /// Snapshots the volume (or finds the snapshot of that name) and waits for it. `force`
    /// lets Cinder snapshot an `in-use` volume.
    pub async fn create_snapshot(
        &self,
        name: &str,
        volume_id: &str,
        metadata: &BTreeMap<String, String>,
        force: bool,
    ) -> Result<Snapshot> {
        let _in_flight = self.operations.begin(
            &format!("snapshot-name/{name}"),
            &format!("snapshot {name:?}"),
        )?;
        let existing = self.cloud.snapshots(Some(name), None).await?;
        let snapshot = match existing.into_iter().next() {
            Some(s) if s.volume_id != volume_id => {
                return Err(Error::AlreadyExists(format!(
                    "snapshot {name:?} exists ({}) of volume {}, not of {volume_id}",
                    s.id, s.volume_id
                )));
            }
            Some(s) => s,
            None => {
                self.cloud.volume(volume_id).await.map_err(|e| {
                    if e.is_not_found() {
                        Error::NotFound(format!("source volume {volume_id} does not exist"))
                    } else {
                        e.into()
                    }
                })?;
                self.cloud
                    .create_snapshot(name, volume_id, metadata, force)
                    .await?
            }
        };
        let id = snapshot.id.clone();
        self.settings
            .wait
            .wait(&format!("snapshot {id}"), || async {
                let s = self.cloud.snapshot(&id).await?;
                match s.status.as_str() {
                    "available" => Ok(Progress::Done(s)),
                    status if status.starts_with("error") => Err(Error::ResourceFailed(format!(
                        "snapshot {id} of volume {volume_id} is in status {status}"
                    ))),
                    status => Ok(Progress::Pending(format!("in status {status}"))),
                }
            })
            .await
    }

    /// Deletes the snapshot; a missing one is no error.
    pub async fn delete_snapshot(&self, id: &str) -> Result<()> {
        let _in_flight = self.operations.begin(id, &format!("snapshot {id}"))?;
        match self.cloud.delete_snapshot(id).await {
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(e.into()),
            Ok(()) => {}
        }
        // Gone before answering: the source volume can be deleted right after.
        self.wait_gone(&format!("deleting snapshot {id}"), || {
            self.cloud.snapshot(id)
        })
        .await
    }

    /// Grows the volume to at least `size_gib` and waits for the new size; answers it.
    pub async fn expand(&self, volume_id: &str, size_gib: i64) -> Result<i64> {
        let volume = self.cloud.volume(volume_id).await.map_err(|e| {
            if e.is_not_found() {
                Error::NotFound(format!("volume {volume_id} does not exist"))
            } else {
                e.into()
            }
        })?;
        if volume.size >= size_gib {
            return Ok(volume.size);
        }
        self.cloud.extend_volume(volume_id, size_gib).await?;
        let grown = self
            .settings
            .wait
            .wait(&format!("extending volume {volume_id}"), || async {
                let v = self.cloud.volume(volume_id).await?;
                if v.size >= size_gib && (v.status == "available" || v.status == "in-use") {
                    Ok(Progress::Done(v))
                } else if v.status.starts_with("error") {
                    Err(Error::ResourceFailed(format!(
                        "volume {volume_id} is in status {} after extending",
                        v.status
                    )))
                } else {
                    Ok(Progress::Pending(format!(
                        "{} GiB in status {}",
                        v.size, v.status
                    )))
                }
            })
            .await?;
        Ok(grown.size)
    }

    /// The cloud client.
    pub fn cloud(&self) -> &BlockStorageCloud {
        &self.cloud
    }
}

/// A Cinder resource with a status.
trait HasStatus {
    fn status(&self) -> &str;
}

impl HasStatus for Volume {
    fn status(&self) -> &str {
        &self.status
    }
}

impl HasStatus for Snapshot {
    fn status(&self) -> &str {
        &self.status
    }
}

/// NotFound for a node that is no Nova server.
fn no_such_server(id: &str) -> Error {
    Error::NotFound(format!("node {id} is not a Nova server of this project"))
}
