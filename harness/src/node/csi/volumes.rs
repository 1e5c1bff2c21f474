//! kubelet's CSI volume manager: mounting the `persistentVolumeClaim` volumes of pods backed
//! by CSI persistent volumes, unmounting them when pods go, reconstructing what is mounted
//! after an agent restart, `volumesInUse`, and node-side expansion.
//!
//! Paths in requests are kubelet's (`/var/lib/kubelet/…`, as a node plugin running in a pod
//! with that directory mounted sees them); the agent works on their place in its run
//! directory ([`PluginPaths::host_path`]):
//!
//! - staging: `/var/lib/kubelet/plugins/kubernetes.io/csi/pv/<pv>/globalmount`, with
//!   `vol_data.json` next to it (`driverName`, `volumeHandle`);
//! - publishing: `/var/lib/kubelet/pods/<pod uid>/volumes/kubernetes.io~csi/<pv>/mount`, with
//!   `vol_data.json` next to it (`driverName`, `volumeHandle`, `specVolID`, `nodeName`,
//!   `attachmentID`, `volumeLifecycleMode`), which is what reconstruction and orphan cleanup
//!   read.
//!
//! Mounting, as kubelet 1.20 does: the claim must exist and be Bound to a PV with `spec.csi`;
//! the driver must be registered on the node; the volume is added to `volumesInUse`; when the
//! CSIDriver object asks for attachment (or is missing), the volume must be listed in the
//! Node's `status.volumesAttached` and the VolumeAttachment's `attachmentMetadata` is the
//! publish context; with the node `STAGE_UNSTAGE_VOLUME` capability the volume is staged once
//! per node (refcounted across pods); then it is published for the pod.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use csi_proto::v1::node_client::NodeClient;
use csi_proto::v1::node_service_capability::rpc::Type as CapabilityType;
use csi_proto::v1::volume_capability::access_mode::Mode;
use csi_proto::v1::volume_capability::{AccessMode, AccessType, MountVolume};
use csi_proto::v1::{
    CapacityRange, NodeExpandVolumeRequest, NodeGetCapabilitiesRequest, NodePublishVolumeRequest,
    NodeStageVolumeRequest, NodeUnpublishVolumeRequest, NodeUnstageVolumeRequest, VolumeCapability,
    node_service_capability,
};
use k8s_openapi::api::core::v1::{
    Node, PersistentVolume, PersistentVolumeClaim, Pod, Secret, SecretReference, Volume,
};
use k8s_openapi::api::storage::v1::{CSIDriver, VolumeAttachment};
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::watch;

use super::{CsiDrivers, KUBELET_ROOT, PluginPaths, RegisteredDriver};
use crate::node::error_chain;
use crate::node::mounts;

/// The plugin name in unique volume names and `volumesInUse`.
pub const CSI_PLUGIN_NAME: &str = "kubernetes.io/csi";
/// The name of the volume metadata files next to staging and publish directories.
pub const VOL_DATA_FILE: &str = "vol_data.json";
/// The PVC condition asking the node to grow the file system.
pub const FS_RESIZE_PENDING: &str = "FileSystemResizePending";
/// How long one node call to a driver may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// `kubernetes.io/csi/<driver>^<volumeHandle>`: the volume's name in `volumesInUse` and
/// `volumesAttached`.
pub fn unique_volume_name(driver: &str, handle: &str) -> String {
    format!("{CSI_PLUGIN_NAME}/{driver}^{handle}")
}

/// The VolumeAttachment kubelet and the attach/detach controller name for a volume on a
/// node: `csi-` + hex SHA-256 of volume handle, driver and node name.
pub fn attachment_name(handle: &str, driver: &str, node: &str) -> String {
    let digest = ring::digest::digest(
        &ring::digest::SHA256,
        format!("{handle}{driver}{node}").as_bytes(),
    );
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("csi-{hex}")
}

/// kubelet's staging path of a PV.
pub fn staging_path(pv: &str) -> PathBuf {
    Path::new(KUBELET_ROOT)
        .join("plugins/kubernetes.io/csi/pv")
        .join(pv)
        .join("globalmount")
}

/// kubelet's publish path of a PV for a pod.
pub fn publish_path(pod_uid: &str, pv: &str) -> PathBuf {
    pod_csi_dir(pod_uid).join(pv).join("mount")
}

/// kubelet's directory of a pod's CSI volumes.
fn pod_csi_dir(pod_uid: &str) -> PathBuf {
    Path::new(KUBELET_ROOT)
        .join("pods")
        .join(pod_uid)
        .join("volumes/kubernetes.io~csi")
}

/// What `vol_data.json` holds (kubelet's keys).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct VolData {
    driver_name: String,
    volume_handle: String,
    #[serde(
        default,
        rename = "specVolID",
        skip_serializing_if = "String::is_empty"
    )]
    spec_vol_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    node_name: String,
    #[serde(
        default,
        rename = "attachmentID",
        skip_serializing_if = "String::is_empty"
    )]
    attachment_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    volume_lifecycle_mode: String,
}

