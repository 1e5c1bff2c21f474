//! Block volumes (`volumeMode: Block`, used by containers' `volumeDevices`), as kubelet 1.20
//! maps them (`pkg/volume/csi/csi_block.go`), all under
//! `/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/`:
//!
//! - `<pv>/data/vol_data.json`: the volume's metadata (driver, handle, PV, node, attachment
//!   name), written before anything else and read by unmapping and reconstruction;
//! - `staging/<pv>`: the staging path, a directory kubelet creates, for NodeStageVolume with
//!   a block capability (drivers with `STAGE_UNSTAGE_VOLUME`; see [`stage`](super::stage));
//! - `publish/<pv>/<pod uid>`: the publish path, a FILE the driver creates in NodePublishVolume
//!   (kubelet only creates `publish/<pv>/`), e.g. by bind-mounting the device on it;
//! - the pod's `pods/<uid>/volumeDevices/kubernetes.io~csi/<pv>`: a symbolic link to the
//!   publish path (kubelet's pod device map path), which the container runtime gets as the
//!   device to show at the container's `devicePath`.
//!
//! Unmapping (after the pod's sandbox is gone): NodeUnpublishVolume of the publish path, the
//! pod's link goes; after the last pod on the node, NodeUnstageVolume of the staging path,
//! then the staging, publish and `<pv>` directories go (kubelet's `TearDownDevice`). Unlike
//! kubelet, the agent does not bind-mount the device at a global map path nor hold it open
//! through a loop device: nothing here needs either.

use std::path::{Path, PathBuf};

use csi_proto::v1::NodePublishVolumeRequest;
use kube_support::error::IoContext;

use super::VolumeManager;
use super::paths::{
    attachment_name, block_data_dir, block_publish_dir, block_publish_path, block_root,
    block_staging_path, pod_block_dir,
};
use super::publish::PublishInput;
use super::resolve::ResolvedVolume;
use super::vol_data::{
    VOL_DATA_FILE, VolData, remove_dir_if_present, remove_file_if_present, subdirs,
};
use crate::node::csi::drivers::node_call;
use crate::node::csi::error::{Error, Result};
use crate::node::{layout, mounts};

impl VolumeManager {
    /// Writes the block volume's `vol_data.json` (`<pv>/data/`), failures being kubelet's
    /// `MapVolume.SetUpDevice failed …`.
    pub(super) fn write_block_vol_data(&self, resolved: &ResolvedVolume) -> Result<()> {
        let csi = &resolved.csi;
        let data = VolData {
            driver_name: csi.driver.clone(),
            volume_handle: csi.volume_handle.clone(),
            spec_vol_id: resolved.pv_name.clone(),
            node_name: self.node_name.clone(),
            // kubelet names the attachment whether or not the driver needs one.
            attachment_id: attachment_name(&csi.volume_handle, &csi.driver, &self.node_name),
            volume_lifecycle_mode: String::new(),
        };
        let file = self
            .host(&block_data_dir(&resolved.pv_name))
            .join(VOL_DATA_FILE);
        data.write(&file).map_err(|cause| Error::SetUpDevice {
            volume: resolved.pv_name.clone(),
            cause: Box::new(cause),
        })
    }

