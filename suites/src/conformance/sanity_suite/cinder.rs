//! The Cinder driver for the sanity cases: `cinder-csi-plugin` (controller and node in one
//! process, in a private mount namespace) against the run's fake cloud, as a Nova server of
//! its own (`sanity-<access>`) whose disk directory is in the suite's scratch directory:
//! attaching a volume to it makes a real loop device there, which the plugin formats and
//! mounts, or maps as a raw block device.

use std::path::Path;

use fakes::ServerSeed;
use tokio::process::Command;

use super::{Started, spawn};
use crate::e2e::binaries::Binaries;
use crate::e2e::cinder::{CinderCsiEnvironment, DISK_DIR_ENV};
use crate::e2e::host;
use crate::sanity::{AccessType, GIB};

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
    let cloud = env.cloud();
    let node = match access {
        AccessType::Mount => "sanity-mount",
        AccessType::Block => "sanity-block",
    };
    let disk_dir = dir.join("by-id");
    std::fs::create_dir_all(&disk_dir)
        .map_err(|e| format!("creating {}: {e}", disk_dir.display()))?;
    cloud
        .add_server(&ServerSeed {
            name: node.into(),
            availability_zone: env
                .options()
                .zones
                .first()
                .cloned()
                .unwrap_or_else(|| "nova".into()),
            id: None,
            disk_dir: Some(disk_dir.clone()),
        })
        .map_err(|e| format!("adding Nova server {node} to the fake cloud: {e}"))?;
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
        .env("OS_METADATA_URL", cloud.metadata_url(node))
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
