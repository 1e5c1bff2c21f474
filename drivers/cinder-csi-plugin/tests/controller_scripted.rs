//! The controller over its gRPC socket against a scripted Keystone + Cinder + Nova
//! (`support/mini_cloud.rs`): create (idempotent by name, zone from topology, type, size
//! rounding), publish/unpublish with `DevicePath`, delete, snapshots and restore, expansion,
//! listing, and the cloud's reasons in errors.

mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use cinder_csi_plugin::cloud_config::{Global, Secret};
use cinder_csi_plugin::controller::{Controller, ControllerSettings, TOPOLOGY_ZONE_KEY};
use cinder_csi_plugin::driver::Driver;
use cinder_csi_plugin::identity::identity_service;
use cinder_csi_plugin::openstack::Cloud;
use cinder_csi_plugin::wait::WaitPolicy;
use csi_proto::v1::controller_client::ControllerClient;
use csi_proto::v1::volume_capability::{AccessMode, AccessType, MountVolume, access_mode::Mode};
use csi_proto::v1::{self, VolumeCapability};
use support::mini_cloud::MiniCloud;
use tonic::Code;
use tonic::transport::Channel;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const GIB: i64 = 1 << 30;

struct Harness {
    cloud: MiniCloud,
    client: ControllerClient<Channel>,
    _dir: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Harness {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

async fn start(password: &str) -> Result<Harness, Box<dyn std::error::Error>> {
    let cloud = MiniCloud::start().await;
    let global = Global {
        auth_url: cloud.auth_url(),
        username: Some("csi".into()),
        password: Some(Secret::new(password)),
        project_name: Some("demo".into()),
        domain_name: Some("Default".into()),
        region: Some("RegionOne".into()),
        interface: "public".into(),
        ..Global::default()
    };
    let controller = Controller::new(
        Arc::new(Cloud::new(global)?),
        ControllerSettings {
            cluster: "kube-1".into(),
            with_topology: true,
            ignore_volume_az: false,
            wait: WaitPolicy {
                first: Duration::from_millis(1),
                max: Duration::from_millis(20),
                deadline: Duration::from_secs(10),
            },
        },
    );
    let dir = tempfile::tempdir()?;
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
    Ok(Harness {
        cloud,
        client,
        _dir: dir,
        stop: Some(stop),
    })
}

fn capability(mode: Mode) -> VolumeCapability {
    VolumeCapability {
        access_type: Some(AccessType::Mount(MountVolume::default())),
        access_mode: Some(AccessMode { mode: mode as i32 }),
    }
}

fn create(name: &str, bytes: i64, parameters: &[(&str, &str)]) -> v1::CreateVolumeRequest {
    v1::CreateVolumeRequest {
        name: name.into(),
        capacity_range: Some(v1::CapacityRange {
            required_bytes: bytes,
            limit_bytes: 0,
        }),
        volume_capabilities: vec![capability(Mode::SingleNodeWriter)],
        parameters: parameters
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    }
}

#[tokio::test]
async fn create_publish_unpublish_delete_round_trip() -> TestResult {
    let mut h = start("secret").await?;
    let mut request = create(
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
    let volume = h
        .client
        .create_volume(request.clone())
        .await?
        .into_inner()
        .volume
        .ok_or("no volume")?;
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
        .cloud
        .volume(&volume.volume_id)
        .ok_or("volume not in the cloud")?;
    assert_eq!(stored["status"], "available");
    assert_eq!(stored["volume_type"], "fast");
    assert_eq!(stored["availability_zone"], "zone-b");
    assert_eq!(
        stored["metadata"]["cinder.csi.openstack.org/cluster"],
        "kube-1"
    );
    assert_eq!(stored["metadata"]["csi.storage.k8s.io/pvc/name"], "data");

    // Same name again: the same volume, no second one.
    let again = h
        .client
        .create_volume(request)
        .await?
        .into_inner()
        .volume
        .ok_or("no volume")?;
    assert_eq!(again.volume_id, volume.volume_id);
    assert_eq!(
        h.cloud.state.lock().map(|s| s.created.len()).unwrap_or(0),
        1
    );

    let published = h
        .client
        .controller_publish_volume(v1::ControllerPublishVolumeRequest {
            volume_id: volume.volume_id.clone(),
            node_id: "server-1".into(),
            volume_capability: Some(capability(Mode::SingleNodeWriter)),
            ..Default::default()
        })
        .await?
        .into_inner();
    assert_eq!(
        published
            .publish_context
            .get("DevicePath")
            .map(String::as_str),
        Some("/dev/vdb")
    );
    assert_eq!(
        h.cloud.volume(&volume.volume_id).ok_or("gone")?["status"],
        "in-use"
    );

    // A second node: the volume is not multiattach.
    let refused = h
        .client
        .controller_publish_volume(v1::ControllerPublishVolumeRequest {
            volume_id: volume.volume_id.clone(),
            node_id: "server-2".into(),
            volume_capability: Some(capability(Mode::SingleNodeWriter)),
            ..Default::default()
        })
        .await
        .err()
        .ok_or("a second attachment was allowed")?;
    assert_eq!(refused.code(), Code::FailedPrecondition);
    assert!(
        refused.message().contains("server-1"),
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
    assert_eq!(in_use, Some(Code::FailedPrecondition));

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
        Some(vec!["server-1".to_string()])
    );

    for _ in 0..2 {
        h.client
            .controller_unpublish_volume(v1::ControllerUnpublishVolumeRequest {
                volume_id: volume.volume_id.clone(),
                node_id: "server-1".into(),
                secrets: HashMap::new(),
            })
            .await?;
    }
    assert_eq!(
        h.cloud.volume(&volume.volume_id).ok_or("gone")?["attachments"],
        serde_json::json!([])
    );
    for _ in 0..2 {
        h.client
            .delete_volume(v1::DeleteVolumeRequest {
                volume_id: volume.volume_id.clone(),
                secrets: HashMap::new(),
            })
            .await?;
    }
    assert!(h.cloud.volume(&volume.volume_id).is_none());
    Ok(())
}

#[tokio::test]
async fn quota_refusal_names_the_clouds_reason() -> TestResult {
    let mut h = start("secret").await?;
    let status = h
        .client
        .create_volume(create("big", 20 * GIB, &[]))
        .await
        .err()
        .ok_or("a volume above quota was created")?;
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert!(
        status.message().contains("VolumeSizeExceedsAvailableQuota"),
        "{}",
        status.message()
    );
    Ok(())
}

#[tokio::test]
async fn wrong_password_is_unauthenticated_and_not_printed() -> TestResult {
    let mut h = start("wrong-password-xyz").await?;
    let status = h
        .client
        .create_volume(create("v", GIB, &[]))
        .await
        .err()
        .ok_or("created with a wrong password")?;
    assert_eq!(status.code(), Code::Unauthenticated);
    assert!(
        !status.message().contains("wrong-password-xyz"),
        "{}",
        status.message()
    );
    Ok(())
}

#[tokio::test]
async fn publishing_to_an_unknown_node_is_not_found() -> TestResult {
    let mut h = start("secret").await?;
    let volume = h
        .client
        .create_volume(create("v", GIB, &[]))
        .await?
        .into_inner()
        .volume
        .ok_or("no volume")?;
    let status = h
        .client
        .controller_publish_volume(v1::ControllerPublishVolumeRequest {
            volume_id: volume.volume_id,
            node_id: "no-such-server".into(),
            volume_capability: Some(capability(Mode::SingleNodeWriter)),
            ..Default::default()
        })
        .await
        .err()
        .ok_or("published to a missing server")?;
    assert_eq!(status.code(), Code::NotFound);
    assert!(
        status.message().contains("no-such-server"),
        "{}",
        status.message()
    );
    Ok(())
}

#[tokio::test]
async fn snapshot_restore_expand_and_validate() -> TestResult {
    let mut h = start("secret").await?;
    let volume = h
        .client
        .create_volume(create("src", GIB, &[]))
        .await?
        .into_inner()
        .volume
        .ok_or("no volume")?;
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

    let mut restore = create("restored", GIB, &[]);
    restore.volume_content_source = Some(v1::VolumeContentSource {
        r#type: Some(v1::volume_content_source::Type::Snapshot(
            v1::volume_content_source::SnapshotSource {
                snapshot_id: snapshot.snapshot_id.clone(),
            },
        )),
    });
    let restored = h
        .client
        .create_volume(restore)
        .await?
        .into_inner()
        .volume
        .ok_or("no volume")?;
    assert!(restored.content_source.is_some());
    let stored = h
        .cloud
        .volume(&restored.volume_id)
        .ok_or("restored volume missing")?;
    assert_eq!(stored["snapshot_id"], snapshot.snapshot_id.as_str());

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

    let validated = h
        .client
        .validate_volume_capabilities(v1::ValidateVolumeCapabilitiesRequest {
            volume_id: volume.volume_id.clone(),
            volume_capabilities: vec![capability(Mode::MultiNodeMultiWriter)],
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
        .create_volume({
            let mut r = create("from-missing", GIB, &[]);
            r.volume_content_source = Some(v1::VolumeContentSource {
                r#type: Some(v1::volume_content_source::Type::Snapshot(
                    v1::volume_content_source::SnapshotSource {
                        snapshot_id: snapshot.snapshot_id.clone(),
                    },
                )),
            });
            r
        })
        .await
        .err()
        .map(|s| s.code());
    assert_eq!(missing, Some(Code::NotFound));
    Ok(())
}
