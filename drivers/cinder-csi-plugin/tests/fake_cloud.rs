//! A smoke test against the project's fake cloud (`fakes/`: Keystone, Cinder, Nova whose
//! attachments are real loop devices linked as `virtio-<id[..20]>` in the server's disk
//! directory): CreateVolume → ControllerPublish → NodeStage/NodePublish (the file system is
//! made on the attached device) → a file written → everything undone, volume deleted; and
//! the controller over gRPC: creation details, refusals with the cloud's reasons, idempotent
//! undo, snapshots (and VolumeSnapshotClass parameters), restore, expansion, validation.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use cinder_csi_plugin::cloud_config::{Global, Secret};
use cinder_csi_plugin::controller::{Controller, ControllerSettings, TOPOLOGY_ZONE_KEY};
use cinder_csi_plugin::driver::Driver;
use cinder_csi_plugin::identity::identity_service;
use cinder_csi_plugin::node::{NodeService, NodeSettings, mount};
use cinder_csi_plugin::openstack::Cloud;
use cinder_csi_plugin::wait::{Progress, WaitPolicy};
use csi_proto::v1::controller_client::ControllerClient;
use csi_proto::v1::node_client::NodeClient;
use csi_proto::v1::volume_capability::{AccessMode, AccessType, MountVolume, access_mode::Mode};
use csi_proto::v1::{self, VolumeCapability};
use fakes::{CloudConfig, FakeCloud, FaultAction, FaultRule, Operation, ServerSeed};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Unmounts what a failed test left.
struct Unmount(Vec<std::path::PathBuf>);

impl Drop for Unmount {
    fn drop(&mut self) {
        for path in self.0.iter().rev() {
            if mount::is_mount_point(path).unwrap_or(false) {
                let _ = std::process::Command::new("umount")
                    .arg("-l")
                    .arg(path)
                    .status();
            }
        }
    }
}

