//! Runs the real `nfs-csi-plugin` binary in a private mount namespace and talks to it
//! over a unix socket.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use csi_proto::{
    Endpoint,
    v1::{
        NodePublishVolumeRequest, NodeUnpublishVolumeRequest, ProbeRequest, VolumeCapability,
        identity_client::IdentityClient, node_client::NodeClient, volume_capability,
    },
};
use tempfile::TempDir;
use tonic::transport::Channel;

const START_TIMEOUT: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(20);

/// A running plugin; killed (and its mount namespace with its mounts gone) on drop.
pub struct Plugin {
    child: Child,
    /// Scratch directory: the socket, the plugin's log, exports and targets live here.
    pub dir: TempDir,
    pub channel: Channel,
}

impl Plugin {
    /// Starts the plugin with the local mounter and waits until Probe answers.
    pub async fn start_local(extra_args: &[&str]) -> Plugin {
        let mut args = vec!["--mounter=local", "--nodeid=node-1"];
        args.extend_from_slice(extra_args);
        Self::start(&args).await.unwrap_or_else(|e| panic!("{e}"))
    }

    /// Starts the plugin under `unshare --mount --propagation private` (so its mounts
    /// never reach the host) and waits until Probe answers, or reports why not.
    pub async fn start(args: &[&str]) -> Result<Plugin, String> {
        let dir = tempfile::Builder::new()
            .prefix("common-")
            .tempdir()
            .unwrap();
        let socket = dir.path().join("csi.sock");
        let log = std::fs::File::create(dir.path().join("plugin.log")).unwrap();
        let mut command = Command::new("unshare");
        command
            .args(["--mount", "--propagation", "private", "--"])
            .arg(env!("CARGO_BIN_EXE_nfs-csi-plugin"));
        if !args.iter().any(|a| a.starts_with("--endpoint")) {
            command.arg(format!("--endpoint=unix://{}", socket.display()));
        }
        let child = command
            .args(args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("unshare (util-linux) must be installed");
        let mut plugin = Plugin {
            child,
            channel: csi_proto::connect_lazy(&Endpoint::Unix(socket)).unwrap(),
            dir,
        };
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = plugin.child.try_wait().unwrap() {
                return Err(format!(
                    "plugin exited with {status}; log:\n{}",
                    plugin.log()
                ));
            }
            let probe = IdentityClient::new(plugin.channel.clone())
                .probe(ProbeRequest {})
                .await;
            match probe {
                Ok(_) => return Ok(plugin),
                Err(status) if Instant::now() > deadline => {
                    return Err(format!(
                        "plugin not ready after {START_TIMEOUT:?}, last probe: {status}; log:\n{}",
                        plugin.log()
                    ));
                }
                Err(_) => tokio::time::sleep(POLL).await,
            }
        }
    }

    /// The plugin's pid: `unshare` execs the plugin, so it is the child's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `path` as seen inside the plugin's mount namespace, reachable from the test's.
    pub fn inside(&self, path: &Path) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root", self.pid())).join(path.strip_prefix("/").unwrap())
    }

    /// Waits for the plugin to exit by itself.
    pub async fn wait_exit(&mut self, timeout: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "plugin still running after {timeout:?}"
            );
            // Not a blocking sleep: the test's clients must keep running to see the
            // server's GOAWAY and close their connections.
            tokio::time::sleep(POLL).await;
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("plugin.log")).unwrap_or_default()
    }

    pub fn node(&self) -> NodeClient<Channel> {
        NodeClient::new(self.channel.clone())
    }

    pub fn identity(&self) -> IdentityClient<Channel> {
        IdentityClient::new(self.channel.clone())
    }

    /// Creates an export directory in the scratch dir.
    pub fn export(&self, name: &str) -> PathBuf {
        let export = self.dir.path().join("exports").join(name);
        std::fs::create_dir_all(&export).unwrap();
        export
    }

    /// A (not yet existing) target path in the scratch dir.
    pub fn target(&self, name: &str) -> PathBuf {
        self.dir.path().join("pods").join(name).join("mount")
    }
}

impl Drop for Plugin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn mount_capability(flags: &[&str]) -> VolumeCapability {
    VolumeCapability {
        access_type: Some(volume_capability::AccessType::Mount(
            volume_capability::MountVolume {
                fs_type: String::new(),
                mount_flags: flags.iter().map(|f| f.to_string()).collect(),
                volume_mount_group: String::new(),
            },
        )),
        access_mode: Some(volume_capability::AccessMode {
            mode: volume_capability::access_mode::Mode::MultiNodeMultiWriter.into(),
        }),
    }
}

/// A complete publish request for `server:share` at `target`.
pub fn publish_request(server: &str, share: &Path, target: &Path) -> NodePublishVolumeRequest {
    NodePublishVolumeRequest {
        volume_id: "vol-1".into(),
        target_path: target.display().to_string(),
        volume_capability: Some(mount_capability(&[])),
        volume_context: [
            ("server".to_owned(), server.to_owned()),
            ("share".to_owned(), share.display().to_string()),
        ]
        .into(),
        ..Default::default()
    }
}

pub fn unpublish_request(target: &Path) -> NodeUnpublishVolumeRequest {
    NodeUnpublishVolumeRequest {
        volume_id: "vol-1".into(),
        target_path: target.display().to_string(),
    }
}

/// Whether `path` is a mount point in the test's own mount namespace.
pub fn mounted_here(path: &Path) -> bool {
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let wanted = path.display().to_string();
    table
        .lines()
        .any(|line| line.split(' ').nth(4) == Some(wanted.as_str()))
}
