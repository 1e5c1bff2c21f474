//! The volume manager itself: its public operations and the orchestration of one volume's
//! life on the node, in the order a volume goes through them — [`VolumeManager::mount`]
//! (resolve → in use → attach → stage → publish), [`VolumeManager::unmount_pod`]
//! (unpublish → unstage), [`VolumeManager::expand_pending`], [`VolumeManager::reconstruct`].
//! The manager alone holds the volumes' locks and records each step in the [`state`]; the
//! steps (the sibling modules) make the node calls and file changes, given a
//! [`VolumeHost`] and the driver.
//!
//! [`state`]: super::state

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use csi_proto::v1::node_service_capability::rpc::Type as CapabilityType;
use k8s_openapi::api::core::v1::{Pod, Volume};
use kube::Client;
use tokio::sync::OwnedMutexGuard;

use super::capability::kubelet_volume_capability;
use super::host::VolumeHost;
use super::paths::{attachment_name, block_staging_path, pod_csi_dir, publish_path, staging_path};
use super::publish::{PublishInput, Published};
use super::reconstruct::Found;
use super::state::{MountedVolume, VolumeState};
use super::stats::VolumeStats;
use super::teardown::{PodVolumeFiles, UNSTAGE_DRIVER_STEP};
use super::vol_data::{VolData, subdirs};
use super::{attach, block, expand, in_use, publish, reconstruct, resolve, stage, stats, teardown};
use crate::csi::error::{Error, Result};
use crate::csi::{CsiDrivers, PluginPaths, RegisteredDriver};
use crate::error_chain;
use crate::layout::kubelet_pod_dir;
use crate::mounts;
use kube_support::error::IoContext;

/// Where a pod's CSI volume is on this machine, for its containers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodVolume {
    /// A filesystem volume's publish directory (containers bind-mount it at their
    /// `volumeMounts`), or a block volume's device: kubelet's link in the pod's
    /// `volumeDevices` directory to the publish path (containers get it at their
    /// `volumeDevices`' `devicePath`).
    pub path: std::path::PathBuf,
    /// Whether the claim or the PV asks for read-only.
    pub read_only: bool,
    /// Whether it is a block volume (`volumeMode: Block`).
    pub block: bool,
}

/// The node's CSI volume manager (see the module docs); shared by the pod workers.
pub struct VolumeManager {
    host: VolumeHost,
    drivers: CsiDrivers,
    state: VolumeState,
    /// One lock per unique volume name: stage/publish/unpublish/unstage/expand of one volume
    /// never overlap.
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl std::fmt::Debug for VolumeManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VolumeManager")
            .field("node_name", &self.host.node_name)
            .field("run_dir", &self.host.paths.run_dir)
            .finish_non_exhaustive()
    }
}

