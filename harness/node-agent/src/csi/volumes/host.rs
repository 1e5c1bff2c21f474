//! What the volume steps need of the node they run on ([`VolumeHost`], after kubelet's
//! `VolumeHost`): the API client, the node's name and where kubelet's paths are on this
//! machine. The manager owns one and lends it to every step; the steps never see the
//! manager's state or locks.

use std::path::{Path, PathBuf};

use kube::Client;

use crate::csi::PluginPaths;

/// The node the volume steps run on.
#[derive(Clone)]
pub(super) struct VolumeHost {
    /// The node's API client (its identity: `system:node:<name>`).
    pub client: Client,
    /// The node's name.
    pub node_name: String,
    /// The node's run directory, standing for `/var/lib/kubelet`.
    pub paths: PluginPaths,
}

impl VolumeHost {
    /// Where kubelet's path `kubelet_path` (`/var/lib/kubelet/…`, as requests to drivers name
    /// it) is on this machine.
    pub fn path(&self, kubelet_path: &Path) -> PathBuf {
        self.paths.host_path(kubelet_path)
    }
}