impl VolData {
    fn read(path: &Path) -> Result<VolData, String> {
        let text = std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        serde_json::from_slice(&text).map_err(|e| format!("parsing {}: {e}", path.display()))
    }

    fn write(&self, path: &Path) -> Result<(), String> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("creating {}: {e}", parent.display()))?;
        }
        let text = serde_json::to_vec(self).map_err(|e| e.to_string())?;
        std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))
    }

    fn unique_name(&self) -> String {
        unique_volume_name(&self.driver_name, &self.volume_handle)
    }
}

/// Why a pod volume could not be mounted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MountError {
    /// The volume is not attached to the node yet: retried about every second.
    NotAttached(String),
    /// Anything else, with kubelet's message: retried with back-off.
    Failed(String),
}

impl MountError {
    /// The event message.
    pub fn message(&self) -> &str {
        match self {
            MountError::NotAttached(m) | MountError::Failed(m) => m,
        }
    }
}

/// A mounted (staged and/or published) volume on this node.
#[derive(Debug, Clone)]
struct Mounted {
    driver: String,
    handle: String,
    pv: String,
    staged: bool,
    /// Pod UID → kubelet's publish path.
    pods: BTreeMap<String, PathBuf>,
}

#[derive(Debug, Default)]
struct State {
    /// Volumes pods want (mounting or mounted): unique name → pod UIDs.
    wanted: BTreeMap<String, BTreeSet<String>>,
    /// What is staged or published: unique name → volume.
    mounted: BTreeMap<String, Mounted>,
}

impl State {
    fn in_use(&self) -> BTreeSet<String> {
        self.wanted
            .keys()
            .chain(self.mounted.keys())
            .cloned()
            .collect()
    }
}

/// The node's CSI volume manager (see the module docs); shared by the pod workers.
pub struct VolumeManager {
    client: Client,
    node_name: String,
    paths: PluginPaths,
    drivers: CsiDrivers,
    state: Mutex<State>,
    /// One lock per unique volume name: stage/publish/unpublish/unstage of one volume never
    /// overlap.
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    in_use: watch::Sender<BTreeSet<String>>,
}

impl std::fmt::Debug for VolumeManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VolumeManager")
            .field("node_name", &self.node_name)
            .field("run_dir", &self.paths.run_dir)
            .finish_non_exhaustive()
    }
}

impl VolumeManager {
    /// A manager for `node_name`, whose run directory `paths` describes, mounting through the
    /// drivers the plugin watcher registers in `drivers`.
    pub fn new(client: Client, node_name: &str, paths: PluginPaths, drivers: CsiDrivers) -> Self {
        VolumeManager {
            client,
            node_name: node_name.to_string(),
            paths,
            drivers,
            state: Mutex::new(State::default()),
            locks: Mutex::new(HashMap::new()),
            in_use: watch::Sender::new(BTreeSet::new()),
        }
    }

    /// The registered drivers.
    pub fn drivers(&self) -> &CsiDrivers {
        &self.drivers
    }

