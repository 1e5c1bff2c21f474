//! kubelet's names for a CSI volume on a node: its unique name (in `volumesInUse` and
//! `volumesAttached`), its VolumeAttachment's name, and its staging and publish paths
//! (filesystem and block volumes have different ones; as
//! kubelet and a node plugin see them; [`PluginPaths::host_path`](super::super::PluginPaths::host_path)
//! maps them into the run directory).

use std::path::{Path, PathBuf};

use crate::layout::{KUBELET_ROOT, kubelet_pod_dir};

/// The plugin name in unique volume names and `volumesInUse`.
pub const CSI_PLUGIN_NAME: &str = "kubernetes.io/csi";

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

/// kubelet's directory of the staged volumes: `…/plugins/kubernetes.io/csi/pv`, one
/// `<pv>/` directory per volume.
pub(super) fn staging_root() -> PathBuf {
    Path::new(KUBELET_ROOT).join("plugins/kubernetes.io/csi/pv")
}

/// kubelet's staging path of a PV.
pub fn staging_path(pv: &str) -> PathBuf {
    staging_root().join(pv).join("globalmount")
}

/// kubelet's publish path of a PV for a pod.
pub fn publish_path(pod_uid: &str, pv: &str) -> PathBuf {
    pod_csi_dir(pod_uid).join(pv).join("mount")
}

/// kubelet's directory of a pod's CSI volumes, one `<pv>/` directory per volume.
pub(super) fn pod_csi_dir(pod_uid: &str) -> PathBuf {
    kubelet_pod_dir(pod_uid).join("volumes/kubernetes.io~csi")
}

/// kubelet's directory of block volumes (`volumeMode: Block`):
/// `…/plugins/kubernetes.io/csi/volumeDevices`, with `staging/<pv>`, `publish/<pv>/<pod uid>`
/// and `<pv>/data/vol_data.json` (kubelet 1.20's `csi_block.go`).
pub(super) fn block_root() -> PathBuf {
    Path::new(KUBELET_ROOT).join("plugins/kubernetes.io/csi/volumeDevices")
}

/// kubelet's staging path of a block PV: a directory.
pub fn block_staging_path(pv: &str) -> PathBuf {
    block_root().join("staging").join(pv)
}

/// kubelet's directory of a block PV's publish paths, one per pod.
pub(super) fn block_publish_dir(pv: &str) -> PathBuf {
    block_root().join("publish").join(pv)
}

/// kubelet's publish path of a block PV for a pod: a file the driver creates (kubelet only
/// creates its directory), e.g. by bind-mounting the device on it.
pub fn block_publish_path(pod_uid: &str, pv: &str) -> PathBuf {
    block_publish_dir(pv).join(pod_uid)
}

/// The directory of a block PV's `vol_data.json`.
pub(super) fn block_data_dir(pv: &str) -> PathBuf {
    block_root().join(pv).join("data")
}

/// kubelet's directory of a pod's block CSI volumes: one entry per PV, a symbolic link to the
/// publish path (kubelet's pod device map path), which containers get as the device.
pub(super) fn pod_block_dir(pod_uid: &str) -> PathBuf {
    kubelet_pod_dir(pod_uid).join("volumeDevices/kubernetes.io~csi")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

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
    fn block_paths_are_kubelets() {
        let root = "/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices";
        assert_eq!(
            block_staging_path("pv-1"),
            Path::new(&format!("{root}/staging/pv-1"))
        );
        assert_eq!(
            block_publish_path("u-1", "pv-1"),
            Path::new(&format!("{root}/publish/pv-1/u-1"))
        );
        assert_eq!(
            block_data_dir("pv-1"),
            Path::new(&format!("{root}/pv-1/data"))
        );
        assert_eq!(
            pod_block_dir("u-1"),
            Path::new("/var/lib/kubelet/pods/u-1/volumeDevices/kubernetes.io~csi")
        );
    }
}