fn capability() -> VolumeCapability {
    VolumeCapability {
        access_type: Some(AccessType::Mount(MountVolume::default())),
        access_mode: Some(AccessMode {
            mode: Mode::SingleNodeWriter as i32,
        }),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_publish_stage_write_and_clean_up_on_the_fake_cloud() -> TestResult {
    let mut config = CloudConfig::default();
    config.cinder.present = true;
    let fake = FakeCloud::start(config).await?;
    let dir = tempfile::tempdir()?;
    let disk_dir = dir.path().join("node-1-by-id");
    let server_id = fake.add_server(&ServerSeed {
        name: "node-1".into(),
        availability_zone: "nova".into(),
        id: None,
        disk_dir: Some(disk_dir.clone()),
    })?;
    let account = fake.account();
    let global = Global {
        auth_url: fake.auth_url(),
        username: Some(account.user_name.clone()),
        password: Some(Secret::new(account.password.expose())),
        project_name: Some(account.project_name.clone()),
        domain_name: Some(account.domain_name.clone()),
        interface: "public".into(),
        ..Global::default()
    };
    let wait = WaitPolicy {
        first: Duration::from_millis(20),
        max: Duration::from_millis(200),
        deadline: Duration::from_secs(30),
    };
    let cloud = Arc::new(Cloud::new(global)?);
    let controller = Controller::new(
        cloud.clone(),
        ControllerSettings {
            cluster: "smoke".into(),
            with_topology: true,
            ignore_volume_az: false,
            claims: None,
            wait,
        },
    );
    let node = NodeService::new(NodeSettings {
        node_id: server_id.clone(),
        zone: Some("nova".into()),
        additional_topology: Vec::new(),
        max_volumes_per_node: 256,
        disk_dir,
        rescan_on_resize: false,
    });
    let socket = format!("unix://{}", dir.path().join("csi.sock").display());
    let listener = Driver::bind(&socket).await?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let driver = Driver::from_parts(identity_service(true, true), Some(controller), Some(node));
    let served = tokio::spawn(async move {
        let _ = driver
            .serve(listener, async {
                let _ = stopped.await;
            })
            .await;
    });
    let channel = csi_proto::connect(&socket.parse()?).await?;
    let mut controller = ControllerClient::new(channel.clone());
    let mut node = NodeClient::new(channel);
    let staging = dir.path().join("staging");
    let target = dir.path().join("target");
    let _unmount = Unmount(vec![staging.clone(), target.clone()]);

    let volume = controller
        .create_volume(v1::CreateVolumeRequest {
            name: "pvc-smoke".into(),
            capacity_range: Some(v1::CapacityRange {
                required_bytes: 1 << 30,
                limit_bytes: 0,
            }),
            volume_capabilities: vec![capability()],
            ..Default::default()
        })
        .await?
        .into_inner()
        .volume
        .ok_or("no volume")?;
    // Tokens expire: the next call re-authenticates once and goes on.
    fake.expire_tokens();
    let listed = controller
        .list_volumes(v1::ListVolumesRequest::default())
        .await?
        .into_inner();
    assert_eq!(listed.entries.len(), 1);
    let published = controller
        .controller_publish_volume(v1::ControllerPublishVolumeRequest {
            volume_id: volume.volume_id.clone(),
            node_id: server_id.clone(),
            volume_capability: Some(capability()),
            ..Default::default()
        })
        .await?
        .into_inner();
    let device_path = published
        .publish_context
        .get("DevicePath")
        .cloned()
        .unwrap_or_default();
    assert!(device_path.starts_with("/dev/vd"), "{device_path:?}");

    node.node_stage_volume(v1::NodeStageVolumeRequest {
        volume_id: volume.volume_id.clone(),
        publish_context: published.publish_context.clone(),
        staging_target_path: staging.display().to_string(),
        volume_capability: Some(capability()),
        ..Default::default()
    })
    .await?;
    node.node_publish_volume(v1::NodePublishVolumeRequest {
        volume_id: volume.volume_id.clone(),
        publish_context: published.publish_context,
        staging_target_path: staging.display().to_string(),
        target_path: target.display().to_string(),
        volume_capability: Some(capability()),
        ..Default::default()
    })
    .await?;
    std::fs::write(target.join("hello.txt"), b"on a cinder volume")?;
    assert_eq!(
        std::fs::read(staging.join("hello.txt"))?,
        b"on a cinder volume"
    );

    node.node_unpublish_volume(v1::NodeUnpublishVolumeRequest {
        volume_id: volume.volume_id.clone(),
        target_path: target.display().to_string(),
    })
    .await?;
    node.node_unstage_volume(v1::NodeUnstageVolumeRequest {
        volume_id: volume.volume_id.clone(),
        staging_target_path: staging.display().to_string(),
    })
    .await?;
    controller
        .controller_unpublish_volume(v1::ControllerUnpublishVolumeRequest {
            volume_id: volume.volume_id.clone(),
            node_id: server_id,
            secrets: HashMap::new(),
        })
        .await?;
    controller
        .delete_volume(v1::DeleteVolumeRequest {
            volume_id: volume.volume_id.clone(),
            secrets: HashMap::new(),
        })
        .await?;
    wait.wait("the volume to go", || async {
        Ok(match cloud.volume(&volume.volume_id).await {
            Err(e) if e.is_not_found() => Progress::Done(()),
            Ok(v) => Progress::Pending(v.status),
            Err(e) => return Err(e),
        })
    })
    .await?;
    let _ = stop.send(());
    let _ = served.await;
    Ok(())
}

#[tokio::test]
async fn a_volume_ending_in_error_is_reported_with_cinders_message_and_removed() -> TestResult {
    let mut config = CloudConfig::default();
    config.cinder.present = true;
    let fake = FakeCloud::start(config).await?;
    fake.add_fault(
        FaultRule::new(
            Operation::VolumeCreate,
            FaultAction::Error {
                detail_id: "002".into(),
                message: Some(
                    "schedule allocate volume: Could not find any available weighted backend."
                        .into(),
                ),
            },
        )
        .for_resource("pvc-broken"),
    )?;
    let account = fake.account();
    let cloud = Arc::new(Cloud::new(Global {
        auth_url: fake.auth_url(),
        username: Some(account.user_name.clone()),
        password: Some(Secret::new(account.password.expose())),
        project_name: Some(account.project_name.clone()),
        domain_name: Some(account.domain_name.clone()),
        interface: "public".into(),
        ..Global::default()
    })?);
    let controller = Controller::new(
        cloud.clone(),
        ControllerSettings {
            wait: WaitPolicy {
                first: Duration::from_millis(20),
                max: Duration::from_millis(200),
                deadline: Duration::from_secs(30),
            },
            ..ControllerSettings::default()
        },
    );
    let error = controller
        .create_volume(cinder_csi_plugin::controller::CreateRequest {
            name: "pvc-broken".into(),
            size_gib: 1,
            ..Default::default()
        })
        .await
        .err()
        .ok_or("a volume in error was reported created")?;
    let status = tonic::Status::from(error);
    assert_eq!(status.code(), tonic::Code::Internal);
    assert!(
        status
            .message()
            .contains("Could not find any available weighted backend")
            && status.message().contains("it was deleted"),
        "{}",
        status.message()
    );
    WaitPolicy::default()
        .wait("the broken volume to go", || async {
            let left = cloud.volumes(Some("pvc-broken")).await?;
            Ok(if left.is_empty() {
                Progress::Done(())
            } else {
                Progress::Pending(format!("{} left", left.len()))
            })
        })
        .await?;
    Ok(())
}

#[tokio::test]
async fn deletes_answer_once_the_resource_is_gone() -> TestResult {
    let mut config = CloudConfig::default();
    config.cinder.present = true;
    let fake = FakeCloud::start(config).await?;
    let account = fake.account();
    let cloud = Arc::new(Cloud::new(Global {
        auth_url: fake.auth_url(),
        username: Some(account.user_name.clone()),
        password: Some(Secret::new(account.password.expose())),
        project_name: Some(account.project_name.clone()),
        domain_name: Some(account.domain_name.clone()),
        interface: "public".into(),
        ..Global::default()
    })?);
    let controller = Controller::new(
        cloud.clone(),
        ControllerSettings {
            wait: WaitPolicy {
                first: Duration::from_millis(20),
                max: Duration::from_millis(200),
                deadline: Duration::from_secs(30),
            },
            ..ControllerSettings::default()
        },
    );
    let volume = controller
        .create_volume(cinder_csi_plugin::controller::CreateRequest {
            name: "with-snapshot".into(),
            size_gib: 1,
            ..Default::default()
        })
        .await?;
    let snapshot = controller
        .create_snapshot("snap", &volume.id, &Default::default(), true)
        .await?;
    // While the snapshot exists Cinder refuses: FailedPrecondition with its reason.
    let refused = controller
        .delete_volume(&volume.id)
        .await
        .err()
        .ok_or("a volume with a snapshot was deleted")?;
    assert_eq!(
        tonic::Status::from(refused.clone()).code(),
        tonic::Code::FailedPrecondition
    );
    assert!(refused.to_string().contains("snapshot"), "{refused}");
    // Snapshot delete answers once it is gone, so the volume can go right after, and a
    // listing right after no longer shows it (CSI sanity's order).
    controller.delete_snapshot(&snapshot.id).await?;
    controller.delete_volume(&volume.id).await?;
    assert!(cloud.volumes(None).await?.is_empty());
    assert!(cloud.snapshots(None, None).await?.is_empty());
    Ok(())
}

/// VolumeSnapshotClass parameters over gRPC: `type = backup` refused before Cinder hears of
/// it, a bad `force-create` named, `force-create = false` leaving an attached volume to
/// Cinder's refusal, the default forced, unknown parameters ignored (as upstream does).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_class_parameters_on_the_fake_cloud() -> TestResult {
    let mut config = CloudConfig::default();
    config.cinder.present = true;
    let fake = FakeCloud::start(config).await?;
    let dir = tempfile::tempdir()?;
    let server_id = fake.add_server(&ServerSeed {
        name: "node-1".into(),
        availability_zone: "nova".into(),
        id: None,
        disk_dir: Some(dir.path().join("node-1-by-id")),
    })?;
    let account = fake.account();
    let cloud = Arc::new(Cloud::new(Global {
        auth_url: fake.auth_url(),
        username: Some(account.user_name.clone()),
        password: Some(Secret::new(account.password.expose())),
        project_name: Some(account.project_name.clone()),
        domain_name: Some(account.domain_name.clone()),
        interface: "public".into(),
        ..Global::default()
    })?);
    let controller = Controller::new(
        cloud.clone(),
        ControllerSettings {
            wait: WaitPolicy {
                first: Duration::from_millis(20),
                max: Duration::from_millis(200),
                deadline: Duration::from_secs(30),
            },
            ..ControllerSettings::default()
        },
    );
    let socket = format!("unix://{}", dir.path().join("csi.sock").display());
    let listener = Driver::bind(&socket).await?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let driver = Driver::from_parts(identity_service(true, false), Some(controller), None);
    let served = tokio::spawn(async move {
        let _ = driver
            .serve(listener, async {
                let _ = stopped.await;
            })
            .await;
    });
    let mut controller = ControllerClient::new(csi_proto::connect(&socket.parse()?).await?);
    let volume_id = controller
        .create_volume(v1::CreateVolumeRequest {
            name: "pvc-snap-params".into(),
            volume_capabilities: vec![capability()],
            ..Default::default()
        })
        .await?
        .into_inner()
        .volume
        .ok_or("no volume")?
        .volume_id;
    let snapshot = |pairs: &[(&str, &str)]| v1::CreateSnapshotRequest {
        name: "snap".into(),
        source_volume_id: volume_id.clone(),
        parameters: pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    };

    fake.clear_journal();
    let backup = controller
        .create_snapshot(snapshot(&[("type", "backup")]))
        .await
        .err()
        .ok_or("type = backup was accepted")?;
    assert_eq!(backup.code(), tonic::Code::InvalidArgument);
    assert!(
        backup
            .message()
            .contains("backups are not supported by this driver"),
        "{}",
        backup.message()
    );
    let bad_force = controller
        .create_snapshot(snapshot(&[("force-create", "yes")]))
        .await
        .err()
        .ok_or("force-create = yes was accepted")?;
    assert_eq!(bad_force.code(), tonic::Code::InvalidArgument);
    assert!(
        bad_force.message().contains("force-create"),
        "{}",
        bad_force.message()
    );
    // Refused before any request: not even the name lookup reached the cloud.
    let sent: Vec<_> = fake
        .journal()
        .into_iter()
        .filter(|e| e.path.contains("/snapshots"))
        .map(|e| format!("{} {}", e.method, e.path))
        .collect();
    assert!(sent.is_empty(), "{sent:?}");

    controller
        .controller_publish_volume(v1::ControllerPublishVolumeRequest {
            volume_id: volume_id.clone(),
            node_id: server_id.clone(),
            volume_capability: Some(capability()),
            ..Default::default()
        })
        .await?;
    // Not forced: Cinder refuses to snapshot the in-use volume, and says why.
    let unforced = controller
        .create_snapshot(snapshot(&[("force-create", "false")]))
        .await
        .err()
        .ok_or("an in-use volume was snapshotted without force")?;
    assert!(
        unforced.message().contains("in-use"),
        "{:?}: {}",
        unforced.code(),
        unforced.message()
    );
    assert!(cloud.snapshots(None, None).await?.is_empty());
    // The default forces; unknown parameters are ignored.
    let created = controller
        .create_snapshot(snapshot(&[
            ("incremental", "true"),
            ("csi.storage.k8s.io/volumesnapshot/name", "snap"),
        ]))
        .await?
        .into_inner()
        .snapshot
        .ok_or("no snapshot")?;
    assert!(created.ready_to_use);
    assert_eq!(created.source_volume_id, volume_id);
    // The journal does see snapshot requests, so its silence above meant something.
    assert!(
        fake.journal()
            .iter()
            .any(|e| e.method == "POST" && e.path.ends_with("/snapshots")),
        "no POST /snapshots journalled"
    );

    controller
        .delete_snapshot(v1::DeleteSnapshotRequest {
            snapshot_id: created.snapshot_id,
            secrets: HashMap::new(),
        })
        .await?;
    controller
        .controller_unpublish_volume(v1::ControllerUnpublishVolumeRequest {
            volume_id: volume_id.clone(),
            node_id: server_id,
            secrets: HashMap::new(),
        })
        .await?;
    controller
        .delete_volume(v1::DeleteVolumeRequest {
            volume_id,
            secrets: HashMap::new(),
        })
        .await?;
    let _ = stop.send(());
    let _ = served.await;
    Ok(())
}

// The controller over gRPC against the fake, for what the older scripted mini cloud
// (`controller_scripted.rs`) covered: creation details, attachment refusals, listing,
// idempotent undo, the cloud's reasons, snapshots, restore, expansion and validation.

const GIB: i64 = 1 << 30;

/// A controller-only driver on a unix socket, against a fake cloud with Cinder, zones
/// `zone-a` and `zone-b`, a volume type `fast`, a 10 GiB quota and two servers in `zone-b`.
struct ControllerOnFake {
    fake: FakeCloud,
    client: ControllerClient<tonic::transport::Channel>,
    servers: [String; 2],
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    _dir: tempfile::TempDir,
}

impl Drop for ControllerOnFake {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl ControllerOnFake {
    async fn start(password: Option<&str>) -> Result<Self, Box<dyn std::error::Error>> {
        let mut config = CloudConfig::default();
        config.cinder.present = true;
        config.cinder.availability_zones = vec!["zone-a".into(), "zone-b".into()];
        config
            .cinder
            .volume_types
            .push(fakes::VolumeTypeSeed::named("fast"));
        config.cinder.quotas.gigabytes = 10;
        let fake = FakeCloud::start(config).await?;
        let dir = tempfile::tempdir()?;
        let mut servers = Vec::new();
        for name in ["node-1", "node-2"] {
            servers.push(fake.add_server(&ServerSeed {
                name: name.into(),
                availability_zone: "zone-b".into(),
                id: None,
                disk_dir: Some(dir.path().join(format!("{name}-by-id"))),
            })?);
        }
        let account = fake.account();
        let controller = Controller::new(
            Arc::new(Cloud::new(Global {
                auth_url: fake.auth_url(),
                username: Some(account.user_name.clone()),
                password: Some(Secret::new(password.unwrap_or(account.password.expose()))),
                project_name: Some(account.project_name.clone()),
                domain_name: Some(account.domain_name.clone()),
                interface: "public".into(),
                ..Global::default()
            })?),
            ControllerSettings {
                cluster: "kube-1".into(),
                with_topology: true,
                ignore_volume_az: false,
                claims: None,
                wait: WaitPolicy {
                    first: Duration::from_millis(20),
                    max: Duration::from_millis(200),
                    deadline: Duration::from_secs(30),
                },
            },
        );
        let socket = format!("unix://{}", dir.path().join("csi.sock").display());
        let listener = Driver::bind(&socket).await?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let driver = Driver::from_parts(identity_service(true, true), Some(controller), None);
        tokio::spawn(async move {
            let _ = driver
                .serve(listener, async {
                    let _ = stopped.await;
                })
                .await;
        });
        let client = ControllerClient::new(csi_proto::connect(&socket.parse()?).await?);
        let [first, second]: [String; 2] =
            servers.try_into().map_err(|_| "two servers were added")?;
        Ok(ControllerOnFake {
            fake,
            client,
            servers: [first, second],
            stop: Some(stop),
            _dir: dir,
        })
    }

    async fn create(
        &mut self,
        request: v1::CreateVolumeRequest,
    ) -> Result<v1::Volume, Box<dyn std::error::Error>> {
        Ok(self
            .client
            .create_volume(request)
            .await?
            .into_inner()
            .volume
            .ok_or("no volume")?)
    }

    fn publish(&self, volume_id: &str, server: &str) -> v1::ControllerPublishVolumeRequest {
        v1::ControllerPublishVolumeRequest {
            volume_id: volume_id.into(),
            node_id: server.into(),
            volume_capability: Some(capability()),
            ..Default::default()
        }
    }
}

fn create_request(name: &str, bytes: i64, parameters: &[(&str, &str)]) -> v1::CreateVolumeRequest {
    v1::CreateVolumeRequest {
        name: name.into(),
        capacity_range: Some(v1::CapacityRange {
            required_bytes: bytes,
            limit_bytes: 0,
        }),
        volume_capabilities: vec![capability()],
        parameters: parameters
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    }
}

fn from_snapshot(name: &str, snapshot_id: &str) -> v1::CreateVolumeRequest {
    let mut request = create_request(name, GIB, &[]);
    request.volume_content_source = Some(v1::VolumeContentSource {
        r#type: Some(v1::volume_content_source::Type::Snapshot(
            v1::volume_content_source::SnapshotSource {
                snapshot_id: snapshot_id.into(),
            },
        )),
    });
    request
}

