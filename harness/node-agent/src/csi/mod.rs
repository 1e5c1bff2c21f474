//! kubelet's CSI plugin registration for the node agent: the plugin watcher and the node's
//! CSINode.
//!
//! Layout, kubelet-style, under the agent's run directory (see [`PluginPaths`]):
//!
//! - `<run_dir>/plugins_registry/`: where registration sockets appear
//!   (node-driver-registrar's `--plugin-registration-path`, e.g.
//!   `manila.csi.openstack.org-reg.sock`);
//! - `<run_dir>/plugins/<driver>/csi.sock`: the drivers' own sockets.
//!
//! [`PluginPaths::host_path`] maps kubelet's `/var/lib/kubelet/…` paths (as manifests give
//! them in `--kubelet-registration-path`) into the run directory.
//!
//! The watcher ([`watch`]) scans `plugins_registry` every [`SCAN_INTERVAL`]. For a new
//! socket it does what kubelet's plugin manager and CSI plugin handler do:
//!
//! 1. `GetInfo` on the registration socket; the type must be `CSIPlugin` and one of the
//!    `supported_versions` a 1.x (the highest is kept);
//! 2. connects to the driver's endpoint (`PluginInfo.endpoint`, or the registration socket
//!    when empty) and calls `NodeGetInfo`;
//! 3. on the Node: adds the driver → node id pair to the `csi.volume.kubernetes.io/nodeid`
//!    annotation (a JSON object) and the `accessible_topology` segments as labels (a
//!    segment contradicting an existing label fails the registration);
//! 4. on the CSINode named after the node (created with an ownerReference to the Node when
//!    missing; the watcher also creates it, without drivers, at start as kubelet does):
//!    the entry `{name, nodeID, topologyKeys (sorted), allocatable.count}` (`count` only
//!    when `max_volumes_per_node > 0`);
//! 5. `NotifyRegistrationStatus(true)`, or `(false, "RegisterPlugin error -- …")` when any
//!    step failed; a failed socket is tried again every [`RETRY_INTERVAL`] while it stays.
//!
//! When a socket disappears (or a new socket replaces it at the same path), the driver is
//! removed from the CSINode and the annotation (the topology labels stay, as with kubelet).
//!
//! Registered drivers are kept in [`CsiDrivers`] (driver name → endpoint, gRPC channel and,
//! asked once per registration, node capabilities) for the volume manager
//! ([`VolumeManager`]: the mount flow, see its module for the files to read in order) to
//! find.
//!
//! Dependencies go one way: the pod workers (`node::pod`) use this module (the volume
//! manager, its errors); nothing here uses `node::pod`.

mod csinode;
mod drivers;
mod error;
mod plugin;
mod volumes;
mod watcher;

use std::path::{Path, PathBuf};

pub use csinode::{DriverNodeInfo, NODE_ID_ANNOTATION, csinode_driver};
pub use drivers::{CsiDrivers, NodeCapabilities, RegisteredDriver};
pub use error::{Error, Result};
pub use volumes::{
    CSI_PLUGIN_NAME, FS_RESIZE_PENDING, PodVolume, VOL_DATA_FILE, VolumeManager, VolumeStats,
    attachment_name, block_publish_path, block_staging_path, kubelet_volume_capability,
    publish_path, staging_path, unique_volume_name,
};
pub use watcher::{RETRY_INTERVAL, SCAN_INTERVAL, watch};

pub use crate::layout::KUBELET_ROOT;

/// Where plugins register and live on one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginPaths {
    /// The node agent's run directory (standing for `/var/lib/kubelet`).
    pub run_dir: PathBuf,
    /// `<run_dir>/plugins_registry`: registration sockets.
    pub registry: PathBuf,
    /// `<run_dir>/plugins`: drivers' sockets, `<driver>/csi.sock`.
    pub plugins: PathBuf,
}

impl PluginPaths {
    /// The paths under a node agent's run directory.
    pub fn new(run_dir: impl Into<PathBuf>) -> Self {
        let run_dir = run_dir.into();
        PluginPaths {
            registry: run_dir.join("plugins_registry"),
            plugins: run_dir.join("plugins"),
            run_dir,
        }
    }

    /// The socket a driver conventionally listens on: `<plugins>/<driver>/csi.sock`.
    pub fn driver_socket(&self, driver: &str) -> PathBuf {
        self.plugins.join(driver).join("csi.sock")
    }

    /// A path as kubelet sees it, on this node: `/var/lib/kubelet/x` → `<run_dir>/x`; other
    /// paths unchanged (see [`layout::host_path`](crate::layout::host_path)).
    pub fn host_path(&self, path: &Path) -> PathBuf {
        crate::layout::host_path(&self.run_dir, path)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn kubelet_paths_map_into_the_run_dir() {
        let paths = PluginPaths::new("/run/node-a");
        assert_eq!(
            paths.host_path(Path::new("/var/lib/kubelet/plugins/d/csi.sock")),
            Path::new("/run/node-a/plugins/d/csi.sock")
        );
        assert_eq!(
            paths.host_path(Path::new("/elsewhere/csi.sock")),
            Path::new("/elsewhere/csi.sock")
        );
        assert_eq!(
            paths.driver_socket("d"),
            Path::new("/run/node-a/plugins/d/csi.sock")
        );
        assert_eq!(paths.registry, Path::new("/run/node-a/plugins_registry"));
    }
}
