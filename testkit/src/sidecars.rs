//! Set-up for the workspace's CSI sidecars under test: their command lines, and the bed the
//! controller sidecars (provisioner, resizer, snapshotter) run on in-process.

use std::path::Path;

use control_plane::ControlPlane;
use fakes::FakeCloud;
use kube::Client;
use pod_runtime::host_mounts::ScratchDir;

use crate::cloud::fake_cloud_in_zones;
use crate::drivers::{MANILA_DRIVER, ManilaController};

/// The command line of the sidecar `binary` for the driver at unix socket `socket`, with
/// test timings (60 s per CSI call, retries from 100 ms up to 1 s), then `extra` flags; for
/// the sidecar's `clap` config, e.g. `Config::try_parse_from(args(..))`.
pub fn args(binary: &str, socket: &Path, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        binary.to_string(),
        format!("--csi-address={}", socket.display()),
        "--timeout=60s".into(),
        "--retry-interval-start=100ms".into(),
        "--retry-interval-max=1s".into(),
    ];
    args.extend(extra.iter().map(|flag| flag.to_string()));
    args
}

/// What a controller sidecar works against: a real control plane (kube-apiserver and
/// kube-controller-manager, whose PV controller binds claims), the fake cloud, and the real
/// `manila-csi-plugin` (controller service only) named [`MANILA_DRIVER`], with its socket
/// and log in a scratch directory. The driver is killed and the directory removed on drop;
/// call [`ControllerBed::shutdown`] to stop the control plane.
#[derive(Debug)]
pub struct ControllerBed {
    /// The control plane.
    pub cp: ControlPlane,
    /// The fake OpenStack cloud.
    pub cloud: FakeCloud,
    /// The Manila driver.
    pub driver: ManilaController,
    dir: ScratchDir,
}

impl ControllerBed {
    /// Boots the control plane, the fake cloud with the Manila availability zones `zones`
    /// and the driver with `driver_flags` (e.g. `--with-topology`).
    pub async fn start(zones: &[&str], driver_flags: &[&str]) -> ControllerBed {
        let cp = ControlPlane::builder()
            .start()
            .await
            .unwrap_or_else(|e| panic!("starting the control plane: {e}"));
        let cloud = fake_cloud_in_zones(zones).await;
        let dir = ScratchDir::new().unwrap_or_else(|e| panic!("a scratch directory: {e}"));
        let driver = ManilaController::start(dir.path(), MANILA_DRIVER, driver_flags);
        ControllerBed {
            cp,
            cloud,
            driver,
            dir,
        }
    }

    /// A client of the control plane as the cluster admin.
    pub fn client(&self) -> Client {
        self.cp.client()
    }

    /// The scratch directory, e.g. for more drivers' sockets.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Stops the control plane; fails the test unless it stops cleanly.
    pub async fn shutdown(self) {
        self.cp
            .shutdown()
            .await
            .unwrap_or_else(|e| panic!("shutting the control plane down: {e}"));
    }
}
