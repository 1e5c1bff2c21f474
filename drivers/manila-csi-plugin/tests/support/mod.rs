//! Test support: the fake cloud, the driver served in-process over a unix socket, clients,
//! and a fake partner node plugin that records what it was sent.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod partner;

use std::collections::HashMap;
use std::time::Duration;

use clap::Parser;
use csi_proto::Endpoint;
use csi_proto::v1::controller_client::ControllerClient;
use csi_proto::v1::identity_client::IdentityClient;
use csi_proto::v1::node_client::NodeClient;
use csi_proto::v1::volume_capability::access_mode::Mode;
use csi_proto::v1::volume_capability::{AccessMode, AccessType, MountVolume};
use csi_proto::v1::{self, VolumeCapability};
use fakes::{CloudConfig, FakeCloud, SecretKind};
use manila_csi_plugin::config::Config;
use manila_csi_plugin::driver::{self, Driver};
use tempfile::TempDir;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::Channel;

/// A driver served on a unix socket in a temporary directory.
pub struct RunningDriver {
    pub endpoint: Endpoint,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl RunningDriver {
    /// Parses `args` as the binary would and serves the driver at `<dir>/<name>.sock`.
    pub async fn start(
        dir: &std::path::Path,
        name: &str,
        args: &[&str],
    ) -> Result<Self, manila_csi_plugin::Error> {
        let socket = dir.join(format!("{name}.sock"));
        let endpoint = format!("unix://{}", socket.display());
        let mut argv = vec![
            "manila-csi-plugin".to_string(),
            format!("--endpoint={endpoint}"),
        ];
        argv.extend(args.iter().map(|a| a.to_string()));
        let config = Config::try_parse_from(&argv).expect("test flags parse");
        let listener = Driver::bind(&config.endpoint).await?;
        let driver = driver::build(&config).await?;
        let (tx, rx) = oneshot::channel();
        let task = tokio::spawn(async move {
            driver
                .serve(listener, async {
                    let _ = rx.await;
                })
                .await
                .expect("driver serves");
        });
        Ok(RunningDriver {
            endpoint: endpoint.parse().unwrap(),
            shutdown: Some(tx),
            task: Some(task),
        })
    }

    pub async fn channel(&self) -> Channel {
        csi_proto::connect(&self.endpoint)
            .await
            .expect("connect to the driver")
    }

    pub async fn controller(&self) -> ControllerClient<Channel> {
        ControllerClient::new(self.channel().await)
    }

    pub async fn identity(&self) -> IdentityClient<Channel> {
        IdentityClient::new(self.channel().await)
    }

    pub async fn node(&self) -> NodeClient<Channel> {
        NodeClient::new(self.channel().await)
    }

    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for RunningDriver {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// A fake cloud plus a controller-only NFS driver.
///
/// Fields drop in order: the driver before the directory holding its socket.
pub struct ControllerEnv {
    pub cloud: FakeCloud,
    pub driver: RunningDriver,
    pub client: ControllerClient<Channel>,
    pub secrets: HashMap<String, String>,
    pub dir: TempDir,
}

impl ControllerEnv {
    pub async fn start(extra: &[&str]) -> Self {
        Self::with_cloud(CloudConfig::default(), extra).await
    }

    pub async fn with_cloud(config: CloudConfig, extra: &[&str]) -> Self {
        let cloud = FakeCloud::start(config).await.expect("fake cloud starts");
        let dir = tempfile::Builder::new()
            .prefix("support-")
            .tempdir()
            .unwrap();
        let mut args = vec![
            "--share-protocol-selector=NFS",
            "--provide-node-service=false",
        ];
        if !extra.iter().any(|a| a.starts_with("--share-wait-timeout")) {
            args.push("--share-wait-timeout=3s");
        }
        args.extend_from_slice(extra);
        let driver = RunningDriver::start(dir.path(), "controller", &args)
            .await
            .expect("driver starts");
        let client = driver.controller().await;
        let secrets = secrets(&cloud);
        ControllerEnv {
            cloud,
            dir,
            driver,
            client,
            secrets,
        }
    }

    /// Creates a volume with default parameters.
    pub async fn create(&mut self, name: &str, bytes: i64) -> Result<v1::Volume, tonic::Status> {
        let request = create_request(name, bytes, &self.secrets, &[]);
        self.client
            .create_volume(request)
            .await
            .map(|r| r.into_inner().volume.expect("volume"))
    }

    pub async fn delete(&mut self, id: &str) -> Result<(), tonic::Status> {
        self.client
            .delete_volume(v1::DeleteVolumeRequest {
                volume_id: id.into(),
                secrets: self.secrets.clone(),
            })
            .await
            .map(|_| ())
    }

    /// Asserts the fake cloud holds no shares, snapshots or access rules.
    pub fn assert_no_leftovers(&self) {
        let leftovers = self.cloud.leftovers();
        assert!(
            leftovers.is_empty(),
            "resources left in the fake cloud: {leftovers:#?}"
        );
    }
}

/// The flat `os-*` secret of the fake cloud.
pub fn secrets(cloud: &FakeCloud) -> HashMap<String, String> {
    cloud.secret(SecretKind::Password).into_iter().collect()
}

pub fn mount_capability(mode: Mode) -> VolumeCapability {
    VolumeCapability {
        access_mode: Some(AccessMode { mode: mode as i32 }),
        access_type: Some(AccessType::Mount(MountVolume::default())),
    }
}

pub fn create_request(
    name: &str,
    bytes: i64,
    secrets: &HashMap<String, String>,
    parameters: &[(&str, &str)],
) -> v1::CreateVolumeRequest {
    v1::CreateVolumeRequest {
        name: name.into(),
        capacity_range: Some(v1::CapacityRange {
            required_bytes: bytes,
            limit_bytes: 0,
        }),
        volume_capabilities: vec![mount_capability(Mode::MultiNodeMultiWriter)],
        parameters: parameters
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        secrets: secrets.clone(),
        ..Default::default()
    }
}

pub const GIB: i64 = 1 << 30;

/// Polls `condition` until true or `timeout`, reporting `what` and the last value seen.
pub async fn wait_until<T: std::fmt::Debug>(
    what: &str,
    timeout: Duration,
    mut probe: impl FnMut() -> (bool, T),
) {
    let end = tokio::time::Instant::now() + timeout;
    loop {
        let (done, seen) = probe();
        if done {
            return;
        }
        if tokio::time::Instant::now() >= end {
            panic!("timed out waiting for {what}; last seen {seen:?}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// CreateSnapshot until the snapshot is ready to use, as the external-snapshotter calls it
/// again while the snapshot is still being cut (the fake's transitions take time, as
/// Manila's do); a failure is returned at once.
pub async fn snapshot_until_ready(
    client: &mut ControllerClient<Channel>,
    request: v1::CreateSnapshotRequest,
) -> Result<v1::Snapshot, tonic::Status> {
    let end = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let snapshot = client
            .create_snapshot(request.clone())
            .await?
            .into_inner()
            .snapshot
            .expect("snapshot");
        if snapshot.ready_to_use {
            return Ok(snapshot);
        }
        assert!(
            tokio::time::Instant::now() < end,
            "snapshot {:?} not ready within 30 s: {snapshot:?}",
            request.name
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Reads a share straight from the fake's API (as an admin client would).
pub async fn share_json(env: &ControllerEnv, id: &str) -> serde_json::Value {
    let http = reqwest::Client::new();
    let account = env.cloud.account();
    let auth = serde_json::json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {
        "id": account.user_id, "password": account.password.expose()}}},
        "scope": {"project": {"id": account.project_id}}}});
    let response = http
        .post(format!("{}/auth/tokens", env.cloud.auth_url()))
        .json(&auth)
        .send()
        .await
        .unwrap();
    let token = response.headers()["X-Subject-Token"]
        .to_str()
        .unwrap()
        .to_string();
    http.get(format!("{}/shares/{id}", env.cloud.manila_url()))
        .header("X-Auth-Token", token)
        .header("X-OpenStack-Manila-API-Version", "2.45")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}
