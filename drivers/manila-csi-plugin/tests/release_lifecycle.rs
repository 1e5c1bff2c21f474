//! The controller over gRPC against the fake cloud emulating each OpenStack release (one
//! test per release, so a failure names it): create (the share and its access rule),
//! expand, snapshot, and the deletes, with nothing left in the cloud.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use csi_proto::v1;
use fakes::{CloudConfig, OpenStackRelease, Service};
use rstest::rstest;
use support::{ControllerEnv, GIB, share_json, snapshot_until_ready};

#[rstest]
#[case::r2025_1(OpenStackRelease::V2025_1)]
#[case::r2025_2(OpenStackRelease::V2025_2)]
#[case::r2026_1(OpenStackRelease::V2026_1)]
#[tokio::test]
async fn the_controller_serves_a_shares_life_on_every_release(#[case] release: OpenStackRelease) {
    let config = CloudConfig {
        release,
        ..CloudConfig::default()
    };
    let mut env = ControllerEnv::with_cloud(config, &[]).await;
    assert_eq!(env.cloud.release(), release);

    let volume = env.create(&format!("pvc-{release}"), GIB).await.unwrap();
    let leftovers = env.cloud.leftovers();
    assert_eq!(leftovers.shares.len(), 1, "{release}: {leftovers:?}");
    assert_eq!(
        leftovers.access_rules.len(),
        1,
        "{release}: the share's access rule: {leftovers:?}"
    );
    assert_eq!(leftovers.access_rules[0].status, "active", "{leftovers:?}");

    let expanded = env
        .client
        .controller_expand_volume(v1::ControllerExpandVolumeRequest {
            volume_id: volume.volume_id.clone(),
            capacity_range: Some(v1::CapacityRange {
                required_bytes: 2 * GIB,
                limit_bytes: 0,
            }),
            secrets: env.secrets.clone(),
            volume_capability: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(expanded.capacity_bytes, 2 * GIB);
    assert_eq!(
        share_json(&env, &volume.volume_id).await["share"]["size"],
        2
    );

    let snapshot = snapshot_until_ready(
        &mut env.client,
        v1::CreateSnapshotRequest {
            source_volume_id: volume.volume_id.clone(),
            name: format!("snap-{release}"),
            secrets: env.secrets.clone(),
            parameters: Default::default(),
        },
    )
    .await
    .unwrap();
    assert_eq!(snapshot.size_bytes, 2 * GIB);
    env.client
        .delete_snapshot(v1::DeleteSnapshotRequest {
            snapshot_id: snapshot.snapshot_id,
            secrets: env.secrets.clone(),
        })
        .await
        .unwrap();
    env.delete(&volume.volume_id).await.unwrap();
    env.assert_no_leftovers();

    // Every Manila call went at a microversion the release serves.
    let refused: Vec<_> = env
        .cloud
        .journal()
        .into_iter()
        .filter(|e| e.service == Service::Manila && e.status == 406)
        .collect();
    assert!(refused.is_empty(), "{release}: {refused:?}");
}