/// Size rounding, type, fsType, topology zone, metadata, idempotent create; publish with
/// `DevicePath`, a second server refused naming the first, an attached volume not deleted,
/// listing with published nodes, unpublish and delete each twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_create_publish_refusals_and_idempotent_undo_on_the_fake() -> TestResult {
    let mut h = ControllerOnFake::start(None).await?;
    let [server_1, server_2] = h.servers.clone();
    let mut request = create_request(
        "pvc-1",
        GIB + GIB / 2,
        &[
            ("type", "fast"),
            ("fsType", "xfs"),
            ("csi.storage.k8s.io/pvc/name", "data"),
        ],
    );
    request.accessibility_requirements = Some(v1::TopologyRequirement {
        requisite: Vec::new(),
        preferred: vec![v1::Topology {
            segments: HashMap::from([(TOPOLOGY_ZONE_KEY.to_string(), "zone-b".to_string())]),
        }],
    });
    let volume = h.create(request.clone()).await?;
    assert_eq!(volume.capacity_bytes, 2 * GIB, "1.5 GiB rounds up to 2");
    assert_eq!(
        volume.volume_context.get("fsType").map(String::as_str),
        Some("xfs")
    );
    assert_eq!(
        volume.accessible_topology[0]
            .segments
            .get(TOPOLOGY_ZONE_KEY)
            .map(String::as_str),
        Some("zone-b")
    );
    let stored = h
        .fake
        .block_volume(&volume.volume_id)
        .ok_or("volume not in the cloud")?;
    assert_eq!(stored.status, "available");
    assert_eq!(stored.volume_type, "fast");
    assert_eq!(stored.availability_zone, "zone-b");
    assert_eq!(
        stored
            .metadata
            .get("cinder.csi.openstack.org/cluster")
            .map(String::as_str),
        Some("kube-1")
    );
    assert_eq!(
        stored
            .metadata
            .get("csi.storage.k8s.io/pvc/name")
            .map(String::as_str),
        Some("data")
    );
    // Same name again: the same volume, no second one.
    let again = h.create(request).await?;
    assert_eq!(again.volume_id, volume.volume_id);
    assert_eq!(h.fake.block_leftovers().volumes.len(), 1);

    let published = h
        .client
        .controller_publish_volume(h.publish(&volume.volume_id, &server_1))
        .await?
        .into_inner();
    let device = published
        .publish_context
        .get("DevicePath")
        .cloned()
        .unwrap_or_default();
    assert!(device.starts_with("/dev/vd"), "{device:?}");
    let stored = h.fake.block_volume(&volume.volume_id).ok_or("gone")?;
    assert_eq!(stored.status, "in-use");
    assert_eq!(stored.attached_to, vec![server_1.clone()]);
    // A second server: the volume is not multiattach.
    let refused = h
        .client
        .controller_publish_volume(h.publish(&volume.volume_id, &server_2))
        .await
        .err()
        .ok_or("a second attachment was allowed")?;
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition);
    assert!(
        refused.message().contains(&server_1),
        "{}",
        refused.message()
    );
    // Deleting an attached volume is refused.
    let in_use = h
        .client
        .delete_volume(v1::DeleteVolumeRequest {
            volume_id: volume.volume_id.clone(),
            secrets: HashMap::new(),
        })
        .await
        .err()
        .map(|s| s.code());
    assert_eq!(in_use, Some(tonic::Code::FailedPrecondition));
    let listed = h
        .client
        .list_volumes(v1::ListVolumesRequest::default())
        .await?
        .into_inner();
    assert_eq!(listed.entries.len(), 1);
    assert_eq!(
        listed.entries[0]
            .status
            .as_ref()
            .map(|s| s.published_node_ids.clone()),
        Some(vec![server_1.clone()])
    );
    for _ in 0..2 {
        h.client
            .controller_unpublish_volume(v1::ControllerUnpublishVolumeRequest {
                volume_id: volume.volume_id.clone(),
                node_id: server_1.clone(),
                secrets: HashMap::new(),
            })
            .await?;
    }
    let stored = h.fake.block_volume(&volume.volume_id).ok_or("gone")?;
    assert!(stored.attached_to.is_empty(), "{:?}", stored.attached_to);
    for _ in 0..2 {
        h.client
            .delete_volume(v1::DeleteVolumeRequest {
                volume_id: volume.volume_id.clone(),
                secrets: HashMap::new(),
            })
            .await?;
    }
    assert!(h.fake.block_volume(&volume.volume_id).is_none());
    Ok(())
}