    /// The unique names of the volumes in use on this node, sorted.
    pub fn in_use(&self) -> Vec<String> {
        self.in_use.borrow().iter().cloned().collect()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn update(&self, change: impl FnOnce(&mut State)) {
        let mut state = self.state();
        change(&mut state);
        let now = state.in_use();
        self.in_use.send_if_modified(|current| {
            let changed = *current != now;
            *current = now;
            changed
        });
    }

    async fn lock(&self, unique: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = self
            .locks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(unique.to_string())
            .or_default()
            .clone();
        lock.lock_owned().await
    }

    fn host(&self, kubelet_path: &Path) -> PathBuf {
        self.paths.host_path(kubelet_path)
    }

    /// Rebuilds what is mounted from the run directory after an agent restart: publish
    /// directories whose `vol_data.json` exists and whose `mount` is a mount point count as
    /// published, staging directories with a `vol_data.json` as staged.
    pub fn reconstruct(&self) {
        let mut found: BTreeMap<String, Mounted> = BTreeMap::new();
        let staging_root = self.host(&Path::new(KUBELET_ROOT).join("plugins/kubernetes.io/csi/pv"));
        for (pv, pv_dir) in subdirs(&staging_root) {
            match VolData::read(&pv_dir.join(VOL_DATA_FILE)) {
                Ok(data) => {
                    found
                        .entry(data.unique_name())
                        .or_insert_with(|| Mounted {
                            driver: data.driver_name.clone(),
                            handle: data.volume_handle.clone(),
                            pv: pv.clone(),
                            staged: false,
                            pods: BTreeMap::new(),
                        })
                        .staged = true;
                }
                Err(e) => tracing::warn!(error = %e, "ignoring a staging directory"),
            }
        }
        for (uid, _) in subdirs(&self.paths.run_dir.join("pods")) {
            for (pv, pv_dir) in subdirs(&self.host(&pod_csi_dir(&uid))) {
                let Ok(data) = VolData::read(&pv_dir.join(VOL_DATA_FILE)) else {
                    continue;
                };
                if !mounts::is_mount_point(&pv_dir.join("mount")).unwrap_or(false) {
                    continue;
                }
                found
                    .entry(data.unique_name())
                    .or_insert_with(|| Mounted {
                        driver: data.driver_name.clone(),
                        handle: data.volume_handle.clone(),
                        pv: pv.clone(),
                        staged: false,
                        pods: BTreeMap::new(),
                    })
                    .pods
                    .insert(uid.clone(), publish_path(&uid, &pv));
            }
        }
        if !found.is_empty() {
            tracing::info!(node = %self.node_name, volumes = ?found.keys().collect::<Vec<_>>(), "reconstructed mounted CSI volumes");
        }
        self.update(|state| state.mounted.extend(found));
    }

    /// Mounts `volume` (a `persistentVolumeClaim` or inline `csi` volume) of `pod`: returns
    /// the host directory containers bind-mount and whether it is read-only.
    pub async fn mount(&self, pod: &Pod, volume: &Volume) -> Result<(PathBuf, bool), MountError> {
        let fail = MountError::Failed;
        if volume.csi.is_some() {
            return Err(fail(format!(
                "MountVolume.SetUp failed for volume {:?} : kubernetes.io/csi: inline (ephemeral) CSI volumes are not supported by the node agent",
                volume.name
            )));
        }
        let Some(claim) = &volume.persistent_volume_claim else {
            return Err(fail(format!("volume {:?} is not a claim", volume.name)));
        };
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let claim_name = &claim.claim_name;
        let unable = |reason: String| {
            fail(format!(
                "Unable to attach or mount volumes: unmounted volumes=[{}]: error processing PVC {namespace}/{claim_name}: {reason}",
                volume.name
            ))
        };
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), namespace);
        let pvc = match claims.get_opt(claim_name).await {
            Ok(Some(pvc)) => pvc,
            Ok(None) => {
                return Err(unable(format!(
                    "failed to fetch PVC from API server: persistentvolumeclaims {claim_name:?} not found"
                )));
            }
            Err(e) => {
                return Err(unable(format!(
                    "failed to fetch PVC from API server: {}",
                    error_chain(&e)
                )));
            }
        };
        let phase = pvc.status.as_ref().and_then(|s| s.phase.as_deref());
        let pv_name = pvc
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.clone())
            .unwrap_or_default();
        if phase != Some("Bound") || pv_name.is_empty() {
            return Err(unable("PVC is not bound".into()));
        }
        let pvs: Api<PersistentVolume> = Api::all(self.client.clone());
        let pv = match pvs.get_opt(&pv_name).await {
            Ok(Some(pv)) => pv,
            Ok(None) => {
                return Err(unable(format!(
                    "failed to fetch PV {pv_name:?} from API server: persistentvolumes {pv_name:?} not found"
                )));
            }
            Err(e) => {
                return Err(unable(format!(
                    "failed to fetch PV {pv_name:?} from API server: {}",
                    error_chain(&e)
                )));
            }
        };
        let claim_ref_uid = pv
            .spec
            .as_ref()
            .and_then(|s| s.claim_ref.as_ref())
            .and_then(|r| r.uid.clone());
        if claim_ref_uid.is_some() && claim_ref_uid != pvc.metadata.uid {
            return Err(unable(format!(
                "found PV object {pv_name:?} but it has a ClaimRef that points to a different PVC"
            )));
        }
        let spec = pv.spec.clone().unwrap_or_default();
        let Some(csi) = spec.csi.clone() else {
            return Err(fail(format!(
                "MountVolume.SetUp failed for volume {pv_name:?} : PV {pv_name:?} (claim {namespace}/{claim_name}) has no spec.csi: the node agent mounts CSI persistent volumes only"
            )));
        };
        let unique = unique_volume_name(&csi.driver, &csi.volume_handle);
        let _guard = self.lock(&unique).await;
        let published = self
            .state()
            .mounted
            .get(&unique)
            .is_some_and(|m| m.pods.contains_key(&uid));
        let read_only = claim.read_only == Some(true) || csi.read_only == Some(true);
        let target = publish_path(&uid, &pv_name);
        if published {
            return Ok((self.host(&target), read_only));
        }
        self.update(|state| {
            state
                .wanted
                .entry(unique.clone())
                .or_default()
                .insert(uid.clone());
        });
        let setup_failed = |reason: String| {
            fail(format!(
                "MountVolume.SetUp failed for volume {pv_name:?} : {reason}"
            ))
        };
        let Some(driver) = self.drivers.get(&csi.driver) else {
            return Err(setup_failed(format!(
                "kubernetes.io/csi: mounter.SetUpAt failed to get CSI client: driver name {} not found in the list of registered CSI drivers",
                csi.driver
            )));
        };
        let csi_drivers: Api<CSIDriver> = Api::all(self.client.clone());
        let driver_object = csi_drivers.get_opt(&csi.driver).await.map_err(|e| {
            setup_failed(format!(
                "kubernetes.io/csi: reading CSIDriver {:?}: {}",
                csi.driver,
                error_chain(&e)
            ))
        })?;
        let driver_spec = driver_object.map(|d| d.spec);
        let attach_required = driver_spec
            .as_ref()
            .and_then(|s| s.attach_required)
            .unwrap_or(true);
        let pod_info = driver_spec
            .as_ref()
            .and_then(|s| s.pod_info_on_mount)
            .unwrap_or(false);
        let attachment = attachment_name(&csi.volume_handle, &csi.driver, &self.node_name);
        let publish_context = if attach_required {
            self.attachment_metadata(&unique, &attachment, &volume.name, &pv_name)
                .await?
        } else {
            HashMap::new()
        };
        let capabilities = node_capabilities(&driver)
            .await
            .map_err(|e| setup_failed(format!("kubernetes.io/csi: {e}")))?;
        let capability = volume_capability(&pv);
        let staging = capabilities
            .contains(&CapabilityType::StageUnstageVolume)
            .then(|| staging_path(&pv_name));
        if let Some(staging) = &staging {
            let staged = self.state().mounted.get(&unique).is_some_and(|m| m.staged);
            if !staged {
                let device_failed = |reason: String| {
                    fail(format!(
                        "MountVolume.MountDevice failed for volume {pv_name:?} : {reason}"
                    ))
                };
                let host_staging = self.host(staging);
                std::fs::create_dir_all(&host_staging).map_err(|e| {
                    device_failed(format!("creating {}: {e}", host_staging.display()))
                })?;
                let data = VolData {
                    driver_name: csi.driver.clone(),
                    volume_handle: csi.volume_handle.clone(),
                    ..VolData::default()
                };
                if let Some(parent) = host_staging.parent() {
                    data.write(&parent.join(VOL_DATA_FILE))
                        .map_err(device_failed)?;
                }
                let secrets = self
                    .secrets(csi.node_stage_secret_ref.as_ref(), "NodeStageSecretRef")
                    .await
                    .map_err(device_failed)?;
                let request = NodeStageVolumeRequest {
                    volume_id: csi.volume_handle.clone(),
                    publish_context: publish_context.clone(),
                    staging_target_path: staging.display().to_string(),
                    volume_capability: Some(capability.clone()),
                    secrets,
                    volume_context: csi
                        .volume_attributes
                        .clone()
                        .unwrap_or_default()
                        .into_iter()
                        .collect(),
                };
                let mut client = NodeClient::new(driver.channel.clone());
                rpc(client.node_stage_volume(request))
                    .await
                    .map_err(device_failed)?;
                tracing::info!(volume = %unique, pv = %pv_name, "volume staged");
                self.update(|state| {
                    state
                        .mounted
                        .entry(unique.clone())
                        .or_insert_with(|| Mounted {
                            driver: csi.driver.clone(),
                            handle: csi.volume_handle.clone(),
                            pv: pv_name.clone(),
                            staged: false,
                            pods: BTreeMap::new(),
                        })
                        .staged = true;
                });
            }
        }
        let host_target = self.host(&target);
        let data = VolData {
            driver_name: csi.driver.clone(),
            volume_handle: csi.volume_handle.clone(),
            spec_vol_id: pv_name.clone(),
            node_name: self.node_name.clone(),
            attachment_id: if attach_required {
                attachment.clone()
            } else {
                String::new()
            },
            volume_lifecycle_mode: "Persistent".into(),
        };
        if let Some(parent) = host_target.parent() {
            data.write(&parent.join(VOL_DATA_FILE))
                .map_err(&setup_failed)?;
        }
        let secrets = self
            .secrets(csi.node_publish_secret_ref.as_ref(), "NodePublishSecretRef")
            .await
            .map_err(&setup_failed)?;
        let mut volume_context: HashMap<String, String> = csi
            .volume_attributes
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect();
        if pod_info {
            let account = pod
                .spec
                .as_ref()
                .and_then(|s| s.service_account_name.clone())
                .unwrap_or_else(|| "default".into());
            for (key, value) in [
                ("pod.name", pod.metadata.name.clone().unwrap_or_default()),
                ("pod.namespace", namespace.to_string()),
                ("pod.uid", uid.clone()),
                ("serviceAccount.name", account),
                ("ephemeral", "false".into()),
            ] {
                volume_context.insert(format!("csi.storage.k8s.io/{key}"), value);
            }
        }
        let request = NodePublishVolumeRequest {
            volume_id: csi.volume_handle.clone(),
            publish_context,
            staging_target_path: staging
                .as_ref()
                .map(|s| s.display().to_string())
                .unwrap_or_default(),
            target_path: target.display().to_string(),
            volume_capability: Some(capability),
            readonly: read_only,
            secrets,
            volume_context,
        };
        let mut client = NodeClient::new(driver.channel.clone());
        rpc(client.node_publish_volume(request))
            .await
            .map_err(&setup_failed)?;
        tracing::info!(volume = %unique, pod = %uid, target = %host_target.display(), "volume published");
        self.update(|state| {
            state
                .mounted
                .entry(unique.clone())
                .or_insert_with(|| Mounted {
                    driver: csi.driver.clone(),
                    handle: csi.volume_handle.clone(),
                    pv: pv_name.clone(),
                    staged: false,
                    pods: BTreeMap::new(),
                })
                .pods
                .insert(uid.clone(), target.clone());
        });
        Ok((host_target, read_only))
    }

    /// The publish context of an attached volume; [`MountError::NotAttached`] while the Node
    /// does not list it in `volumesAttached`.
    async fn attachment_metadata(
        &self,
        unique: &str,
        attachment: &str,
        volume: &str,
        pv: &str,
    ) -> Result<HashMap<String, String>, MountError> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let node = nodes.get(&self.node_name).await.map_err(|e| {
            MountError::Failed(format!(
                "MountVolume.WaitForAttach failed for volume {pv:?} : reading Node {:?}: {}",
                self.node_name,
                error_chain(&e)
            ))
        })?;
        let attached = node
            .status
            .and_then(|s| s.volumes_attached)
            .unwrap_or_default()
            .iter()
            .any(|a| a.name == unique);
        let not_attached = || {
            MountError::NotAttached(format!(
                "Unable to attach or mount volumes: unmounted volumes=[{volume}], unattached volumes=[{volume}]: volume {unique:?} (PV {pv:?}) is not yet attached according to the status of Node {:?}",
                self.node_name
            ))
        };
        if !attached {
            return Err(not_attached());
        }
        let attachments: Api<VolumeAttachment> = Api::all(self.client.clone());
        let va = attachments.get_opt(attachment).await.map_err(|e| {
            MountError::Failed(format!(
                "MountVolume.WaitForAttach failed for volume {pv:?} : reading VolumeAttachment {attachment:?}: {}",
                error_chain(&e)
            ))
        })?;
        let status = va.and_then(|va| va.status);
        match status {
            Some(status) if status.attached => Ok(status
                .attachment_metadata
                .unwrap_or_default()
                .into_iter()
                .collect()),
            _ => Err(not_attached()),
        }
    }

    /// The data of the Secret `reference` names, as strings (never logged).
    async fn secrets(
        &self,
        reference: Option<&SecretReference>,
        field: &str,
    ) -> Result<HashMap<String, String>, String> {
        let Some(reference) = reference else {
            return Ok(HashMap::new());
        };
        let name = reference.name.clone().unwrap_or_default();
        let namespace = reference
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &namespace);
        let secret = secrets.get(&name).await.map_err(|e| {
            format!(
                "kubernetes.io/csi: failed to get {field} {namespace}/{name}: {}",
                error_chain(&e)
            )
        })?;
        Ok(secret
            .data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
            .chain(secret.string_data.unwrap_or_default())
            .collect())
    }

    /// Unpublishes every CSI volume of pod `uid` (found on disk through its `vol_data.json`
    /// files), unstages the volumes no pod uses any more and drops them from `volumesInUse`.
    /// A publish directory is removed only once its target is no longer a mount point. Fails
    /// (to be retried) with the messages of what could not be done.
    pub async fn unmount_pod(&self, uid: &str) -> Result<(), String> {
        let mut errors = Vec::new();
        let csi_dir = self.host(&pod_csi_dir(uid));
        for (pv, pv_dir) in subdirs(&csi_dir) {
            if let Err(e) = self.unpublish(uid, &pv, &pv_dir).await {
                errors.push(e);
            }
        }
        if errors.is_empty() {
            // Only the CSI directories: the agent's own pod directory is the worker's.
            let pod_dir = self.host(&Path::new(KUBELET_ROOT).join("pods").join(uid));
            if let Err(e) = mounts::remove_unmounted_dir(&pod_dir) {
                errors.push(format!("removing {}: {e}", pod_dir.display()));
            }
        }
        self.update(|state| {
            for pods in state.wanted.values_mut() {
                pods.remove(uid);
            }
            state.wanted.retain(|_, pods| !pods.is_empty());
        });
        if let Err(e) = self.unstage_unused().await {
            errors.push(e);
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }

    async fn unpublish(&self, uid: &str, pv: &str, pv_dir: &Path) -> Result<(), String> {
        let host_target = pv_dir.join("mount");
        let target = publish_path(uid, pv);
        let data_file = pv_dir.join(VOL_DATA_FILE);
        let data = match VolData::read(&data_file) {
            Ok(data) => data,
            Err(e) => {
                // Without metadata there is nothing to tell a driver; only a directory
                // without a mount point can go.
                return mounts::remove_unmounted_dir(pv_dir).map_err(|r| {
                    format!(
                        "UnmountVolume.TearDown failed for volume {pv:?} pod {uid:?} : {e}; {r}"
                    )
                });
            }
        };
        let unique = data.unique_name();
        let _guard = self.lock(&unique).await;
        let failed = |reason: String| {
            format!(
                "UnmountVolume.TearDown failed for volume {pv:?} (UniqueName: {unique:?}) pod {uid:?} : {reason}"
            )
        };
        let Some(driver) = self.drivers.get(&data.driver_name) else {
            return Err(failed(format!(
                "kubernetes.io/csi: mounter.TearDownAt failed to get CSI client: driver name {} not found in the list of registered CSI drivers",
                data.driver_name
            )));
        };
        let request = NodeUnpublishVolumeRequest {
            volume_id: data.volume_handle.clone(),
            target_path: target.display().to_string(),
        };
        rpc(NodeClient::new(driver.channel.clone()).node_unpublish_volume(request))
            .await
            .map_err(&failed)?;
        if mounts::is_mount_point(&host_target).unwrap_or(true) {
            return Err(failed(format!(
                "{} is still a mount point after NodeUnpublishVolume",
                host_target.display()
            )));
        }
        for result in [
            remove_dir_if_present(&host_target),
            remove_file_if_present(&data_file),
            remove_dir_if_present(pv_dir),
        ] {
            result.map_err(&failed)?;
        }
        tracing::info!(volume = %unique, pod = %uid, "volume unpublished");
        self.update(|state| {
            if let Some(mounted) = state.mounted.get_mut(&unique) {
                mounted.pods.remove(uid);
                if mounted.pods.is_empty() && !mounted.staged {
                    state.mounted.remove(&unique);
                }
            }
        });
        Ok(())
    }

    /// Unstages the staged volumes no pod uses or wants.
    async fn unstage_unused(&self) -> Result<(), String> {
        let candidates: Vec<String> = {
            let state = self.state();
            state
                .mounted
                .iter()
                .filter(|(unique, m)| m.pods.is_empty() && !state.wanted.contains_key(*unique))
                .map(|(unique, _)| unique.clone())
                .collect()
        };
        let mut errors = Vec::new();
        for unique in candidates {
            let _guard = self.lock(&unique).await;
            let mounted = {
                let state = self.state();
                match state.mounted.get(&unique) {
                    Some(m) if m.pods.is_empty() && !state.wanted.contains_key(&unique) => {
                        m.clone()
                    }
                    _ => continue,
                }
            };
            if mounted.staged
                && let Err(e) = self.unstage(&unique, &mounted).await
            {
                errors.push(e);
                continue;
            }
            self.update(|state| {
                state.mounted.remove(&unique);
            });
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }

    async fn unstage(&self, unique: &str, mounted: &Mounted) -> Result<(), String> {
        let pv = &mounted.pv;
        let failed = |reason: String| {
            format!(
                "UnmountDevice failed for volume {pv:?} (UniqueName: {unique:?}) on node {:?} : {reason}",
                self.node_name
            )
        };
        let Some(driver) = self.drivers.get(&mounted.driver) else {
            return Err(failed(format!(
                "kubernetes.io/csi: attacher.UnmountDevice failed to create newCsiDriverClient: driver name {} not found in the list of registered CSI drivers",
                mounted.driver
            )));
        };
        let staging = staging_path(pv);
        let request = NodeUnstageVolumeRequest {
            volume_id: mounted.handle.clone(),
            staging_target_path: staging.display().to_string(),
        };
        rpc(NodeClient::new(driver.channel.clone()).node_unstage_volume(request))
            .await
            .map_err(&failed)?;
        let host_staging = self.host(&staging);
        if mounts::is_mount_point(&host_staging).unwrap_or(true) {
            return Err(failed(format!(
                "{} is still a mount point after NodeUnstageVolume",
                host_staging.display()
            )));
        }
        if let Some(pv_dir) = host_staging.parent() {
            for result in [
                remove_dir_if_present(&host_staging),
                remove_file_if_present(&pv_dir.join(VOL_DATA_FILE)),
                remove_dir_if_present(pv_dir),
            ] {
                result.map_err(&failed)?;
            }
        }
        tracing::info!(volume = %unique, "volume unstaged");
        Ok(())
    }

    /// Keeps the Node's `status.volumesInUse` equal to the volumes in use (the whole sorted
    /// list, posted whenever it changes; failed posts are retried every second).
    pub async fn report_in_use(&self) {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let mut changes = self.in_use.subscribe();
        let mut posted: Option<BTreeSet<String>> = None;
        loop {
            let current = changes.borrow_and_update().clone();
            if posted.as_ref() != Some(&current) {
                let list: Vec<&String> = current.iter().collect();
                let patch = json!({"status": {"volumesInUse": list}});
                match nodes
                    .patch_status(
                        &self.node_name,
                        &PatchParams::default(),
                        &Patch::Strategic(patch),
                    )
                    .await
                {
                    Ok(_) => {
                        tracing::debug!(node = %self.node_name, volumes = ?list, "volumesInUse posted");
                        posted = Some(current);
                    }
                    Err(e) => {
                        tracing::warn!(node = %self.node_name, error = %error_chain(&e), "posting volumesInUse failed; retrying");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        continue;
                    }
                }
            }
            if changes.changed().await.is_err() {
                return;
            }
        }
    }

    /// Every `interval`, grows the file systems of published volumes whose claim has the
    /// `FileSystemResizePending` condition (see [`VolumeManager::expand_pending`]).
    pub async fn expand_forever(&self, interval: Duration) {
        loop {
            tokio::time::sleep(interval).await;
            self.expand_pending().await;
        }
    }

    /// For each published volume whose claim has the `FileSystemResizePending` condition and
    /// whose driver has the node `EXPAND_VOLUME` capability: NodeExpandVolume to the PV's
    /// capacity, then the claim's status capacity is set to it and the condition removed.
    pub async fn expand_pending(&self) {
        let published: Vec<(String, Mounted)> = self
            .state()
            .mounted
            .iter()
            .filter(|(_, m)| !m.pods.is_empty())
            .map(|(u, m)| (u.clone(), m.clone()))
            .collect();
        for (unique, mounted) in published {
            if let Err(e) = self.expand(&unique, &mounted).await {
                tracing::warn!(volume = %unique, pv = %mounted.pv, error = %e, "node expansion failed");
            }
        }
    }

    async fn expand(&self, unique: &str, mounted: &Mounted) -> Result<(), String> {
        let pvs: Api<PersistentVolume> = Api::all(self.client.clone());
        let Some(pv) = pvs
            .get_opt(&mounted.pv)
            .await
            .map_err(|e| format!("reading PV {:?}: {}", mounted.pv, error_chain(&e)))?
        else {
            return Ok(());
        };
        let spec = pv.spec.clone().unwrap_or_default();
        let Some(claim_ref) = &spec.claim_ref else {
            return Ok(());
        };
        let namespace = claim_ref.namespace.clone().unwrap_or_default();
        let claim_name = claim_ref.name.clone().unwrap_or_default();
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &namespace);
        let Some(pvc) = claims
            .get_opt(&claim_name)
            .await
            .map_err(|e| format!("reading PVC {namespace}/{claim_name}: {}", error_chain(&e)))?
        else {
            return Ok(());
        };
        let conditions = pvc
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        if !conditions.iter().any(|c| c.type_ == FS_RESIZE_PENDING) {
            return Ok(());
        }
        let Some(driver) = self.drivers.get(&mounted.driver) else {
            return Ok(());
        };
        let capabilities = node_capabilities(&driver).await?;
        if !capabilities.contains(&CapabilityType::ExpandVolume) {
            return Ok(());
        }
        let Some(capacity) = spec
            .capacity
            .as_ref()
            .and_then(|c| c.get("storage"))
            .cloned()
        else {
            return Err(format!("PV {:?} has no capacity", mounted.pv));
        };
        let bytes = crate::node::pod::quantity_bytes(&capacity.0)
            .map_err(|e| format!("PV {:?} capacity {:?}: {e}", mounted.pv, capacity.0))?;
        let _guard = self.lock(unique).await;
        let Some(target) = self
            .state()
            .mounted
            .get(unique)
            .and_then(|m| m.pods.values().next().cloned())
        else {
            return Ok(());
        };
        let request = NodeExpandVolumeRequest {
            volume_id: mounted.handle.clone(),
            volume_path: target.display().to_string(),
            capacity_range: Some(CapacityRange {
                required_bytes: bytes,
                limit_bytes: 0,
            }),
            staging_target_path: if mounted.staged {
                staging_path(&mounted.pv).display().to_string()
            } else {
                String::new()
            },
            volume_capability: Some(volume_capability(&pv)),
            secrets: HashMap::new(),
        };
        rpc(NodeClient::new(driver.channel.clone()).node_expand_volume(request))
            .await
            .map_err(|e| {
                format!(
                    "MountVolume.NodeExpandVolume failed for volume {:?} : {e}",
                    mounted.pv
                )
            })?;
        let remaining: Vec<_> = conditions
            .into_iter()
            .filter(|c| c.type_ != FS_RESIZE_PENDING)
            .collect();
        let patch = json!({"status": {"capacity": {"storage": capacity}, "conditions": remaining}});
        claims
            .patch_status(&claim_name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(|e| {
                format!(
                    "updating the status of PVC {namespace}/{claim_name}: {}",
                    error_chain(&e)
                )
            })?;
        tracing::info!(volume = %unique, pvc = %format!("{namespace}/{claim_name}"), capacity = %capacity.0, "file system expanded");
        Ok(())
    }
}

/// The directories in `dir`: (name, path); none when it cannot be read.
fn subdirs(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(String, PathBuf)> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .collect();
    found.sort();
    found
}

fn remove_dir_if_present(dir: &Path) -> Result<(), String> {
    match std::fs::remove_dir(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(format!("removing {}: {e}", dir.display()))
        }
        _ => Ok(()),
    }
}

