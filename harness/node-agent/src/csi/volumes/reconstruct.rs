//! After an agent restart: what is mounted, rebuilt from the run directory rather than
//! mounted again ([`scan`]). Staging directories with a `vol_data.json` count as staged;
//! publish directories with a `vol_data.json` whose `mount` is a mount point count as
//! published. Block volumes likewise from their own directories (see
//! [`block`](super::block)): a staging directory with the volume's `vol_data.json`, a pod's
//! link whose publish path exists.
//! (Orphaned pods, whose Pod objects are gone, are unmounted by the pod loop through
//! [`VolumeManager::unmount_pod`](super::VolumeManager::unmount_pod), which reads the same
//! files.)

use std::path::PathBuf;

use super::host::VolumeHost;
use super::paths::{
    block_data_dir, block_publish_path, block_root, pod_block_dir, pod_csi_dir, publish_path,
    staging_root,
};
use super::state::VolumeIdentity;
use super::vol_data::{VOL_DATA_FILE, VolData, entries, subdirs};
use crate::{error_chain, layout, mounts};

/// A volume found mounted on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Found {
    /// Staged at its staging path.
    Staged(VolumeIdentity),
    /// Published for pod `pod` at kubelet's path `target`.
    Published {
        /// Which volume.
        volume: VolumeIdentity,
        /// The pod's UID.
        pod: String,
        /// kubelet's publish path.
        target: PathBuf,
    },
}

impl Found {
    /// The volume found.
    pub fn volume(&self) -> &VolumeIdentity {
        match self {
            Found::Staged(volume) | Found::Published { volume, .. } => volume,
        }
    }
}

/// What `host`'s run directory says is staged and published (see the module docs):
/// filesystem volumes first, then block volumes, each staged before published. Reads only;
/// unreadable staging directories are logged and skipped.
pub(super) fn scan(host: &VolumeHost) -> Vec<Found> {
    let mut found = Vec::new();
    for (pv, pv_dir) in subdirs(&host.path(&staging_root())) {
        match VolData::read(&pv_dir.join(VOL_DATA_FILE)) {
            Ok(data) => found.push(Found::Staged(data.identity(&pv, false))),
            Err(e) => {
                tracing::warn!(error = %error_chain(&e), "ignoring a staging directory")
            }
        }
    }
    let kubelet_pods: Vec<_> = layout::pod_dirs(&host.paths.run_dir)
        .into_iter()
        .filter(|dir| dir.kubelet_style)
        .collect();
    for pod in &kubelet_pods {
        for (pv, pv_dir) in subdirs(&host.path(&pod_csi_dir(&pod.uid))) {
            let Ok(data) = VolData::read(&pv_dir.join(VOL_DATA_FILE)) else {
                continue;
            };
            if !mounts::is_mount_point(&pv_dir.join("mount")).unwrap_or(false) {
                continue;
            }
            found.push(Found::Published {
                volume: data.identity(&pv, false),
                pod: pod.uid.clone(),
                target: publish_path(&pod.uid, &pv),
            });
        }
    }
    let read_block = |pv: &str| VolData::read(&host.path(&block_data_dir(pv)).join(VOL_DATA_FILE));
    for (pv, _) in subdirs(&host.path(&block_root().join("staging"))) {
        match read_block(&pv) {
            Ok(data) => found.push(Found::Staged(data.identity(&pv, true))),
            Err(e) => {
                tracing::warn!(error = %error_chain(&e), "ignoring a block staging directory")
            }
        }
    }
    for pod in &kubelet_pods {
        for pv in entries(&host.path(&pod_block_dir(&pod.uid))) {
            let target = block_publish_path(&pod.uid, &pv);
            let Ok(data) = read_block(&pv) else { continue };
            if std::fs::symlink_metadata(host.path(&target)).is_err() {
                continue;
            }
            found.push(Found::Published {
                volume: data.identity(&pv, true),
                pod: pod.uid.clone(),
                target,
            });
        }
    }
    found
}
