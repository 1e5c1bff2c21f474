//! The snapshotter's test bed: the fake cloud, the real `manila-csi-plugin` (controller only)
//! on a unix socket, a CSI client to make shares and snapshots behind the sidecars' backs,
//! and Kubernetes object builders.
//!
//! The driver binary comes from `harness::workspace::binary` (built when missing or stale).
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use csi_proto::v1::controller_client::ControllerClient;
use csi_proto::v1::volume_capability::{AccessMode, AccessType, MountVolume, access_mode};
use csi_proto::v1::{
    CapacityRange, CreateSnapshotRequest, CreateVolumeRequest, DeleteSnapshotRequest,
    DeleteVolumeRequest, VolumeCapability,
};
use fakes::{CloudConfig, FakeCloud, SecretKind};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Event, Namespace, Secret};
use kube::Client;
use kube::api::{Api, ListParams, ObjectMeta, PostParams};
use tonic::transport::Channel;

pub const DRIVER: &str = "manila.csi.openstack.org";

/// The `manila-csi-plugin` binary, built if missing or stale.
pub fn manila_binary() -> PathBuf {
    harness::workspace::binary("manila-csi-plugin", "manila-csi-plugin").unwrap()
}

/// The driver process (controller only); killed on drop.
pub struct ManilaDriver {
    child: Child,
    pub socket: PathBuf,
    log: PathBuf,
}

impl ManilaDriver {
    pub fn start(dir: &Path) -> ManilaDriver {
        let socket = dir.join("manila.sock");
        let log = dir.join("manila.log");
        let child = Command::new(manila_binary())
            .arg(format!("--endpoint=unix://{}", socket.display()))
            .arg(format!("--drivername={DRIVER}"))
            .args([
                "--share-protocol-selector=NFS",
                "--provide-node-service=false",
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

    /// A controller client (connects on first use).
    pub fn controller(&self) -> ControllerClient<Channel> {
        let endpoint = csi_proto::Endpoint::parse(&self.socket.display().to_string()).unwrap();
        ControllerClient::new(csi_proto::connect_lazy(&endpoint).unwrap())
    }
}

impl Drop for ManilaDriver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The fake cloud's `os-*` credentials as a CSI secrets map.
pub fn cloud_secrets(cloud: &FakeCloud) -> HashMap<String, String> {
    cloud.secret(SecretKind::Password).into_iter().collect()
}

/// A 1 GiB NFS share made through the driver's CreateVolume; returns its id.
pub async fn create_share(driver: &ManilaDriver, cloud: &FakeCloud, name: &str) -> String {
    let capability = VolumeCapability {
        access_type: Some(AccessType::Mount(MountVolume::default())),
        access_mode: Some(AccessMode {
            mode: access_mode::Mode::MultiNodeMultiWriter as i32,
        }),
    };
    let answer = driver
        .controller()
        .create_volume(CreateVolumeRequest {
            name: name.into(),
            capacity_range: Some(CapacityRange {
                required_bytes: 1 << 30,
                limit_bytes: 0,
            }),
            volume_capabilities: vec![capability],
            secrets: cloud_secrets(cloud),
            ..Default::default()
        })
        .await
        .unwrap_or_else(|e| panic!("CreateVolume {name}: {e}\n{}", driver.log()));
    answer.into_inner().volume.unwrap().volume_id
}

pub async fn delete_share(driver: &ManilaDriver, cloud: &FakeCloud, id: &str) {
    driver
        .controller()
        .delete_volume(DeleteVolumeRequest {
            volume_id: id.into(),
            secrets: cloud_secrets(cloud),
        })
        .await
        .unwrap();
}

/// CreateSnapshot as the test (not the sidecar) calls it; returns (id, ready).
pub async fn create_snapshot(
    driver: &ManilaDriver,
    cloud: &FakeCloud,
    name: &str,
    share: &str,
) -> (String, bool) {
    let snapshot = driver
        .controller()
        .create_snapshot(CreateSnapshotRequest {
            source_volume_id: share.into(),
            name: name.into(),
            secrets: cloud_secrets(cloud),
            parameters: HashMap::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .snapshot
        .unwrap();
    (snapshot.snapshot_id, snapshot.ready_to_use)
}

pub async fn delete_snapshot(driver: &ManilaDriver, cloud: &FakeCloud, id: &str) {
    driver
        .controller()
        .delete_snapshot(DeleteSnapshotRequest {
            snapshot_id: id.into(),
            secrets: cloud_secrets(cloud),
        })
        .await
        .unwrap();
}

/// The Manila snapshots the fake still holds, as (id, name, status).
pub fn manila_snapshots(cloud: &FakeCloud) -> Vec<(String, Option<String>, String)> {
    cloud
        .leftovers()
        .snapshots
        .into_iter()
        .map(|s| (s.id, s.name, s.status))
        .collect()
}

pub async fn start_cloud() -> FakeCloud {
    FakeCloud::start(CloudConfig::default()).await.unwrap()
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

/// Events about the object `name` in `namespace` as (type, reason, message).
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
