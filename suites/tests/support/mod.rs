//! Real plugin processes for the sanity tests: the `nfs-csi-plugin` in a private mount
//! namespace and the `manila-csi-plugin` forwarding to it, over unix sockets in a temp dir;
//! and what the sanity tests read from a plugin or a report.
//!
//! The binaries and processes come from `testkit::drivers` (built when missing or stale,
//! killed on drop).
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use csi_proto::Endpoint;
use csi_proto::v1::identity_client::IdentityClient;
use csi_proto::v1::node_client::NodeClient;
use csi_proto::v1::{
    GetPluginCapabilitiesRequest, GetPluginCapabilitiesResponse, GetPluginInfoRequest,
    GetPluginInfoResponse, NodeGetCapabilitiesRequest, NodeGetCapabilitiesResponse, ProbeRequest,
};
use suites::sanity::config::SECRET_SECTIONS;
use suites::sanity::{Outcome, Report};
use tempfile::TempDir;
use testkit::drivers::{TestProcess, binary, lazy_channel};
use tokio::process::Command;
use tonic::transport::Channel;

const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A plugin process serving CSI on a unix socket; killed on drop.
pub struct Plugin {
    process: TestProcess,
    /// Its socket.
    pub endpoint: Endpoint,
}

impl Plugin {
    /// Spawns `command` as `name` (stderr to `<dir>/<name>.log`, `RUST_LOG=info`) and waits
    /// until Probe on `socket` answers OK, failing with the plugin's log when it exits or
    /// does not answer in time.
    pub async fn spawn(name: &str, mut command: Command, dir: &Path, socket: PathBuf) -> Plugin {
        command.env("RUST_LOG", "info");
        let mut process = TestProcess::spawn(command, &dir.join(format!("{name}.log")));
        let channel = lazy_channel(&socket);
        testkit::wait_for(&format!("{name} to answer Probe"), START_TIMEOUT, || {
            if let Some(status) = process.child().try_wait().unwrap() {
                panic!("{name} exited with {status}; log:\n{}", process.log());
            }
            let log = process.log();
            let mut identity = IdentityClient::new(channel.clone());
            async move {
                match identity.probe(ProbeRequest {}).await {
                    Ok(_) => Ok(Some(())),
                    Err(status) => Err(format!("Probe: {status}; log:\n{log}")),
                }
            }
        })
        .await;
        Plugin {
            process,
            endpoint: Endpoint::Unix(socket),
        }
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        self.process.log()
    }

    /// Its pid (`unshare` execs the plugin, so this is the plugin's).
    pub fn pid(&self) -> u32 {
        self.process.id().expect("the plugin runs")
    }
}

/// The NFS node plugin with the local (bind-mount) mounter, in its own private mount
/// namespace so its mounts never reach the host or the test.
pub async fn start_nfs_plugin(dir: &Path) -> Plugin {
    let socket = dir.join("nfs.sock");
    let mut command = Command::new("unshare");
    command
        .args(["--mount", "--propagation", "private", "--"])
        .arg(binary("nfs-csi-plugin", "nfs-csi-plugin"))
        .arg(format!("--endpoint=unix://{}", socket.display()))
        .args(["--nodeid=sanity-node", "--mounter=local"]);
    Plugin::spawn("nfs-csi-plugin", command, dir, socket).await
}

/// The Manila driver (controller + node, NFS) forwarding to `partner`.
pub async fn start_manila_plugin(dir: &Path, partner: &Plugin) -> Plugin {
    let socket = dir.join("manila.sock");
    let mut command = Command::new(binary("manila-csi-plugin", "manila-csi-plugin"));
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

/// `name → outcome` with skip reasons, failures reduced to "FAILED" (their messages carry
/// generated ids): what the outcome snapshots hold.
pub fn outcomes(report: &Report) -> Vec<String> {
    report
        .cases
        .iter()
        .map(|case| match &case.outcome {
            Outcome::Passed => format!("passed: {}", case.name),
            Outcome::Failed(_) => format!("FAILED: {}", case.name),
            Outcome::Skipped(reason) => format!("skipped: {} ({reason})", case.name),
        })
        .collect()
}

/// GetPluginInfo (its vendor version, which must be set, replaced by `[version]`) and
/// GetPluginCapabilities of the plugin behind `channel`.
pub async fn identity_shapes(
    channel: &Channel,
) -> (GetPluginInfoResponse, GetPluginCapabilitiesResponse) {
    let mut identity = IdentityClient::new(channel.clone());
    let mut info = identity
        .get_plugin_info(GetPluginInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(!info.vendor_version.is_empty());
    info.vendor_version = "[version]".into();
    let capabilities = identity
        .get_plugin_capabilities(GetPluginCapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner();
    (info, capabilities)
}

/// NodeGetCapabilities of the plugin behind `channel`.
pub async fn node_capabilities(channel: &Channel) -> NodeGetCapabilitiesResponse {
    NodeClient::new(channel.clone())
        .node_get_capabilities(NodeGetCapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner()
}

/// The Cinder driver (controller + node) as a process in its own private mount namespace
/// (its loop-device mounts never reach the host; whatever it leaves goes with it), talking
/// to `cloud` (Cinder must be present) as node `node` (a Nova server of the cloud, whose
/// metadata document gives the node id and zone) and finding disks in `disk_dir`.
pub async fn start_cinder_plugin(
    dir: &Path,
    cloud: &fakes::FakeCloud,
    node: &str,
    disk_dir: &Path,
) -> Plugin {
    let account = cloud.account();
    let cloud_conf = dir.join("cloud.conf");
    std::fs::write(
        &cloud_conf,
        format!(
            "[Global]\nauth-url = {}\nusername = {}\npassword = \"{}\"\ntenant-name = {}\n\
             domain-name = {}\n[Metadata]\nsearch-order = metadataService\n",
            cloud.auth_url(),
            account.user_name,
            account.password.expose(),
            account.project_name,
            account.domain_name,
        ),
    )
    .unwrap();
    let socket = dir.join("cinder.sock");
    let mut command = Command::new("unshare");
    command
        .args(["--mount", "--propagation", "private", "--"])
        .arg(binary("cinder-csi-plugin", "cinder-csi-plugin"))
        .arg(format!("--endpoint=unix://{}", socket.display()))
        .arg(format!("--cloud-config={}", cloud_conf.display()))
        .arg("--cluster=sanity")
        .env("OS_METADATA_URL", cloud.metadata_url(node))
        .env("CINDER_CSI_DISK_BY_ID_DIR", disk_dir);
    Plugin::spawn("cinder-csi-plugin", command, dir, socket).await
}

/// The loop devices whose backing file lies under `root` (from
/// `/sys/block/loop*/loop/backing_file`), as `device → file`.
pub fn loop_devices_backed_under(root: &Path) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir("/sys/block") else {
        return found;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with("loop") {
            continue;
        }
        let Ok(file) = std::fs::read_to_string(entry.path().join("loop/backing_file")) else {
            continue;
        };
        // The kernel appends " (deleted)" when the file is gone.
        let file = file.trim_end().trim_end_matches(" (deleted)").to_string();
        if Path::new(&file).starts_with(root) {
            found.insert(format!("/dev/{name}"), file);
        }
    }
    found
}

/// The mount points under `root` in the mount namespace of process `pid`.
pub fn mounts_under(pid: u32, root: &Path) -> Vec<String> {
    let table = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap();
    table
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .filter(|point| Path::new(point).starts_with(root))
        .map(str::to_string)
        .collect()
}
