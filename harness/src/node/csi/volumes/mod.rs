//! kubelet's CSI volume manager: mounting the `persistentVolumeClaim` volumes of pods backed
//! by CSI persistent volumes, unmounting them when pods go, reconstructing what is mounted
//! after an agent restart, `volumesInUse`, and node-side expansion.
//!
//! Paths in requests are kubelet's (`/var/lib/kubelet/…`, as a node plugin running in a pod
//! with that directory mounted sees them); the agent works on their place in its run
//! directory ([`PluginPaths::host_path`]). See [`paths`] for the names and [`vol_data`] for
//! the metadata files kubelet leaves next to staging and publish directories.
//!
//! Following one volume, as kubelet 1.20 mounts it ([`VolumeManager::mount`]):
//!
//! 1. [`resolve`]: the claim must exist and be Bound to a PV with `spec.csi`;
//! 2. the driver must be registered on the node; the volume is added to `volumesInUse`
//!    ([`state`], reported by [`in_use`]);
//! 3. [`attach`]: when the CSIDriver object asks for attachment (or is missing), the volume
//!    must be listed in the Node's `status.volumesAttached` and the VolumeAttachment's
//!    `attachmentMetadata` is the publish context;
//! 4. [`stage`]: with the node `STAGE_UNSTAGE_VOLUME` capability ([`capability`] says
//!    which volume capability), the volume is staged once per node, shared by its pods;
//! 5. [`publish`]: then it is published for the pod, and gets the pod's `fsGroup` when the
//!    CSIDriver's `fsGroupPolicy` says so ([`fs_group`]).
//!
//! Block volumes (`volumeMode: Block`, used in containers' `volumeDevices`) take the same
//! steps with kubelet's block paths and messages ([`block`]): their `vol_data.json` first,
//! staging at a directory, publishing at a file the driver creates, then a link in the
//! pod's `volumeDevices` directory that the container runtime shows at the `devicePath`; no
//! `fsGroup`, no pod info in the volume context (as kubelet 1.20), no statistics. A PV whose
//! `volumeMode` does not match the pod's use of the claim is refused first.
//!
//! Then [`teardown`] when the pod goes, [`expand`] for `FileSystemResizePending` claims,
//! [`reconstruct`] after a restart. Errors are kubelet's event messages
//! ([`Error`](super::Error)).

mod attach;
mod block;
mod capability;
mod expand;
mod fs_group;
mod in_use;
mod paths;
mod publish;
mod reconstruct;
mod resolve;
mod secrets;
mod stage;
mod state;
mod stats;
mod teardown;
mod vol_data;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use csi_proto::v1::node_service_capability::rpc::Type as CapabilityType;
use k8s_openapi::api::core::v1::{Pod, Volume};
use kube::Client;
use tokio::sync::OwnedMutexGuard;

use super::error::{Error, Result};
use super::{CsiDrivers, PluginPaths};
use paths::pod_block_dir;
use publish::PublishInput;
use resolve::ResolvedVolume;
use state::VolumeState;

pub use capability::kubelet_volume_capability;
pub use expand::FS_RESIZE_PENDING;
pub use paths::{
    CSI_PLUGIN_NAME, attachment_name, block_publish_path, block_staging_path, publish_path,
    staging_path, unique_volume_name,
};
pub use stats::VolumeStats;
pub use vol_data::VOL_DATA_FILE;

/// Where a pod's CSI volume is on this machine, for its containers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodVolume {
    /// A filesystem volume's publish directory (containers bind-mount it at their
    /// `volumeMounts`), or a block volume's device: kubelet's link in the pod's
    /// `volumeDevices` directory to the publish path (containers get it at their
    /// `volumeDevices`' `devicePath`).
    pub path: PathBuf,
    /// Whether the claim or the PV asks for read-only.
    pub read_only: bool,
    /// Whether it is a block volume (`volumeMode: Block`).
    pub block: bool,
}

/// kubelet's check of a pod's use of a claim against the PV's `volumeMode`: a block volume
/// can only be in `volumeDevices`, a filesystem one only in `volumeMounts`.
fn check_volume_mode(pod: &Pod, resolved: &ResolvedVolume) -> Result<()> {
    let containers = pod.spec.iter().flat_map(|s| {
        s.containers
            .iter()
            .chain(s.init_containers.iter().flatten())
    });
    let (mut mounted, mut mapped) = (false, false);
    for c in containers {
        let name = &resolved.volume_name;
        mounted |= c.volume_mounts.iter().flatten().any(|m| &m.name == name);
        mapped |= c.volume_devices.iter().flatten().any(|d| &d.name == name);
    }
    let mode = resolved
        .spec
        .volume_mode
        .clone()
        .unwrap_or_else(|| "Filesystem".into());
    let field = match (resolved.is_block(), mounted, mapped) {
        (true, true, _) => "volumeMounts",
        (false, _, true) => "volumeDevices",
        _ => return Ok(()),
    };
    Err(Error::VolumeModeMismatch {
        volume: resolved.volume_name.clone(),
        mode,
        field,
    })
}