    /// NodePublishVolume of block volume `resolved` for the pod at its publish path, then
    /// the pod's link to it; records it published and returns the link on this machine.
    /// Failures are kubelet's `MapVolume.MapPodDevice failed …`. The caller holds the
    /// volume's lock.
    pub(super) async fn map_pod_device(
        &self,
        resolved: &ResolvedVolume,
        input: PublishInput<'_>,
    ) -> Result<PathBuf> {
        let csi = &resolved.csi;
        let pv = &resolved.pv_name;
        let uid = input.pod.metadata.uid.clone().unwrap_or_default();
        let failed = |cause: Error| Error::MapPodDevice {
            volume: pv.clone(),
            cause: Box::new(cause),
        };
        let publish_dir = self.host(&block_publish_dir(pv));
        std::fs::create_dir_all(&publish_dir)
            .map_err(Error::io("creating", &publish_dir))
            .map_err(failed)?;
        let secrets = self
            .secrets(csi.node_publish_secret_ref.as_ref(), "NodePublishSecretRef")
            .await
            .map_err(failed)?;
        let target = block_publish_path(&uid, pv);
        // kubelet 1.20 sends the PV's attributes only (no pod info) for block volumes.
        let request = NodePublishVolumeRequest {
            volume_id: csi.volume_handle.clone(),
            publish_context: input.publish_context,
            staging_target_path: input
                .staging
                .map(|s| s.display().to_string())
                .unwrap_or_default(),
            target_path: target.display().to_string(),
            volume_capability: Some(input.capability),
            readonly: resolved.read_only,
            secrets,
            volume_context: csi
                .volume_attributes
                .clone()
                .unwrap_or_default()
                .into_iter()
                .collect(),
        };
        node_call(input.driver.node_client().node_publish_volume(request))
            .await
            .map_err(failed)?;
        let host_target = self.host(&target);
        let identity = resolved.identity();
        if std::fs::symlink_metadata(&host_target).is_err() {
            return Err(failed(Error::NoPublishedDevice { path: host_target }));
        }
        // Recorded published only with its link, which a later mount returns; the pod's
        // teardown finds the publish path on disk either way.
        let link = self.host(&pod_block_dir(&uid).join(pv));
        link_to(&host_target, &link).map_err(failed)?;
        self.state.mark_published(&identity, &uid, target);
        tracing::info!(volume = %identity.unique_name(), pod = %uid, device = %host_target.display(), "block volume published");
        Ok(link)
    }

    /// The block PVs published for pod `uid`: those with a link in its `volumeDevices`
    /// directory or a publish path of its own (a link may be missing after a failure).
    pub(super) fn block_volumes_of_pod(&self, uid: &str) -> Vec<String> {
        let mut pvs = entries(&self.host(&pod_block_dir(uid)));
        for (pv, dir) in subdirs(&self.host(&block_root().join("publish"))) {
            if std::fs::symlink_metadata(dir.join(uid)).is_ok() && !pvs.contains(&pv) {
                pvs.push(pv);
            }
        }
        pvs.sort();
        pvs
    }

    /// NodeUnpublishVolume of block volume `pv` of pod `uid`; then its publish path (when
    /// the driver left the file) and the pod's link go, and the volume is recorded
    /// unpublished. An unstaged volume's directories go with its last pod.
    pub(super) async fn unmap_pod_device(&self, uid: &str, pv: &str) -> Result<()> {
        let host_target = self.host(&block_publish_path(uid, pv));
        let link = self.host(&pod_block_dir(uid).join(pv));
        let data = match VolData::read(&self.host(&block_data_dir(pv)).join(VOL_DATA_FILE)) {
            Ok(data) => data,
            Err(unreadable) => {
                // Without metadata there is nothing to tell a driver: only what is not
                // mounted can go.
                let failed = |cause: Error| Error::UnmapPodDevice {
                    volume: pv.to_string(),
                    unique: None,
                    pod: uid.to_string(),
                    cause: Box::new(Error::Several(vec![unreadable, cause])),
                };
                if mounts::is_mount_point(&host_target).unwrap_or(true) {
                    return Err(failed(Error::StillMounted {
                        path: host_target,
                        call: "the pod's teardown",
                    }));
                }
                return remove_file_if_present(&host_target)
                    .and_then(|()| remove_file_if_present(&link))
                    .map_err(failed);
            }
        };
        let unique = data.unique_name();
        let _guard = self.lock(&unique).await;
        let failed = |cause: Error| Error::UnmapPodDevice {
            volume: pv.to_string(),
            unique: Some(unique.clone()),
            pod: uid.to_string(),
            cause: Box::new(cause),
        };
        let Some(driver) = self.drivers.get(&data.driver_name) else {
            return Err(failed(Error::DriverNotRegistered {
                step: "blockMapper.UnmapPodDevice failed to get CSI client",
                driver: data.driver_name,
            }));
        };
        super::teardown::unpublish(
            &driver,
            &data.volume_handle,
            &block_publish_path(uid, pv),
            &host_target,
        )
        .await
        .map_err(failed)?;
        // Deleting the file is the driver's job; one left behind would keep the publish
        // directory, so it goes too once nothing is mounted on it.
        remove_file_if_present(&host_target).map_err(failed)?;
        remove_file_if_present(&link).map_err(failed)?;
        tracing::info!(volume = %unique, pod = %uid, "block volume unpublished");
        self.state.mark_unpublished(&unique, uid);
        if !self.state.is_mounted(&unique) {
            // Not staged, and this was its last pod: nothing will unstage it.
            self.remove_block_dirs(pv).map_err(failed)?;
        }
        Ok(())
    }