fn remove_file_if_present(file: &Path) -> Result<(), String> {
    match std::fs::remove_file(file) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(format!("removing {}: {e}", file.display()))
        }
        _ => Ok(()),
    }
}

/// The capability kubelet asks for: a mount with the PV's `csi.fsType` and
/// `spec.mountOptions`, the access mode from the PV's first access mode.
fn volume_capability(pv: &PersistentVolume) -> VolumeCapability {
    let spec = pv.spec.clone().unwrap_or_default();
    let mode = match spec
        .access_modes
        .as_ref()
        .and_then(|m| m.first())
        .map(String::as_str)
    {
        Some("ReadOnlyMany") => Mode::MultiNodeReaderOnly,
        Some("ReadWriteMany") => Mode::MultiNodeMultiWriter,
        _ => Mode::SingleNodeWriter,
    };
    VolumeCapability {
        access_mode: Some(AccessMode { mode: mode.into() }),
        access_type: Some(AccessType::Mount(MountVolume {
            fs_type: spec
                .csi
                .as_ref()
                .and_then(|c| c.fs_type.clone())
                .unwrap_or_default(),
            mount_flags: spec.mount_options.unwrap_or_default(),
            volume_mount_group: String::new(),
        })),
    }
}

/// The driver's node capabilities.
async fn node_capabilities(driver: &RegisteredDriver) -> Result<Vec<CapabilityType>, String> {
    let response = rpc(NodeClient::new(driver.channel.clone())
        .node_get_capabilities(NodeGetCapabilitiesRequest {}))
    .await
    .map_err(|e| format!("NodeGetCapabilities of driver {:?}: {e}", driver.name))?;
    Ok(response
        .capabilities
        .into_iter()
        .filter_map(|c| match c.r#type {
            Some(node_service_capability::Type::Rpc(rpc)) => {
                CapabilityType::try_from(rpc.r#type).ok()
            }
            _ => None,
        })
        .collect())
}

