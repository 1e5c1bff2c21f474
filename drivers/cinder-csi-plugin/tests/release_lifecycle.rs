//! The controller over gRPC against the fake cloud emulating each OpenStack release (one
//! test per release, so a failure names it): create, ControllerPublish (Nova attach of a
//! real loop device), in-use expand (Cinder ≥ 3.42), ControllerUnpublish, snapshot, and the
//! deletes, with nothing left in the cloud.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use cinder_csi_plugin::cloud::connect;
use cinder_csi_plugin::controller::{Controller, ControllerSettings};
use cinder_csi_plugin::driver::Driver;
use cinder_csi_plugin::identity::identity_service;
use common::{TestResult, capability, fake_global, quick_wait};
use csi_proto::v1;
use csi_proto::v1::controller_client::ControllerClient;
use fakes::{CloudConfig, FakeCloud, OpenStackRelease, ServerSeed, Service};
use rstest::rstest;

const GIB: i64 = 1 << 30;

#[rstest]
#[case::r2025_1(OpenStackRelease::V2025_1)]
#[case::r2025_2(OpenStackRelease::V2025_2)]
#[case::r2026_1(OpenStackRelease::V2026_1)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_serves_a_volumes_life_on_every_release(
    #[case] release: OpenStackRelease,
) -> TestResult {
    let mut config = CloudConfig {
        release,
        ..CloudConfig::default()
    };
    config.cinder.present = true;
    let fake = FakeCloud::start(config).await?;
    assert_eq!(fake.release(), release);
    let dir = tempfile::tempdir()?;
    let server = fake.add_server(&ServerSeed {
        name: "node-1".into(),
        availability_zone: "nova".into(),
        id: None,
        disk_dir: Some(dir.path().join("node-1-by-id")),
    })?;
    let controller = Controller::new(
        Arc::new(connect(fake_global(&fake, None))?),
        ControllerSettings {
            cluster: "kube-1".into(),
            with_topology: false,
            ignore_volume_az: false,
            claims: None,
            wait: quick_wait(),
        },
    );
    let socket = format!("unix://{}", dir.path().join("csi.sock").display());
    let listener = Driver::bind(&socket).await?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let driver = Driver::new(identity_service(true, true), Some(controller), None);
    let served = tokio::spawn(async move {
        driver
            .serve(listener, async {
                let _ = stopped.await;
            })
            .await
    });
    let mut client = ControllerClient::new(csi_proto::connect(&socket.parse()?).await?);

    let volume = client
        .create_volume(v1::CreateVolumeRequest {
            name: format!("pvc-{release}"),
            capacity_range: Some(v1::CapacityRange {
                required_bytes: GIB,
                limit_bytes: 0,
            }),
            volume_capabilities: vec![capability()],
            ..Default::default()
        })
        .await?
        .into_inner()
        .volume
        .ok_or("no volume")?;
    let id = volume.volume_id.clone();

    let published = client
        .controller_publish_volume(v1::ControllerPublishVolumeRequest {
            volume_id: id.clone(),
            node_id: server.clone(),
            volume_capability: Some(capability()),
            ..Default::default()
        })
        .await?
        .into_inner();
    let device = published
        .publish_context
        .get("DevicePath")
        .cloned()
        .unwrap_or_default();
    assert_eq!(device, "/dev/vdb", "{release}: {published:?}");
    let attached = fake.block_volume(&id).ok_or("volume gone")?;
    assert_eq!(attached.status, "in-use");
    assert_eq!(attached.attached_to, vec![server.clone()]);

    let expanded = client
        .controller_expand_volume(v1::ControllerExpandVolumeRequest {
            volume_id: id.clone(),
            capacity_range: Some(v1::CapacityRange {
                required_bytes: 2 * GIB,
                limit_bytes: 0,
            }),
            volume_capability: Some(capability()),
            ..Default::default()
        })
        .await?
        .into_inner();
    assert_eq!(expanded.capacity_bytes, 2 * GIB);
    let grown = fake.block_volume(&id).ok_or("volume gone")?;
    assert_eq!((grown.size, grown.status.as_str()), (2, "in-use"));
    // The in-use extend went at a microversion that allows it, which the release serves.
    let extend = fake
        .journal()
        .into_iter()
        .find(|e| e.service == Service::Cinder && e.path.ends_with(&format!("{id}/action")))
        .ok_or("no extend in the journal")?;
    assert_eq!(extend.status, 202, "{extend:?}");
    let asked = extend.microversion.clone().unwrap_or_default();
    let minor: u32 = asked
        .strip_prefix("volume 3.")
        .and_then(|m| m.parse().ok())
        .ok_or_else(|| format!("extend asked {asked:?}"))?;
    assert!(minor >= 42, "{asked}");

    client
        .controller_unpublish_volume(v1::ControllerUnpublishVolumeRequest {
            volume_id: id.clone(),
            node_id: server.clone(),
            secrets: HashMap::new(),
        })
        .await?;
    let detached = fake.block_volume(&id).ok_or("volume gone")?;
    assert!(detached.attached_to.is_empty(), "{detached:?}");

    let snapshot = client
        .create_snapshot(v1::CreateSnapshotRequest {
            source_volume_id: id.clone(),
            name: format!("snap-{release}"),
            ..Default::default()
        })
        .await?
        .into_inner()
        .snapshot
        .ok_or("no snapshot")?;
    assert!(snapshot.ready_to_use);
    assert_eq!(snapshot.size_bytes, 2 * GIB);
    client
        .delete_snapshot(v1::DeleteSnapshotRequest {
            snapshot_id: snapshot.snapshot_id.clone(),
            secrets: HashMap::new(),
        })
        .await?;
    client
        .delete_volume(v1::DeleteVolumeRequest {
            volume_id: id.clone(),
            secrets: HashMap::new(),
        })
        .await?;
    let leftovers = fake.block_leftovers();
    assert!(leftovers.is_empty(), "{release}: {leftovers:?}");
    drop(client);
    let _ = stop.send(());
    served.await??;
    Ok(())
}