impl VolumeManager {
    /// A manager for `node_name`, whose run directory `paths` describes, mounting through the
    /// drivers the plugin watcher registers in `drivers`.
    pub fn new(client: Client, node_name: &str, paths: PluginPaths, drivers: CsiDrivers) -> Self {
        VolumeManager {
            host: VolumeHost {
                client,
                node_name: node_name.to_string(),
                paths,
            },
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
        let host = &self.host;
        let resolved = resolve::resolve(&host.client, pod, volume).await?;
        resolve::check_volume_mode(pod, &resolved)?;
        let block = resolved.is_block();
        let identity = resolved.identity();
        let unique = identity.unique_name();
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let pod_volume = |path| PodVolume {
            path,
            read_only: resolved.read_only,
            block,
        };
        let _guard = self.lock(&unique).await;
        if self.state.is_published(&unique, &uid) {
            return Ok(pod_volume(if block {
                block::pod_link(host, &uid, &resolved.pv_name)
            } else {
                host.path(&publish_path(&uid, &resolved.pv_name))
            }));
        }
        // In use from now on: the attach/detach controller must not detach it.
        self.state.want(&unique, &uid);
        let setup_failed = |cause: Error| Error::SetUp {
            volume: resolved.pv_name.clone(),
            cause: Box::new(cause),
        };
        let driver = self
            .driver(&identity.driver, "mounter.SetUpAt failed to get CSI client")
            .map_err(setup_failed)?;
        let policy = attach::driver_policy(&host.client, &identity.driver)
            .await
            .map_err(setup_failed)?;
        let attachment = policy
            .attach_required
            .then(|| attachment_name(&identity.handle, &identity.driver, &host.node_name));
        let publish_context = match &attachment {
            Some(attachment) => attach::publish_context(host, &resolved, attachment).await?,
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
            block::write_vol_data(host, &resolved)?;
        }
        if let Some(staging) = &staging
            && !self.state.is_staged(&unique)
        {
            stage::stage(
                host,
                &driver,
                &resolved,
                staging,
                &publish_context,
                &capability,
            )
            .await?;
            self.state.mark_staged(&identity);
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
        let Published { target, path } = if block {
            block::map_pod_device(host, &resolved, input).await?
        } else {
            publish::publish(host, &resolved, input).await?
        };
        self.state.mark_published(&identity, &uid, target);
        Ok(pod_volume(path))
    }

    /// Unpublishes every CSI volume of pod `uid` (found on disk through its `vol_data.json`
    /// files), unstages the volumes no pod uses any more and drops them from `volumesInUse`.
    /// A publish directory is removed only once its target is no longer a mount point. Fails
    /// (to be retried) with what could not be done.
    pub async fn unmount_pod(&self, uid: &str) -> Result<()> {
        let host = &self.host;
        let mut errors = Vec::new();
        let filesystem = subdirs(&host.path(&pod_csi_dir(uid)));
        for (pv, _) in filesystem {
            if let Err(e) = self.unpublish(&PodVolumeFiles::new(uid, &pv, false)).await {
                errors.push(e);
            }
        }
        for pv in block::volumes_of_pod(host, uid) {
            if let Err(e) = self.unpublish(&PodVolumeFiles::new(uid, &pv, true)).await {
                errors.push(e);
            }
        }
        if errors.is_empty() {
            // Only kubelet's directory: the agent's own pod directory is the worker's.
            let pod_dir = host.path(&kubelet_pod_dir(uid));
            if let Err(e) = mounts::remove_unmounted_dir(&pod_dir) {
                errors.push(Error::io("removing", pod_dir)(e));
            }
        }
        self.state.release_pod(uid);
        if let Err(e) = self.unstage_unused().await {
            errors.push(e);
        }
        Error::all(errors)
    }

    /// Keeps the Node's `status.volumesInUse` equal to the volumes in use (the whole sorted
    /// list, posted whenever it changes; failed posts are retried every second).
    pub async fn report_in_use(&self) {
        in_use::report(
            &self.host.client,
            &self.host.node_name,
            self.state.subscribe(),
        )
        .await;
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
    /// Failures are logged and tried again next time.
    pub async fn expand_pending(&self) {
        for (unique, mounted) in self.state.published() {
            if let Err(e) = self.expand(&unique, &mounted).await {
                tracing::warn!(volume = %unique, pv = %mounted.volume.pv, error = %error_chain(&e), "node expansion failed");
            }
        }
    }

    /// Records what the run directory says is staged and published (see
    /// [`reconstruct`](super::reconstruct)).
    pub fn reconstruct(&self) {
        let found = reconstruct::scan(&self.host);
        for volume in &found {
            match volume {
                Found::Staged(volume) => self.state.mark_staged(volume),
                Found::Published {
                    volume,
                    pod,
                    target,
                } => self.state.mark_published(volume, pod, target.clone()),
            }
        }
        let found: BTreeSet<String> = found.iter().map(|f| f.volume().unique_name()).collect();
        if !found.is_empty() {
            tracing::info!(node = %self.host.node_name, volumes = ?found, "reconstructed mounted CSI volumes");
        }
    }

    /// The usage of every CSI volume published for pod `uid` whose driver reports it.
    pub async fn volume_stats(&self, uid: &str) -> Vec<VolumeStats> {
        stats::volume_stats(&self.host, &self.drivers, uid).await
    }

    /// Unpublishes one volume of a pod found on disk (see [`PodVolumeFiles`]) and records
    /// it unpublished; an unstaged block volume's directories go with its last pod.
    async fn unpublish(&self, files: &PodVolumeFiles) -> Result<()> {
        let host = &self.host;
        let data = match VolData::read(&files.vol_data(host)) {
            Ok(data) => data,
            Err(unreadable) => return files.remove_without_metadata(host, unreadable),
        };
        let unique = data.unique_name();
        let _guard = self.lock(&unique).await;
        let failed = |cause: Error| files.failed(Some(unique.clone()), cause);
        let driver = self
            .driver(&data.driver_name, files.driver_step())
            .map_err(failed)?;
        let target = files.target();
        teardown::unpublish(&driver, &data.volume_handle, &target, &host.path(&target))
            .await
            .map_err(failed)?;
        files.remove_after_unpublish(host).map_err(failed)?;
        if files.block {
            tracing::info!(volume = %unique, pod = %files.uid, "block volume unpublished");
        } else {
            tracing::info!(volume = %unique, pod = %files.uid, "volume unpublished");
        }
        self.state.mark_unpublished(&unique, &files.uid);
        if files.block && !self.state.is_mounted(&unique) {
            // Not staged, and this was its last pod: nothing will unstage it.
            block::remove_dirs(host, &files.pv).map_err(failed)?;
        }
        Ok(())
    }

    /// Unstages the staged volumes no pod uses or wants, and forgets the unused ones.
    async fn unstage_unused(&self) -> Result<()> {
        let mut errors = Vec::new();
        for unique in self.state.unused() {
            let _guard = self.lock(&unique).await;
            // Used or wanted again while waiting for the lock: it stays.
            let Some(mounted) = self.state.unused_volume(&unique) else {
                continue;
            };
            if mounted.staged
                && let Err(e) = self.unstage(&unique, &mounted).await
            {
                errors.push(e);
                continue;
            }
            self.state.mark_unstaged(&unique);
        }
        Error::all(errors)
    }

    /// Unstages `mounted` through its driver, with kubelet's error for a failure.
    async fn unstage(&self, unique: &str, mounted: &MountedVolume) -> Result<()> {
        let failed =
            |cause| teardown::unstage_failed(&self.host.node_name, unique, &mounted.volume, cause);
        let driver = self
            .driver(&mounted.volume.driver, UNSTAGE_DRIVER_STEP)
            .map_err(failed)?;
        teardown::unstage(&self.host, &driver, unique, mounted)
            .await
            .map_err(failed)
    }

    /// Grows published volume `unique` when its claim asks for it (see
    /// [`VolumeManager::expand_pending`]).
    async fn expand(&self, unique: &str, mounted: &MountedVolume) -> Result<()> {
        let Some(resize) = expand::pending_resize(&self.host.client, &mounted.volume.pv).await?
        else {
            return Ok(());
        };
        let Some(driver) = self.drivers.get(&mounted.volume.driver) else {
            return Ok(());
        };
        if !driver
            .node_capabilities()
            .await?
            .has(CapabilityType::ExpandVolume)
        {
            return Ok(());
        }
        let (capacity, bytes) = resize.capacity()?;
        let _guard = self.lock(unique).await;
        // Unpublished while waiting for the lock: nothing to grow.
        let Some(target) = self.state.publish_target(unique) else {
            return Ok(());
        };
        expand::node_expand(&driver, mounted, &target, &resize, bytes).await?;
        resize.finish(unique, capacity).await
    }

    /// The registered driver `name`; [`Error::DriverNotRegistered`] at kubelet's `step`.
    fn driver(&self, name: &str, step: &'static str) -> Result<RegisteredDriver> {
        self.drivers
            .get(name)
            .ok_or_else(|| Error::DriverNotRegistered {
                step,
                driver: name.to_string(),
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
}
