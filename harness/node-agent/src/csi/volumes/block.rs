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
//! Unmapping (after the pod's sandbox is gone, see [`teardown`](super::teardown)):
//! NodeUnpublishVolume of the publish path, the pod's link goes; after the last pod on the
//! node, NodeUnstageVolume of the staging path, then the staging, publish and `<pv>`
//! directories go (kubelet's `TearDownDevice`, [`remove_dirs`]). Unlike
//! kubelet, the agent does not bind-mount the device at a global map path nor hold it open
//! through a loop device: nothing here needs either.

use kube_support::error::IoContext;
use std::path::{Path, PathBuf};

use super::host::VolumeHost;
use super::paths::{
    attachment_name, block_data_dir, block_publish_dir, block_publish_path, block_root,
    block_staging_path, pod_block_dir,
};
use super::publish::{PublishInput, Published};
use super::resolve::ResolvedVolume;
use super::secrets;
use super::vol_data::{
    VOL_DATA_FILE, VolData, entries, remove_dir_if_present, remove_file_if_present, subdirs,
};
use crate::csi::drivers::node_call;
use crate::csi::error::{Error, Result};
use crate::mounts;

/// Writes the block volume's `vol_data.json` (`<pv>/data/`) on `host`, failures being
/// kubelet's `MapVolume.SetUpDevice failed …`. kubelet writes it when it creates the block
/// mapper, before staging.
pub(super) fn write_vol_data(host: &VolumeHost, resolved: &ResolvedVolume) -> Result<()> {
    let csi = &resolved.csi;
    let data = VolData {
        driver_name: csi.driver.clone(),
        volume_handle: csi.volume_handle.clone(),
        spec_vol_id: resolved.pv_name.clone(),
        node_name: host.node_name.clone(),
        // kubelet names the attachment whether or not the driver needs one.
        attachment_id: attachment_name(&csi.volume_handle, &csi.driver, &host.node_name),
        volume_lifecycle_mode: String::new(),
    };
    let file = host
        .path(&block_data_dir(&resolved.pv_name))
        .join(VOL_DATA_FILE);
    data.write(&file).map_err(|cause| Error::SetUpDevice {
        volume: resolved.pv_name.clone(),
        cause: Box::new(cause),
    })
}

/// NodePublishVolume of block volume `resolved` for the pod at its publish path on `host`,
/// then the pod's link to it, which is what the containers get. Failures are kubelet's
/// `MapVolume.MapPodDevice failed …`. The caller holds the volume's lock and records it
/// published when this succeeds: only with its link, which a later mount returns (the pod's
/// teardown finds the publish path on disk either way).
pub(super) async fn map_pod_device(
    host: &VolumeHost,
    resolved: &ResolvedVolume,
    input: PublishInput<'_>,
) -> Result<Published> {
    let csi = &resolved.csi;
    let pv = &resolved.pv_name;
    let uid = input.pod.metadata.uid.clone().unwrap_or_default();
    let failed = |cause: Error| Error::MapPodDevice {
        volume: pv.clone(),
        cause: Box::new(cause),
    };
    let publish_dir = host.path(&block_publish_dir(pv));
    std::fs::create_dir_all(&publish_dir)
        .map_err(Error::io("creating", &publish_dir))
        .map_err(failed)?;
    let secrets = secrets::node_publish(&host.client, csi)
        .await
        .map_err(failed)?;
    let target = block_publish_path(&uid, pv);
    // kubelet 1.20 sends the PV's attributes only (no pod info) for block volumes.
    let request = input.request(resolved, &target, secrets, resolved.volume_attributes());
    node_call(input.driver.node_client().node_publish_volume(request))
        .await
        .map_err(failed)?;
    let host_target = host.path(&target);
    if std::fs::symlink_metadata(&host_target).is_err() {
        return Err(failed(Error::NoPublishedDevice { path: host_target }));
    }
    let link = pod_link(host, &uid, pv);
    link_to(&host_target, &link).map_err(failed)?;
    tracing::info!(volume = %resolved.identity().unique_name(), pod = %uid, device = %host_target.display(), "block volume published");
    Ok(Published { target, path: link })
}

/// Pod `uid`'s link to block volume `pv` on `host`: kubelet's pod device map path.
pub(super) fn pod_link(host: &VolumeHost, uid: &str, pv: &str) -> PathBuf {
    host.path(&pod_block_dir(uid).join(pv))
}

/// The block PVs published for pod `uid` on `host`: those with a link in its
/// `volumeDevices` directory or a publish path of its own (a link may be missing after a
/// failure).
pub(super) fn volumes_of_pod(host: &VolumeHost, uid: &str) -> Vec<String> {
    let mut pvs = entries(&host.path(&pod_block_dir(uid)));
    for (pv, dir) in subdirs(&host.path(&block_root().join("publish"))) {
        if std::fs::symlink_metadata(dir.join(uid)).is_ok() && !pvs.contains(&pv) {
            pvs.push(pv);
        }
    }
    pvs.sort();
    pvs
}

/// Removes what kubelet's `TearDownDevice` removes once a block volume is unstaged (or its
/// last pod gone, when it was not staged): the staging directory, the (empty) publish
/// directory and `<pv>/` with its `vol_data.json`; nothing that holds a mount.
pub(super) fn remove_dirs(host: &VolumeHost, pv: &str) -> Result<()> {
    let staging = host.path(&block_staging_path(pv));
    let publish_dir = host.path(&block_publish_dir(pv));
    let pv_dir = host.path(&block_data_dir(pv));
    let pv_dir = pv_dir.parent().unwrap_or(&pv_dir);
    let results = [
        mounts::remove_unmounted_dir(&staging).map_err(Error::io("removing", &staging)),
        remove_dir_if_present(&publish_dir),
        mounts::remove_unmounted_dir(pv_dir).map_err(Error::io("removing", pv_dir)),
    ];
    results.into_iter().collect()
}

/// Makes `link` a symbolic link to `target`, replacing what is there.
fn link_to(target: &Path, link: &Path) -> Result<()> {
    if let Some(parent) = link.parent() {
        std::fs::create_dir_all(parent).map_err(Error::io("creating", parent))?;
    }
    remove_file_if_present(link)?;
    std::os::unix::fs::symlink(target, link).map_err(Error::io("linking", link))
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
    }
}
