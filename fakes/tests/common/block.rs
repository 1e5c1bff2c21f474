//! A small Cinder + Nova client for the block-storage tests.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fakes::{CloudConfig, FakeCloud, ServerSeed};
use reqwest::Method;
use serde_json::{Value, json};

use super::{Resp, resp, token};

/// Fails (never skips) when the host cannot make loop devices: CI runs as root.
pub fn require_loop_devices() {
    assert!(
        Path::new("/dev/loop-control").exists(),
        "these tests need loop devices (/dev/loop-control missing): run them as root on a host with the loop module"
    );
}

/// A cloud with Cinder and Nova, and a token.
pub struct Block {
    pub http: reqwest::Client,
    pub cloud: FakeCloud,
    pub token: String,
}

impl Block {
    pub async fn start() -> Self {
        let mut config = CloudConfig::default();
        config.cinder.present = true;
        Self::with(config).await
    }

    pub async fn with(config: CloudConfig) -> Self {
        let cloud = FakeCloud::start(config).await.unwrap();
        let http = reqwest::Client::new();
        let token = token(&http, &cloud).await;
        Self { http, cloud, token }
    }

    /// A Cinder request at microversion `version` (none: no header); `path` below the
    /// catalog URL.
    pub async fn cinder(
        &self,
        method: Method,
        path: &str,
        version: Option<&str>,
        body: Option<Value>,
    ) -> Resp {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.cloud.cinder_url()))
            .header("X-Auth-Token", &self.token);
        if let Some(v) = version {
            req = req.header("OpenStack-API-Version", format!("volume {v}"));
        }
        if let Some(body) = body {
            req = req.json(&body);
        }
        resp(req.send().await.unwrap()).await
    }

    /// A Nova request at compute microversion `version`.
    pub async fn nova(
        &self,
        method: Method,
        path: &str,
        version: &str,
        body: Option<Value>,
    ) -> Resp {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.cloud.nova_url()))
            .header("X-Auth-Token", &self.token)
            .header("OpenStack-API-Version", format!("compute {version}"));
        if let Some(body) = body {
            req = req.json(&body);
        }
        resp(req.send().await.unwrap()).await
    }

    /// Polls a volume until its status is `want`; panics with the last answer.
    pub async fn wait_volume(&self, id: &str, want: &str) -> Value {
        self.wait(&format!("/volumes/{id}"), "volume", want).await
    }

    /// Polls `path` until `body[key].status` is `want`.
    pub async fn wait(&self, path: &str, key: &str, want: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let r = self.cinder(Method::GET, path, Some("3.70"), None).await;
            if r.body[key]["status"] == want {
                return r.body[key].clone();
            }
            assert!(
                Instant::now() < deadline,
                "{path} never became {want:?}; last seen {} {:?}",
                r.status,
                r.body
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Polls until GET `path` answers 404.
    pub async fn wait_gone(&self, path: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let r = self.cinder(Method::GET, path, Some("3.70"), None).await;
            if r.status == 404 {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{path} never disappeared; last seen {} {:?}",
                r.status,
                r.body
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Creates a volume (`body` merged into the request) and waits until available; its id.
    pub async fn volume(&self, body: Value) -> String {
        let r = self
            .cinder(
                Method::POST,
                "/volumes",
                Some("3.70"),
                Some(json!({"volume": body})),
            )
            .await;
        assert_eq!(r.status, 202, "{:?}", r.body);
        let id = r.body["volume"]["id"].as_str().unwrap().to_owned();
        self.wait_volume(&id, "available").await;
        id
    }

    /// Adds a server whose disk directory is `dir/<name>`; its id and disk directory.
    pub fn server(&self, dir: &Path, name: &str, zone: &str) -> (String, PathBuf) {
        let disk_dir = dir.join(name);
        let id = self
            .cloud
            .add_server(&ServerSeed {
                name: name.into(),
                availability_zone: zone.into(),
                id: None,
                disk_dir: Some(disk_dir.clone()),
            })
            .unwrap();
        (id, disk_dir)
    }

    /// Attaches through Nova (at 2.60) and waits for `in-use`; the device name.
    pub async fn attach(&self, server: &str, volume: &str) -> String {
        let r = self
            .nova(
                Method::POST,
                &format!("/servers/{server}/os-volume_attachments"),
                "2.60",
                Some(json!({"volumeAttachment": {"volumeId": volume}})),
            )
            .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        self.wait_volume(volume, "in-use").await;
        r.body["volumeAttachment"]["device"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// Detaches through Nova and waits for `want` (`available`, or `in-use` when another
    /// server still has it).
    pub async fn detach(&self, server: &str, volume: &str, want: &str) {
        let r = self
            .nova(
                Method::DELETE,
                &format!("/servers/{server}/os-volume_attachments/{volume}"),
                "2.60",
                None,
            )
            .await;
        assert_eq!(r.status, 202, "{:?}", r.body);
        self.wait_volume(volume, want).await;
    }
}

/// The link a volume gets in a server's disk directory.
pub fn disk_link(disk_dir: &Path, volume: &str) -> PathBuf {
    disk_dir.join(format!("virtio-{}", &volume[..20]))
}

/// The backing file of every loop device on the host (from sysfs).
pub fn loop_backing_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir("/sys/block").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with("loop") {
            continue;
        }
        if let Ok(file) = std::fs::read_to_string(entry.path().join("loop/backing_file")) {
            files.push(PathBuf::from(file.trim().trim_end_matches(" (deleted)")));
        }
    }
    files
}

/// The size in bytes of a block device (`/dev/loopN`), from sysfs.
pub fn block_device_bytes(device: &Path) -> u64 {
    let name = device.file_name().unwrap().to_string_lossy().into_owned();
    let sectors: u64 = std::fs::read_to_string(format!("/sys/block/{name}/size"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    sectors * 512
}
