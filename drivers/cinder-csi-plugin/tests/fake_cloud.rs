//! A smoke test against the project's fake cloud (`fakes/`: Keystone, Cinder, Nova whose
//! attachments are real loop devices linked as `virtio-<id[..20]>` in the server's disk
//! directory): CreateVolume → ControllerPublish → NodeStage/NodePublish (the file system is
//! made on the attached device) → a file written → everything undone, volume deleted; and
//! the controller over gRPC: creation details, refusals with the cloud's reasons, idempotent
//! undo, snapshots (and VolumeSnapshotClass parameters), restore, expansion, validation.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use cinder_csi_plugin::cloud::connect;
use cinder_csi_plugin::controller::{Controller, ControllerSettings};
use cinder_csi_plugin::driver::Driver;
use cinder_csi_plugin::identity::identity_service;
use cinder_csi_plugin::node::{NodeService, NodeSettings, mount};
use cinder_csi_plugin::wait::{Progress, WaitPolicy};
use common::{TestResult, capability, fake_global, quick_wait};
use csi_proto::v1::controller_client::ControllerClient;
use csi_proto::v1::node_client::NodeClient;
use csi_proto::v1::{self};
use fakes::{CloudConfig, FakeCloud, FaultAction, FaultRule, Operation, ServerSeed};

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
    let wait = quick_wait();
    let cloud = Arc::new(connect(fake_global(&fake, None))?);
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
    let driver = Driver::new(identity_service(true, true), Some(controller), Some(node));
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
            Err(e) => return Err(e.into()),
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
    let cloud = Arc::new(connect(fake_global(&fake, None))?);
    let controller = Controller::new(
        cloud.clone(),
        ControllerSettings {
            wait: quick_wait(),
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
    let cloud = Arc::new(connect(fake_global(&fake, None))?);
    let controller = Controller::new(
        cloud.clone(),
        ControllerSettings {
            wait: quick_wait(),
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
    let cloud = Arc::new(connect(fake_global(&fake, None))?);
    let controller = Controller::new(
        cloud.clone(),
        ControllerSettings {
            wait: quick_wait(),
            ..ControllerSettings::default()
        },
    );
    let socket = format!("unix://{}", dir.path().join("csi.sock").display());
    let listener = Driver::bind(&socket).await?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let driver = Driver::new(identity_service(true, false), Some(controller), None);
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