/// The node's CSI volume manager (see the module docs); shared by the pod workers.
pub struct VolumeManager {
    client: Client,
    node_name: String,
    paths: PluginPaths,
    drivers: CsiDrivers,
    state: VolumeState,
    /// One lock per unique volume name: stage/publish/unpublish/unstage/expand of one volume
    /// never overlap.
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
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
            state: VolumeState::default(),
            locks: Mutex::new(HashMap::new()),
        }
    }

    /// The registered drivers.
    pub fn drivers(&self) -> &CsiDrivers {
        &self.drivers
    }

    /// The unique names of the volumes in use on this node, sorted.
    pub fn in_use(&self) -> Vec<String> {
        self.state.in_use()
    }

    /// Mounts `volume` (a `persistentVolumeClaim` volume; inline `csi` volumes are refused)
    /// of `pod` (the pod worker asks only for volumes a container uses): returns where
    /// containers find it on this machine (see [`PodVolume`]). An error is kubelet's
    /// `FailedMount` message; [`Error::is_not_attached`] says whether it is only waiting for
    /// attachment.
    pub async fn mount(&self, pod: &Pod, volume: &Volume) -> Result<PodVolume> {
        let resolved = self.resolve(pod, volume).await?;
        check_volume_mode(pod, &resolved)?;
        let block = resolved.is_block();
        let identity = resolved.identity();
        let unique = identity.unique_name();
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let _guard = self.lock(&unique).await;
        if self.state.is_published(&unique, &uid) {
            let path = if block {
                self.host(&pod_block_dir(&uid).join(&resolved.pv_name))
            } else {
                self.host(&publish_path(&uid, &resolved.pv_name))
            };
            return Ok(PodVolume {
                path,
                read_only: resolved.read_only,
                block,
            });
        }
        self.state.want(&unique, &uid);
        let setup_failed = |cause: Error| Error::SetUp {
            volume: resolved.pv_name.clone(),
            cause: Box::new(cause),
        };
        let Some(driver) = self.drivers.get(&identity.driver) else {
            return Err(setup_failed(Error::DriverNotRegistered {
                step: "mounter.SetUpAt failed to get CSI client",
                driver: identity.driver,
            }));
        };
        let policy = self
            .driver_policy(&identity.driver)
            .await
            .map_err(setup_failed)?;
        let attachment = policy
            .attach_required
            .then(|| attachment_name(&identity.handle, &identity.driver, &self.node_name));
        let publish_context = match &attachment {
            Some(attachment) => self.publish_context(&resolved, attachment).await?,
            None => HashMap::new(),
        };
        let capabilities = driver.node_capabilities().await.map_err(setup_failed)?;
        let capability = kubelet_volume_capability(&resolved.spec);
        let staging = capabilities
            .has(CapabilityType::StageUnstageVolume)
            .then(|| {
                if block {
                    block_staging_path(&resolved.pv_name)
                } else {
                    staging_path(&resolved.pv_name)
                }
            });
        if block {
            // kubelet writes it when it creates the block mapper, before staging.
            self.write_block_vol_data(&resolved)?;
        }
        if let Some(staging) = &staging
            && !self.state.is_staged(&unique)
        {
            self.stage(&driver, &resolved, staging, &publish_context, &capability)
                .await?;
        }
        let input = PublishInput {
            pod,
            driver: &driver,
            staging: staging.as_deref(),
            publish_context,
            capability,
            attachment,
            pod_info_on_mount: policy.pod_info_on_mount,
            fs_group_policy: policy.fs_group_policy,
        };
        let path = if block {
            self.map_pod_device(&resolved, input).await?
        } else {
            self.publish(&resolved, input).await?
        };
        Ok(PodVolume {
            path,
            read_only: resolved.read_only,
            block,
        })
    }

    /// The lock of volume `unique`, held around its node calls and their transitions.
    async fn lock(&self, unique: &str) -> OwnedMutexGuard<()> {
        let lock = self
            .locks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(unique.to_string())
            .or_default()
            .clone();
        lock.lock_owned().await
    }

    /// Where a kubelet path is on this machine.
    fn host(&self, kubelet_path: &Path) -> PathBuf {
        self.paths.host_path(kubelet_path)
    }
}
