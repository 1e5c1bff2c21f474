//! The provisioner's test bed: a real control plane, the fake cloud, the real
//! `manila-csi-plugin` (controller only) on a unix socket, and provisioners in-process.
//!
//! The driver binary comes from `harness::workspace::binary` (built when missing or stale).
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use csi_provisioner::{Config, Provisioner};
use fakes::{CloudConfig, FakeCloud, SecretKind};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Event, Namespace, PersistentVolumeClaim, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Client;
use kube::api::{Api, ListParams, ObjectMeta, PostParams};

pub const DRIVER: &str = "manila.csi.openstack.org";

/// Polls `check` until it yields a value; panics after `timeout` with what was last seen.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, String>>,
{
    let start = Instant::now();
    let mut pause = Duration::from_millis(20);
    loop {
        let last_seen = match check().await {
            Ok(Some(value)) => return value,
            Ok(None) => "not yet".to_string(),
            Err(e) => e,
        };
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}; last seen: {last_seen}"
        );
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(250));
    }
}

/// The `manila-csi-plugin` binary, built if missing or stale.
pub fn manila_binary() -> PathBuf {
    harness::workspace::binary("manila-csi-plugin", "manila-csi-plugin").unwrap()
}

/// The driver process (controller only, with topology); killed on drop.
pub struct ManilaDriver {
    child: Child,
    pub socket: PathBuf,
    log: PathBuf,
}

impl ManilaDriver {
    pub fn start(dir: &Path, driver_name: &str) -> ManilaDriver {
        let socket = dir.join(format!("{driver_name}.sock"));
        let log = dir.join(format!("{driver_name}.log"));
        let child = Command::new(manila_binary())
            .arg(format!("--endpoint=unix://{}", socket.display()))
            .arg(format!("--drivername={driver_name}"))
            .args([
                "--share-protocol-selector=NFS",
                "--provide-node-service=false",
                "--with-topology",
            ])
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        ManilaDriver { child, socket, log }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for ManilaDriver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A provisioner for the driver at `socket` (it waits for the driver's Probe itself).
pub async fn provisioner(client: Client, socket: &Path, extra: &[&str]) -> Provisioner {
    let mut args = vec![
        "csi-provisioner".to_string(),
        format!("--csi-address={}", socket.display()),
        "--timeout=60s".into(),
        "--retry-interval-start=100ms".into(),
        "--retry-interval-max=2s".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let config = <Config as clap::Parser>::try_parse_from(args).unwrap();
    Provisioner::new(config, client).await.unwrap()
}

/// A running provisioner; stopped by [`Running::stop`] (or aborted on drop).
pub struct Running {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<sidecar_common::Result<()>>>,
}

impl Running {
    pub fn spawn(provisioner: Provisioner) -> Running {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(provisioner.run(async {
            let _ = stopped.await;
        }));
        Running {
            stop: Some(stop),
            task: Some(task),
        }
    }

    pub async fn stop(mut self) -> sidecar_common::Result<()> {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(Duration::from_secs(30), self.task.take().unwrap())
            .await
            .expect("the provisioner stops within 30 s")
            .unwrap()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// The fake cloud with two zones.
pub async fn fake_cloud() -> FakeCloud {
    let mut config = CloudConfig::default();
    config.manila.availability_zones = vec!["nova".into(), "zone-b".into()];
    FakeCloud::start(config).await.unwrap()
}

pub async fn namespace(client: &Client, name: &str) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

/// A Secret holding the fake cloud's `os-*` credentials.
pub async fn credentials_secret(client: &Client, cloud: &FakeCloud, namespace: &str, name: &str) {
    let data: BTreeMap<String, ByteString> = cloud
        .secret(SecretKind::Password)
        .into_iter()
        .map(|(k, v)| (k, ByteString(v.into_bytes())))
        .collect();
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            ..Default::default()
        },
        data: Some(data),
        ..Default::default()
    };
    Api::<Secret>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
}

/// A StorageClass for `provisioner` with `parameters`.
pub async fn storage_class(
    client: &Client,
    name: &str,
    provisioner: &str,
    parameters: &[(&str, &str)],
    binding_mode: &str,
) -> StorageClass {
    let class = StorageClass {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        provisioner: provisioner.into(),
        parameters: Some(
            parameters
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        reclaim_policy: Some("Delete".into()),
        volume_binding_mode: Some(binding_mode.into()),
        mount_options: Some(vec!["nfsvers=4.1".into()]),
        ..Default::default()
    };
    Api::<StorageClass>::all(client.clone())
        .create(&PostParams::default(), &class)
        .await
        .unwrap()
}

/// The secret parameters pointing at `name` in `namespace` for every operation.
pub fn secret_parameters<'a>(name: &'a str, namespace: &'a str) -> Vec<(&'static str, &'a str)> {
    vec![
        ("csi.storage.k8s.io/provisioner-secret-name", name),
        ("csi.storage.k8s.io/provisioner-secret-namespace", namespace),
        ("csi.storage.k8s.io/node-stage-secret-name", name),
        ("csi.storage.k8s.io/node-stage-secret-namespace", namespace),
        ("csi.storage.k8s.io/node-publish-secret-name", name),
        (
            "csi.storage.k8s.io/node-publish-secret-namespace",
            namespace,
        ),
        ("csi.storage.k8s.io/controller-expand-secret-name", name),
        (
            "csi.storage.k8s.io/controller-expand-secret-namespace",
            namespace,
        ),
    ]
}

/// Creates an RWX claim of `size` in `class`.
pub async fn claim(
    client: &Client,
    namespace: &str,
    name: &str,
    class: &str,
    size: &str,
    annotations: &[(&str, &str)],
) -> PersistentVolumeClaim {
    let claim: PersistentVolumeClaim = serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
        },
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": class,
            "resources": { "requests": { "storage": size } },
        }
    }))
    .unwrap();
    Api::<PersistentVolumeClaim>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &claim)
        .await
        .unwrap()
}

/// Waits for the claim to be Bound and returns it.
pub async fn bound(
    client: &Client,
    namespace: &str,
    name: &str,
    timeout: Duration,
) -> PersistentVolumeClaim {
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), namespace);
    wait_for(
        &format!("claim {namespace}/{name} Bound"),
        timeout,
        || async {
            let claim = claims.get(name).await.map_err(|e| e.to_string())?;
            let phase = claim.status.as_ref().and_then(|s| s.phase.clone());
            if phase.as_deref() == Some("Bound") {
                Ok(Some(claim))
            } else {
                Err(format!(
                    "phase {phase:?}, annotations {:?}",
                    claim.metadata.annotations
                ))
            }
        },
    )
    .await
}

/// Events about the object `name` in `namespace` as `reason: message` lines.
pub async fn events(client: &Client, namespace: &str, name: &str) -> Vec<(String, String, String)> {
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    events
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|e| {
            (
                e.type_.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.message.unwrap_or_default(),
            )
        })
        .collect()
}
