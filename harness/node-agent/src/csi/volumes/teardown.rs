//! Unmounting a pod's CSI volumes, after its sandbox is gone (or for an orphaned pod found
//! at start): NodeUnpublishVolume of each volume found on disk ([`PodVolumeFiles`]: through
//! its `vol_data.json`, so it works without the API and after a restart; block volumes
//! through [`block`](super::block)'s files), then NodeUnstageVolume of the staged volumes
//! no pod uses or wants any more ([`unstage`]). A directory is removed only once no mount
//! point is left in it: removing it would delete a share's data.
//!
//! The manager finds the files, takes the volume's lock, looks the driver up and records
//! each step done; the functions here make the node calls and clean up after them.

use kube_support::error::IoContext;
use std::path::{Path, PathBuf};

use csi_proto::v1::{NodeUnpublishVolumeRequest, NodeUnstageVolumeRequest};

use super::block;
use super::host::VolumeHost;
use super::paths::{
    block_data_dir, block_publish_path, block_staging_path, pod_csi_dir, publish_path, staging_path,
};
use super::state::{MountedVolume, VolumeIdentity};
use super::vol_data::{VOL_DATA_FILE, remove_file_if_present, remove_volume_dirs};
use crate::csi::drivers::{RegisteredDriver, node_call};
use crate::csi::error::{Error, Result};
use crate::mounts;

/// One volume published for a pod, as its teardown finds it on disk: a filesystem volume's
/// publish directory (`pods/<uid>/volumes/kubernetes.io~csi/<pv>/`), or a block volume's
/// publish path and the pod's link to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PodVolumeFiles {
    /// The pod's UID.
    pub uid: String,
    /// The PV.
    pub pv: String,
    /// Whether it is a block volume.
    pub block: bool,
}

impl PodVolumeFiles {
    /// Volume `pv` of pod `uid`, a block volume or not.
    pub fn new(uid: &str, pv: &str, block: bool) -> Self {
        PodVolumeFiles {
            uid: uid.to_string(),
            pv: pv.to_string(),
            block,
        }
    }

    /// The volume's `vol_data.json` on `host`.
    pub fn vol_data(&self, host: &VolumeHost) -> PathBuf {
        let dir = if self.block {
            block_data_dir(&self.pv)
        } else {
            pod_csi_dir(&self.uid).join(&self.pv)
        };
        host.path(&dir).join(VOL_DATA_FILE)
    }

    /// kubelet's publish path (what the driver was told).
    pub fn target(&self) -> PathBuf {
        if self.block {
            block_publish_path(&self.uid, &self.pv)
        } else {
            publish_path(&self.uid, &self.pv)
        }
    }

    /// kubelet's step in the message of a driver that is not registered.
    pub fn driver_step(&self) -> &'static str {
        if self.block {
            "blockMapper.UnmapPodDevice failed to get CSI client"
        } else {
            "mounter.TearDownAt failed to get CSI client"
        }
    }

    /// kubelet's error for a failed teardown of this volume (`UnmountVolume.TearDown
    /// failed …`, `UnmapVolume.UnmapPodDevice failed …`), `unique` when its metadata was
    /// read.
    pub fn failed(&self, unique: Option<String>, cause: Error) -> Error {
        let (volume, pod, cause) = (self.pv.clone(), self.uid.clone(), Box::new(cause));
        if self.block {
            Error::UnmapPodDevice {
                volume,
                unique,
                pod,
                cause,
            }
        } else {
            Error::TearDown {
                volume,
                unique,
                pod,
                cause,
            }
        }
    }

    /// Without metadata there is nothing to tell a driver: removes only what is not
    /// mounted, failing with `unreadable` (why the metadata could not be read) and what
    /// could not go.
    pub fn remove_without_metadata(&self, host: &VolumeHost, unreadable: Error) -> Result<()> {
        let host_target = host.path(&self.target());
        let removed = if self.block {
            if mounts::is_mount_point(&host_target).unwrap_or(true) {
                Err(Error::StillMounted {
                    path: host_target,
                    call: "the pod's teardown",
                })
            } else {
                remove_file_if_present(&host_target).and_then(|()| {
                    remove_file_if_present(&block::pod_link(host, &self.uid, &self.pv))
                })
            }
        } else {
            let pv_dir = host.path(&pod_csi_dir(&self.uid).join(&self.pv));
            mounts::remove_unmounted_dir(&pv_dir).map_err(Error::io("removing", &pv_dir))
        };
        removed.map_err(|cause| self.failed(None, Error::Several(vec![unreadable, cause])))
    }

    /// After NodeUnpublishVolume: a filesystem volume's publish directory goes with its
    /// `vol_data.json`; a block volume's publish path (when the driver left the file: it
    /// would keep the publish directory) and the pod's link go.
    pub fn remove_after_unpublish(&self, host: &VolumeHost) -> Result<()> {
        let host_target = host.path(&self.target());
        if self.block {
            remove_file_if_present(&host_target)?;
            remove_file_if_present(&block::pod_link(host, &self.uid, &self.pv))
        } else {
            remove_volume_dirs(&host_target)
        }
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

/// kubelet's step in the message of a driver, not registered, whose volume is unstaged.
pub(super) const UNSTAGE_DRIVER_STEP: &str =
    "attacher.UnmountDevice failed to create newCsiDriverClient";

/// kubelet's error for a failed unstaging of `volume` (`unique`) on `node`:
/// `UnmountDevice failed …`, `TearDownDevice failed …` for a block volume.
pub(super) fn unstage_failed(
    node: &str,
    unique: &str,
    volume: &VolumeIdentity,
    cause: Error,
) -> Error {
    let (pv, unique, node) = (volume.pv.clone(), unique.to_string(), node.to_string());
    let cause = Box::new(cause);
    if volume.block {
        Error::TearDownDevice {
            volume: pv,
            unique,
            node,
            cause,
        }
    } else {
        Error::UnmountDevice {
            volume: pv,
            unique,
            node,
            cause,
        }
    }
}

/// NodeUnstageVolume of `mounted` on `host`, then its staging directory goes (a block
/// volume's other directories too). The caller holds the volume's lock, checked no pod
/// uses or wants it, and records it unstaged when this succeeds.
pub(super) async fn unstage(
    host: &VolumeHost,
    driver: &RegisteredDriver,
    unique: &str,
    mounted: &MountedVolume,
) -> Result<()> {
    let pv = &mounted.volume.pv;
    let block = mounted.volume.block;
    let staging = if block {
        block_staging_path(pv)
    } else {
        staging_path(pv)
    };
    let request = NodeUnstageVolumeRequest {
        volume_id: mounted.volume.handle.clone(),
        staging_target_path: staging.display().to_string(),
    };
    node_call(driver.node_client().node_unstage_volume(request)).await?;
    let host_staging = host.path(&staging);
    if mounts::is_mount_point(&host_staging).unwrap_or(true) {
        return Err(Error::StillMounted {
            path: host_staging,
            call: "NodeUnstageVolume",
        });
    }
    if block {
        block::remove_dirs(host, pv)?;
    } else {
        remove_volume_dirs(&host_staging)?;
    }
    tracing::info!(volume = %unique, "volume unstaged");
    Ok(())
}
