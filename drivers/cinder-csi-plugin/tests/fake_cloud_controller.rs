//! The controller over gRPC against the fake cloud, for what the older scripted mini cloud
//! (`controller_scripted.rs`) covered: creation details, attachment refusals, listing,
//! idempotent undo, the cloud's reasons, snapshots, restore, expansion and validation.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use cinder_csi_plugin::cloud::connect;
use cinder_csi_plugin::controller::{Controller, ControllerSettings, TOPOLOGY_ZONE_KEY};
use cinder_csi_plugin::driver::Driver;
use cinder_csi_plugin::identity::identity_service;
use common::{TestResult, capability, fake_global, quick_wait};
use csi_proto::v1::controller_client::ControllerClient;
use csi_proto::v1::volume_capability::{AccessMode, access_mode::Mode};
use csi_proto::v1::{self, VolumeCapability};
use fakes::{CloudConfig, FakeCloud, ServerSeed};

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
        let _account = fake.account();
        let controller = Controller::new(
            Arc::new(connect(fake_global(&fake, password))?),
            ControllerSettings {
                cluster: "kube-1".into(),
                with_topology: true,
                ignore_volume_az: false,
                claims: None,
                wait: quick_wait(),
            },
        );
        let socket = format!("unix://{}", dir.path().join("csi.sock").display());
        let listener = Driver::bind(&socket).await?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let driver = Driver::new(identity_service(true, true), Some(controller), None);
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