/// The cloud's reasons: a quota refusal, a missing server, a wrong password (never printed).
#[tokio::test]
async fn controller_reports_the_clouds_refusals_on_the_fake() -> TestResult {
    let mut h = ControllerOnFake::start(None).await?;
    let quota = h
        .client
        .create_volume(create_request("big", 20 * GIB, &[]))
        .await
        .err()
        .ok_or("a volume above quota was created")?;
    assert_eq!(quota.code(), tonic::Code::ResourceExhausted);
    assert!(
        quota.message().contains("VolumeSizeExceedsAvailableQuota"),
        "{}",
        quota.message()
    );
    let volume = h.create(create_request("v", GIB, &[])).await?;
    let missing = h
        .client
        .controller_publish_volume(h.publish(&volume.volume_id, "no-such-server"))
        .await
        .err()
        .ok_or("published to a missing server")?;
    assert_eq!(missing.code(), tonic::Code::NotFound);
    assert!(
        missing.message().contains("no-such-server"),
        "{}",
        missing.message()
    );

    let mut wrong = ControllerOnFake::start(Some("wrong-password-xyz")).await?;
    let denied = wrong
        .client
        .create_volume(create_request("v", GIB, &[]))
        .await
        .err()
        .ok_or("created with a wrong password")?;
    assert_eq!(denied.code(), tonic::Code::Unauthenticated);
    assert!(
        !denied.message().contains("wrong-password-xyz"),
        "{}",
        denied.message()
    );
    Ok(())
}