/// A node call with kubelet's error text (`rpc error: code = … desc = …`).
async fn rpc<T>(
    future: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T, String> {
    match tokio::time::timeout(CALL_TIMEOUT, future).await {
        Ok(Ok(response)) => Ok(response.into_inner()),
        Ok(Err(status)) => Err(format!(
            "rpc error: code = {:?} desc = {}",
            status.code(),
            status.message()
        )),
        Err(_) => Err(format!(
            "rpc error: code = DeadlineExceeded desc = no answer within {CALL_TIMEOUT:?}"
        )),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use k8s_openapi::api::core::v1::{CSIPersistentVolumeSource, PersistentVolumeSpec};

    #[test]
    fn names_and_paths_are_kubelets() {
        assert_eq!(
            unique_volume_name("nfs.csi.k8s.io", "srv#share"),
            "kubernetes.io/csi/nfs.csi.k8s.io^srv#share"
        );
        // sha256("vol-1" + "d.example.com" + "node-a")
        let name = attachment_name("vol-1", "d.example.com", "node-a");
        assert!(name.starts_with("csi-") && name.len() == 68, "{name}");
        assert_eq!(
            name,
            format!(
                "csi-{}",
                ring::digest::digest(&ring::digest::SHA256, b"vol-1d.example.comnode-a")
                    .as_ref()
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>()
            )
        );
        assert_eq!(
            attachment_name("", "", ""),
            "csi-e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            staging_path("pv-1"),
            Path::new("/var/lib/kubelet/plugins/kubernetes.io/csi/pv/pv-1/globalmount")
        );
        assert_eq!(
            publish_path("u-1", "pv-1"),
            Path::new("/var/lib/kubelet/pods/u-1/volumes/kubernetes.io~csi/pv-1/mount")
        );
    }

    #[test]
    fn capability_follows_the_pv() {
        let pv = |modes: &[&str]| PersistentVolume {
            spec: Some(PersistentVolumeSpec {
                access_modes: Some(modes.iter().map(|m| (*m).to_string()).collect()),
                mount_options: Some(vec!["nfsvers=4.1".into()]),
                csi: Some(CSIPersistentVolumeSource {
                    driver: "d".into(),
                    volume_handle: "h".into(),
                    fs_type: Some("ext4".into()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mode_of = |c: VolumeCapability| c.access_mode.unwrap().mode;
        assert_eq!(
            mode_of(volume_capability(&pv(&["ReadWriteOnce"]))),
            i32::from(Mode::SingleNodeWriter)
        );
        assert_eq!(
            mode_of(volume_capability(&pv(&["ReadOnlyMany"]))),
            i32::from(Mode::MultiNodeReaderOnly)
        );
        assert_eq!(
            mode_of(volume_capability(&pv(&["ReadWriteMany", "ReadWriteOnce"]))),
            i32::from(Mode::MultiNodeMultiWriter)
        );
        match volume_capability(&pv(&[])).access_type {
            Some(AccessType::Mount(m)) => {
                assert_eq!(m.fs_type, "ext4");
                assert_eq!(m.mount_flags, ["nfsvers=4.1"]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn vol_data_uses_kubelets_keys() {
        let data = VolData {
            driver_name: "d".into(),
            volume_handle: "h".into(),
            spec_vol_id: "pv".into(),
            node_name: "n".into(),
            attachment_id: String::new(),
            volume_lifecycle_mode: "Persistent".into(),
        };
        let text = serde_json::to_value(&data).unwrap();
        assert_eq!(
            text,
            json!({"driverName": "d", "volumeHandle": "h", "specVolID": "pv", "nodeName": "n", "volumeLifecycleMode": "Persistent"})
        );
    }
}
