//! The Cinder driver for the sanity cases: `cinder-csi-plugin` (controller and node in one
//! process, in a private mount namespace) against a fake cloud of the suite's own (the run's
//! release, Cinder and Nova on; its own project, so that ListVolumes and ListSnapshots see
//! only the cases' volumes, not those of the storage tests running beside them), as its Nova
//! server `sanity-node`, whose disk directory is in the suite's scratch directory: attaching a
//! volume to it makes a real loop device there, which the plugin formats and mounts, or maps
//! as a raw block device. Afterwards that cloud must hold no volume, snapshot, attachment or
//! loop device.

use std::path::Path;

use fakes::{CloudConfig, FakeCloud, ServerSeed};
use tokio::process::Command;

use super::{Started, spawn};
use crate::e2e::binaries::Binaries;
use crate::e2e::cinder::{CinderCsiEnvironment, DISK_DIR_ENV};
use crate::e2e::host;
use crate::sanity::{AccessType, GIB};

/// The plugin's node: a Nova server of the suite's cloud.
const NODE: &str = "sanity-node";

/// The sanity case that grows a mounted file system.
const EXPAND_AFTER_PUBLISH: &str =
    "Node Service NodeExpandVolume should work if node-expand is called after node-publish";

/// Starts the plugin with its socket, cloud.conf, disk directory and log in `dir`.
pub(super) async fn start(
    env: &CinderCsiEnvironment,
    dir: &Path,
    access: AccessType,
) -> Result<Started, String> {
    let binaries = Binaries::locate_or_build(None)
        .await
        .map_err(|e| e.to_string())?;
    let mut config = CloudConfig {
        release: env.cloud().release(),
        ..CloudConfig::default()
    };
    config.cinder.present = true;
    let volumes = dir.join("volumes");
    let disk_dir = dir.join("by-id");
    for path in [&volumes, &disk_dir] {
        std::fs::create_dir_all(path).map_err(|e| format!("creating {}: {e}", path.display()))?;
    }
    let cloud = FakeCloud::builder(config)
        .backend_root(&volumes)
        .start()
        .await
        .map_err(|e| format!("starting the sanity suite's fake cloud: {e}"))?;
    cloud
        .add_server(&ServerSeed {
            name: NODE.into(),
            availability_zone: "nova".into(),
            id: None,
            disk_dir: Some(disk_dir.clone()),
        })
        .map_err(|e| format!("adding Nova server {NODE} to the fake cloud: {e}"))?;
    let conf = dir.join("cloud.conf");
    write_private(&conf, &cloud.cinder_cloud_conf(&[]))?;
    let socket = dir.join("cinder.sock");
    let mut command = Command::new("unshare");
    command
        .args(["--mount", "--propagation", "private", "--"])
        .arg(binaries.dir().join("cinder-csi-plugin"))
        .arg(format!("--endpoint=unix://{}", socket.display()))
        .arg(format!("--cloud-config={}", conf.display()))
        .arg("--cluster=sanity")
        .env("OS_METADATA_URL", cloud.metadata_url(NODE))
        .env(DISK_DIR_ENV, &disk_dir);
    let plugin = spawn("cinder-csi-plugin", command, dir, socket).await?;
    let mut not_runnable = Vec::new();
    if access == AccessType::Mount && !host::can_grow_mounted_ext4() {
        not_runnable.push((EXPAND_AFTER_PUBLISH, host::GROW_MOUNTED_EXT4));
    }
    Ok(Started {
        socket: plugin.socket.clone(),
        logs: format!("cinder-csi-plugin log: {}", plugin.log.display()),
        configure: Box::new(|config| {
            // Cinder sizes are whole GiB; small volumes keep mkfs and the copies quick.
            config.test_volume_size = GIB;
            config.test_volume_expand_size = Some(2 * GIB);
        }),
        not_runnable,
        _plugins: vec![plugin],
        cloud: Some(cloud),
    })
}

/// Writes `text` (it holds the cloud's password) readable by its owner only.
fn write_private(path: &Path, text: &str) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut file| file.write_all(text.as_bytes()))
        .map_err(|e| format!("writing {}: {e}", path.display()))
}