/// Snapshot (size, creation time, listing by source), restore, expansion, validation of a
/// multi-node mode on a volume that is not multiattach, snapshot deletion twice, and a
/// restore from the deleted snapshot NotFound.
#[tokio::test]
async fn controller_snapshot_restore_expand_and_validate_on_the_fake() -> TestResult {
    let mut h = ControllerOnFake::start(None).await?;
    let volume = h.create(create_request("src", GIB, &[])).await?;
    let snapshot = h
        .client
        .create_snapshot(v1::CreateSnapshotRequest {
            source_volume_id: volume.volume_id.clone(),
            name: "snap-1".into(),
            ..Default::default()
        })
        .await?
        .into_inner()
        .snapshot
        .ok_or("no snapshot")?;
    assert!(snapshot.ready_to_use);
    assert_eq!(snapshot.size_bytes, GIB);
    assert!(snapshot.creation_time.is_some());
    let listed = h
        .client
        .list_snapshots(v1::ListSnapshotsRequest {
            source_volume_id: volume.volume_id.clone(),
            ..Default::default()
        })
        .await?
        .into_inner();
    assert_eq!(listed.entries.len(), 1);
    let restored = h
        .create(from_snapshot("restored", &snapshot.snapshot_id))
        .await?;
    assert!(restored.content_source.is_some());
    let stored = h
        .fake
        .block_volume(&restored.volume_id)
        .ok_or("restored volume missing")?;
    assert_eq!(
        stored.snapshot_id.as_deref(),
        Some(snapshot.snapshot_id.as_str())
    );
    let expanded = h
        .client
        .controller_expand_volume(v1::ControllerExpandVolumeRequest {
            volume_id: volume.volume_id.clone(),
            capacity_range: Some(v1::CapacityRange {
                required_bytes: 3 * GIB,
                limit_bytes: 0,
            }),
            ..Default::default()
        })
        .await?
        .into_inner();
    assert_eq!(expanded.capacity_bytes, 3 * GIB);
    assert!(expanded.node_expansion_required);
    assert_eq!(
        h.fake.block_volume(&volume.volume_id).map(|v| v.size),
        Some(3)
    );
    let validated = h
        .client
        .validate_volume_capabilities(v1::ValidateVolumeCapabilitiesRequest {
            volume_id: volume.volume_id.clone(),
            volume_capabilities: vec![VolumeCapability {
                access_mode: Some(AccessMode {
                    mode: Mode::MultiNodeMultiWriter as i32,
                }),
                ..capability()
            }],
            ..Default::default()
        })
        .await?
        .into_inner();
    assert!(validated.confirmed.is_none());
    assert!(
        validated.message.contains("multiattach"),
        "{}",
        validated.message
    );
    for _ in 0..2 {
        h.client
            .delete_snapshot(v1::DeleteSnapshotRequest {
                snapshot_id: snapshot.snapshot_id.clone(),
                secrets: HashMap::new(),
            })
            .await?;
    }
    let missing = h
        .client
        .create_volume(from_snapshot("from-missing", &snapshot.snapshot_id))
        .await
        .err()
        .map(|s| s.code());
    assert_eq!(missing, Some(tonic::Code::NotFound));
    Ok(())
}
