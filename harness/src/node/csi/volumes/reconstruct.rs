//! After an agent restart: what is mounted, rebuilt from the run directory rather than
//! mounted again. Staging directories with a `vol_data.json` count as staged; publish
//! directories with a `vol_data.json` whose `mount` is a mount point count as published.
//! Block volumes likewise from their own directories (see [`block`](super::block)): a
//! staging directory, a pod's link whose publish path exists.
//! (Orphaned pods, whose Pod objects are gone, are unmounted by the pod loop through
//! [`VolumeManager::unmount_pod`], which reads the same files.)

use std::collections::BTreeSet;

use super::VolumeManager;
use super::paths::{pod_csi_dir, publish_path, staging_root};
use super::vol_data::{VOL_DATA_FILE, VolData, subdirs};
use crate::node::{error_chain, layout, mounts};

impl VolumeManager {
    /// Records what the run directory says is staged and published (see the module docs).
    pub fn reconstruct(&self) {
        let mut found = BTreeSet::new();
        for (pv, pv_dir) in subdirs(&self.host(&staging_root())) {
            match VolData::read(&pv_dir.join(VOL_DATA_FILE)) {
                Ok(data) => {
                    self.state.mark_staged(&data.identity(&pv, false));
                    found.insert(data.unique_name());
                }
                Err(e) => {
                    tracing::warn!(error = %error_chain(&e), "ignoring a staging directory")
                }
            }
        }
        let kubelet_pods = layout::pod_dirs(&self.paths.run_dir)
            .into_iter()
            .filter(|dir| dir.kubelet_style);
        for pod in kubelet_pods {
            for (pv, pv_dir) in subdirs(&self.host(&pod_csi_dir(&pod.uid))) {
                let Ok(data) = VolData::read(&pv_dir.join(VOL_DATA_FILE)) else {
                    continue;
                };
                if !mounts::is_mount_point(&pv_dir.join("mount")).unwrap_or(false) {
                    continue;
                }
                self.state.mark_published(
                    &data.identity(&pv, false),
                    &pod.uid,
                    publish_path(&pod.uid, &pv),
                );
                found.insert(data.unique_name());
            }
        }
        found.extend(self.reconstruct_block());
        if !found.is_empty() {
            tracing::info!(node = %self.node_name, volumes = ?found, "reconstructed mounted CSI volumes");
        }
    }
}
