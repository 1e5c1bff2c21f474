//! Real plugin processes for the sanity tests: the `nfs-csi-plugin` in a private mount
//! namespace and the `manila-csi-plugin` forwarding to it, over unix sockets in a temp dir.
//!
//! The binaries come from `harness::workspace::binary` (built when missing or stale).
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use csi_proto::Endpoint;
use csi_proto::v1::ProbeRequest;
use csi_proto::v1::identity_client::IdentityClient;
use suites::sanity::config::SECRET_SECTIONS;
use tempfile::TempDir;

const START_TIMEOUT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(20);

/// The path of the workspace binary `name` (package of the same name), built if needed.
pub fn driver_binary(name: &str) -> PathBuf {
    harness::workspace::binary(name, name).unwrap()
}

/// A plugin process; killed on drop.
pub struct Plugin {
    child: Child,
    /// What it is called in messages.
    pub name: &'static str,
    /// Its socket.
    pub endpoint: Endpoint,
    log: PathBuf,
}

impl Plugin {
    /// Spawns `command` (stderr to `<dir>/<name>.log`) and waits until Probe on `socket`
    /// answers OK, reporting the last answer and the log when it does not in time.
    pub async fn spawn(
        name: &'static str,
        mut command: Command,
        dir: &Path,
        socket: PathBuf,
    ) -> Plugin {
        let log = dir.join(format!("{name}.log"));
        let child = command
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        let mut plugin = Plugin {
            child,
            name,
            endpoint: Endpoint::Unix(socket),
            log,
        };
        let channel = csi_proto::connect_lazy(&plugin.endpoint).unwrap();
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = plugin.child.try_wait().unwrap() {
                panic!("{name} exited with {status}; log:\n{}", plugin.log());
            }
            match IdentityClient::new(channel.clone())
                .probe(ProbeRequest {})
                .await
            {
                Ok(_) => return plugin,
                Err(status) if Instant::now() > deadline => panic!(
                    "{name} not ready after {START_TIMEOUT:?}, last Probe: {status}; log:\n{}",
                    plugin.log()
                ),
                Err(_) => tokio::time::sleep(POLL).await,
            }
        }
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Its pid (`unshare` execs the plugin, so this is the plugin's).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Plugin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The NFS node plugin with the local (bind-mount) mounter, in its own private mount
/// namespace so its mounts never reach the host or the test.
pub async fn start_nfs_plugin(dir: &Path) -> Plugin {
    let socket = dir.join("nfs.sock");
    let mut command = Command::new("unshare");
    command
        .args(["--mount", "--propagation", "private", "--"])
        .arg(driver_binary("nfs-csi-plugin"))
        .arg(format!("--endpoint=unix://{}", socket.display()))
        .args(["--nodeid=sanity-node", "--mounter=local"]);
    Plugin::spawn("nfs-csi-plugin", command, dir, socket).await
}

/// The Manila driver (controller + node, NFS) forwarding to `partner`.
pub async fn start_manila_plugin(dir: &Path, partner: &Plugin) -> Plugin {
    let socket = dir.join("manila.sock");
    let mut command = Command::new(driver_binary("manila-csi-plugin"));
    command
        .arg(format!("--endpoint=unix://{}", socket.display()))
        .arg("--share-protocol-selector=NFS")
        .arg(format!("--fwdendpoint={}", partner.endpoint))
        .arg("--nodeid=sanity-node");
    Plugin::spawn("manila-csi-plugin", command, dir, socket).await
}

/// Writes `secret` under every section of a csi-sanity secrets file (mode 0600).
pub fn write_secrets_file(dir: &Path, secret: &BTreeMap<String, String>) -> PathBuf {
    use std::os::unix::fs::OpenOptionsExt;
    let sections: BTreeMap<&str, &BTreeMap<String, String>> =
        SECRET_SECTIONS.iter().map(|s| (*s, secret)).collect();
    let path = dir.join("secrets.yaml");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .unwrap();
    serde_yaml::to_writer(&mut file, &sections).unwrap();
    path
}

/// A scratch directory for sockets, logs, mount and staging dirs.
pub fn scratch() -> TempDir {
    tempfile::Builder::new()
        .prefix("sanity-")
        .tempdir()
        .unwrap()
}
