//! Unmounting a pod's CSI volumes, after its sandbox is gone (or for an orphaned pod found
//! at start): NodeUnpublishVolume of each volume found on disk (through its
//! `vol_data.json`, so it works without the API and after a restart; block volumes through
//! [`block`](super::block)'s files), then
//! NodeUnstageVolume of the staged volumes no pod uses or wants any more. A directory is
//! removed only once no mount point is left in it: removing it would delete a share's data.

use std::path::Path;

use csi_proto::v1::{NodeUnpublishVolumeRequest, NodeUnstageVolumeRequest};
use kube_support::error::IoContext;

use super::VolumeManager;
use super::paths::{block_staging_path, pod_csi_dir, publish_path, staging_path};
use super::state::MountedVolume;
use super::vol_data::{VOL_DATA_FILE, VolData, remove_volume_dirs, subdirs};
use crate::node::csi::drivers::{RegisteredDriver, node_call};
use crate::node::csi::error::{Error, Result};
use crate::node::layout::kubelet_pod_dir;
use crate::node::mounts;

impl VolumeManager {
    /// Unpublishes every CSI volume of pod `uid` (found on disk through its `vol_data.json`
    /// files), unstages the volumes no pod uses any more and drops them from `volumesInUse`.
    /// A publish directory is removed only once its target is no longer a mount point. Fails
    /// (to be retried) with what could not be done.
    pub async fn unmount_pod(&self, uid: &str) -> Result<()> {
        let mut errors = Vec::new();
        for (pv, pv_dir) in subdirs(&self.host(&pod_csi_dir(uid))) {
            if let Err(e) = self.unpublish(uid, &pv, &pv_dir).await {
                errors.push(e);
            }
        }
        for pv in self.block_volumes_of_pod(uid) {
            if let Err(e) = self.unmap_pod_device(uid, &pv).await {
                errors.push(e);
            }
        }
        if errors.is_empty() {
            // Only kubelet's directory: the agent's own pod directory is the worker's.
            let pod_dir = self.host(&kubelet_pod_dir(uid));
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

    /// NodeUnpublishVolume of volume `pv` of pod `uid`, whose publish directory on this
    /// machine is `pv_dir`; then the directory goes and the volume is recorded unpublished.
    async fn unpublish(&self, uid: &str, pv: &str, pv_dir: &Path) -> Result<()> {
        let host_target = pv_dir.join("mount");
        let data_file = pv_dir.join(VOL_DATA_FILE);
        let data = match VolData::read(&data_file) {
            Ok(data) => data,
            Err(unreadable) => {
                // Without metadata there is nothing to tell a driver; only a directory
                // without a mount point can go.
                return mounts::remove_unmounted_dir(pv_dir).map_err(|e| Error::TearDown {
                    volume: pv.to_string(),
                    unique: None,
                    pod: uid.to_string(),
                    cause: Box::new(Error::Several(vec![
                        unreadable,
                        Error::io("removing", pv_dir)(e),
                    ])),
                });
            }
        };
        let unique = data.unique_name();
        let _guard = self.lock(&unique).await;
        let failed = |cause: Error| Error::TearDown {
            volume: pv.to_string(),
            unique: Some(unique.clone()),
            pod: uid.to_string(),
            cause: Box::new(cause),
        };
        let Some(driver) = self.drivers.get(&data.driver_name) else {
            return Err(failed(Error::DriverNotRegistered {
                step: "mounter.TearDownAt failed to get CSI client",
                driver: data.driver_name,
            }));
        };
        unpublish(
            &driver,
            &data.volume_handle,
            &publish_path(uid, pv),
            &host_target,
        )
        .await
        .map_err(failed)?;
        remove_volume_dirs(&host_target).map_err(failed)?;
        tracing::info!(volume = %unique, pod = %uid, "volume unpublished");
        self.state.mark_unpublished(&unique, uid);
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

    /// NodeUnstageVolume of `mounted`, then its staging directory goes (a block volume's
    /// other directories too).
    async fn unstage(&self, unique: &str, mounted: &MountedVolume) -> Result<()> {
        let pv = &mounted.volume.pv;
        let block = mounted.volume.block;
        let failed = |cause: Error| {
            let (volume, unique, node) = (pv.clone(), unique.to_string(), self.node_name.clone());
            let cause = Box::new(cause);
            if block {
                Error::TearDownDevice {
                    volume,
                    unique,
                    node,
                    cause,
                }
            } else {
                Error::UnmountDevice {
                    volume,
                    unique,
                    node,
                    cause,
                }
            }
        };
        let Some(driver) = self.drivers.get(&mounted.volume.driver) else {
            return Err(failed(Error::DriverNotRegistered {
                step: "attacher.UnmountDevice failed to create newCsiDriverClient",
                driver: mounted.volume.driver.clone(),
            }));
        };
        let staging = if block {
            block_staging_path(pv)
        } else {
            staging_path(pv)
        };
        let request = NodeUnstageVolumeRequest {
            volume_id: mounted.volume.handle.clone(),
            staging_target_path: staging.display().to_string(),
        };
        node_call(driver.node_client().node_unstage_volume(request))
            .await
            .map_err(failed)?;
        let host_staging = self.host(&staging);
        if mounts::is_mount_point(&host_staging).unwrap_or(true) {
            return Err(failed(Error::StillMounted {
                path: host_staging,
                call: "NodeUnstageVolume",
            }));
        }
        if block {
            self.remove_block_dirs(pv).map_err(failed)?;
        } else {
            remove_volume_dirs(&host_staging).map_err(failed)?;
        }
        tracing::info!(volume = %unique, "volume unstaged");
        Ok(())
    }
}

/// NodeUnpublishVolume of `volume_id` at kubelet's `target` (`host_target` on this host),
/// then the check kubelet makes after it, for mounts and block devices alike: nothing may
/// still be mounted there.
pub(super) async fn unpublish(
    driver: &RegisteredDriver,
    volume_id: &str,
    target: &Path,
    host_target: &Path,
) -> Result<()> {
    let request = NodeUnpublishVolumeRequest {
        volume_id: volume_id.to_string(),
        target_path: target.display().to_string(),
    };
    node_call(driver.node_client().node_unpublish_volume(request)).await?;
    if mounts::is_mount_point(host_target).unwrap_or(true) {
        return Err(Error::StillMounted {
            path: host_target.to_path_buf(),
            call: "NodeUnpublishVolume",
        });
    }
    Ok(())
}