    /// Removes what kubelet's `TearDownDevice` removes once a block volume is unstaged (or
    /// its last pod gone, when it was not staged): the staging directory, the (empty)
    /// publish directory and `<pv>/` with its `vol_data.json`; nothing that holds a mount.
    pub(super) fn remove_block_dirs(&self, pv: &str) -> Result<()> {
        let staging = self.host(&block_staging_path(pv));
        let publish_dir = self.host(&block_publish_dir(pv));
        let pv_dir = self.host(&block_data_dir(pv));
        let pv_dir = pv_dir.parent().unwrap_or(&pv_dir);
        let results = [
            mounts::remove_unmounted_dir(&staging).map_err(Error::io("removing", &staging)),
            remove_dir_if_present(&publish_dir),
            mounts::remove_unmounted_dir(pv_dir).map_err(Error::io("removing", pv_dir)),
        ];
        results.into_iter().collect()
    }

    /// Records the block volumes the run directory says are staged (a staging directory
    /// with the volume's `vol_data.json`) and published (a pod's link with its publish
    /// path present); returns their unique names.
    pub(super) fn reconstruct_block(&self) -> Vec<String> {
        let mut found = Vec::new();
        let read = |pv: &str| VolData::read(&self.host(&block_data_dir(pv)).join(VOL_DATA_FILE));
        for (pv, _) in subdirs(&self.host(&block_root().join("staging"))) {
            match read(&pv) {
                Ok(data) => {
                    self.state.mark_staged(&data.identity(&pv, true));
                    found.push(data.unique_name());
                }
                Err(e) => {
                    tracing::warn!(error = %crate::node::error_chain(&e), "ignoring a block staging directory")
                }
            }
        }
        let kubelet_pods = layout::pod_dirs(&self.paths.run_dir)
            .into_iter()
            .filter(|dir| dir.kubelet_style);
        for pod in kubelet_pods {
            for pv in entries(&self.host(&pod_block_dir(&pod.uid))) {
                let target = block_publish_path(&pod.uid, &pv);
                let Ok(data) = read(&pv) else { continue };
                if std::fs::symlink_metadata(self.host(&target)).is_err() {
                    continue;
                }
                self.state
                    .mark_published(&data.identity(&pv, true), &pod.uid, target);
                found.push(data.unique_name());
            }
        }
        found
    }
}

/// Makes `link` a symbolic link to `target`, replacing what is there.
fn link_to(target: &Path, link: &Path) -> Result<()> {
    if let Some(parent) = link.parent() {
        std::fs::create_dir_all(parent).map_err(Error::io("creating", parent))?;
    }
    remove_file_if_present(link)?;
    std::os::unix::fs::symlink(target, link).map_err(Error::io("linking", link))
}

/// The names of the entries of `dir`, sorted; none when it cannot be read.
fn entries(dir: &Path) -> Vec<String> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = read
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_link_replaces_what_was_there_and_entries_are_sorted() {
        let dir = tempfile::Builder::new().prefix("block-").tempdir().unwrap();
        let links = dir.path().join("volumeDevices/kubernetes.io~csi");
        link_to(Path::new("/dev/null"), &links.join("pv-b")).unwrap();
        link_to(Path::new("/dev/zero"), &links.join("pv-a")).unwrap();
        link_to(Path::new("/dev/null"), &links.join("pv-a")).unwrap();
        assert_eq!(
            std::fs::read_link(links.join("pv-a")).unwrap(),
            Path::new("/dev/null")
        );
        assert_eq!(entries(&links), ["pv-a", "pv-b"]);
        assert!(entries(&dir.path().join("absent")).is_empty());
    }
}
