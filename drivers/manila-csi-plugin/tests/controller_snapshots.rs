//! Controller behaviour against the fake cloud: snapshots, and volumes restored from them
//! (support on the share, the share type's flags, the protocol, a snapshot still creating).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use csi_proto::v1::{self, volume_content_source};
use fakes::{CloudConfig, Delays, ShareTypeSeed};
use support::{ControllerEnv, GIB, create_request, snapshot_until_ready};
use tonic::Code;

#[tokio::test]
async fn snapshots_are_created_restored_and_deleted() {
    let mut env = ControllerEnv::start(&[]).await;
    let volume = env.create("pvc-src", GIB).await.unwrap();
    let request = v1::CreateSnapshotRequest {
        source_volume_id: volume.volume_id.clone(),
        name: "snap-1".into(),
        secrets: env.secrets.clone(),
        parameters: Default::default(),
    };
    let snapshot = snapshot_until_ready(&mut env.client, request.clone())
        .await
        .unwrap();
    assert!(snapshot.ready_to_use);
    assert_eq!(snapshot.source_volume_id, volume.volume_id);
    assert_eq!(snapshot.size_bytes, GIB);
    let again = snapshot_until_ready(&mut env.client, request)
        .await
        .unwrap();
    assert_eq!(again.snapshot_id, snapshot.snapshot_id);

    let mut restore = create_request("pvc-restored", GIB, &env.secrets, &[]);
    restore.volume_content_source = Some(v1::VolumeContentSource {
        r#type: Some(volume_content_source::Type::Snapshot(
            volume_content_source::SnapshotSource {
                snapshot_id: snapshot.snapshot_id.clone(),
            },
        )),
    });
    let restored = env
        .client
        .create_volume(restore)
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    assert!(restored.content_source.is_some());

    env.delete(&restored.volume_id).await.unwrap();
    let delete = v1::DeleteSnapshotRequest {
        snapshot_id: snapshot.snapshot_id.clone(),
        secrets: env.secrets.clone(),
    };
    env.client.delete_snapshot(delete.clone()).await.unwrap();
    env.client.delete_snapshot(delete).await.unwrap();
    env.delete(&volume.volume_id).await.unwrap();
    env.assert_no_leftovers();
}

#[tokio::test]
async fn restoring_needs_create_share_from_snapshot_support() {
    let mut config = CloudConfig::default();
    config.manila.share_types = vec![ShareTypeSeed {
        create_share_from_snapshot_support: false,
        ..ShareTypeSeed::named("default")
    }];
    let mut env = ControllerEnv::with_cloud(config, &[]).await;
    let volume = env.create("pvc-src", GIB).await.unwrap();
    let snapshot = snapshot_until_ready(
        &mut env.client,
        v1::CreateSnapshotRequest {
            source_volume_id: volume.volume_id.clone(),
            name: "snap-x".into(),
            secrets: env.secrets.clone(),
            parameters: Default::default(),
        },
    )
    .await
    .unwrap();
    let mut restore = create_request("pvc-restored", GIB, &env.secrets, &[]);
    restore.volume_content_source = Some(v1::VolumeContentSource {
        r#type: Some(volume_content_source::Type::Snapshot(
            volume_content_source::SnapshotSource {
                snapshot_id: snapshot.snapshot_id.clone(),
            },
        )),
    });
    let error = env.client.create_volume(restore).await.unwrap_err();
    assert_eq!(error.code(), Code::InvalidArgument, "{error:?}");
    assert!(
        error
            .message()
            .contains("create_share_from_snapshot_support"),
        "{}",
        error.message()
    );
    env.client
        .delete_snapshot(v1::DeleteSnapshotRequest {
            snapshot_id: snapshot.snapshot_id,
            secrets: env.secrets.clone(),
        })
        .await
        .unwrap();
    env.delete(&volume.volume_id).await.unwrap();
    env.assert_no_leftovers();
}

#[tokio::test]
async fn snapshots_need_snapshot_support() {
    let mut config = CloudConfig::default();
    config.manila.share_types = vec![ShareTypeSeed {
        snapshot_support: false,
        ..ShareTypeSeed::named("default")
    }];
    let mut env = ControllerEnv::with_cloud(config, &[]).await;
    let volume = env.create("pvc-nosnap", GIB).await.unwrap();
    let error = env
        .client
        .create_snapshot(v1::CreateSnapshotRequest {
            source_volume_id: volume.volume_id.clone(),
            name: "snap-no".into(),
            secrets: env.secrets.clone(),
            parameters: Default::default(),
        })
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::InvalidArgument, "{error:?}");
    assert!(
        error.message().contains("snapshot_support"),
        "{}",
        error.message()
    );
    env.delete(&volume.volume_id).await.unwrap();
    env.assert_no_leftovers();
}

#[tokio::test]
async fn restoring_from_a_snapshot_still_creating_is_unavailable() {
    let mut env = ControllerEnv::start(&["--share-wait-timeout=300ms"]).await;
    let volume = env.create("pvc-src", GIB).await.unwrap();
    env.cloud.set_delays(Delays {
        snapshot_create_ms: 1500,
        ..Delays::none()
    });
    let snapshot_request = v1::CreateSnapshotRequest {
        source_volume_id: volume.volume_id.clone(),
        name: "snap-slow".into(),
        secrets: env.secrets.clone(),
        parameters: Default::default(),
    };
    // CreateSnapshot does not wait: a snapshot still `creating` comes back not ready.
    let first = env
        .client
        .create_snapshot(snapshot_request.clone())
        .await
        .unwrap()
        .into_inner()
        .snapshot
        .unwrap();
    assert!(!first.ready_to_use, "{first:?}");
    let snapshot_id = env.cloud.leftovers().snapshots[0].id.clone();
    let mut restore = create_request("pvc-restored", GIB, &env.secrets, &[]);
    restore.volume_content_source = Some(v1::VolumeContentSource {
        r#type: Some(volume_content_source::Type::Snapshot(
            volume_content_source::SnapshotSource {
                snapshot_id: snapshot_id.clone(),
            },
        )),
    });
    let error = env.client.create_volume(restore).await.unwrap_err();
    assert_eq!(error.code(), Code::Unavailable, "{error:?}");
    assert!(
        error.message().contains(&snapshot_id),
        "{}",
        error.message()
    );
    // Retrying CreateSnapshot (as the snapshotter does) returns the same snapshot, and
    // eventually reports it ready.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let snapshot = env
            .client
            .create_snapshot(snapshot_request.clone())
            .await
            .unwrap()
            .into_inner()
            .snapshot
            .unwrap();
        assert_eq!(snapshot.snapshot_id, snapshot_id);
        if snapshot.ready_to_use {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "snapshot never became ready: {snapshot:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    env.client
        .delete_snapshot(v1::DeleteSnapshotRequest {
            snapshot_id,
            secrets: env.secrets.clone(),
        })
        .await
        .unwrap();
    env.delete(&volume.volume_id).await.unwrap();
    env.assert_no_leftovers();
}

fn restore_request(
    name: &str,
    snapshot_id: &str,
    secrets: &std::collections::HashMap<String, String>,
) -> v1::CreateVolumeRequest {
    let mut restore = create_request(name, GIB, secrets, &[]);
    restore.volume_content_source = Some(v1::VolumeContentSource {
        r#type: Some(volume_content_source::Type::Snapshot(
            volume_content_source::SnapshotSource {
                snapshot_id: snapshot_id.into(),
            },
        )),
    });
    restore
}

fn snapshot_request(
    name: &str,
    volume_id: &str,
    secrets: &std::collections::HashMap<String, String>,
) -> v1::CreateSnapshotRequest {
    v1::CreateSnapshotRequest {
        source_volume_id: volume_id.into(),
        name: name.into(),
        secrets: secrets.clone(),
        parameters: Default::default(),
    }
}

/// Snapshot and restore support are the share's own fields (`snapshot_support`,
/// `create_share_from_snapshot_support` on the share): the driver needs no share type for
/// them, so a member whom the cloud's policy does not let read share types snapshots and
/// restores as Manila lets them (the driver used to look the type up and failed with 403).
#[tokio::test]
async fn snapshot_support_is_read_from_the_share_not_its_type() {
    let mut env = ControllerEnv::start(&[]).await;
    let volume = env.create("pvc-src", GIB).await.unwrap();
    env.cloud.set_types_forbidden(true);
    let snapshot = snapshot_until_ready(
        &mut env.client,
        snapshot_request("snap-own", &volume.volume_id, &env.secrets),
    )
    .await
    .unwrap();
    assert!(snapshot.ready_to_use, "{snapshot:?}");
    let restored = env
        .client
        .create_volume(restore_request(
            "pvc-restored",
            &snapshot.snapshot_id,
            &env.secrets,
        ))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    env.cloud.set_types_forbidden(false);
    env.delete(&restored.volume_id).await.unwrap();
    env.client
        .delete_snapshot(v1::DeleteSnapshotRequest {
            snapshot_id: snapshot.snapshot_id,
            secrets: env.secrets.clone(),
        })
        .await
        .unwrap();
    env.delete(&volume.volume_id).await.unwrap();
    env.assert_no_leftovers();
}

/// A share of another protocol than the driver's selector is neither snapshotted nor
/// restored by it: InvalidArgument naming the mismatch, nothing created (the NFS driver used
/// to snapshot a CephFS share).
#[tokio::test]
async fn snapshots_of_shares_of_another_protocol_are_refused() {
    let mut env = ControllerEnv::start(&[]).await;
    let cephfs = support::RunningDriver::start(
        env.dir.path(),
        "cephfs",
        &[
            "--share-protocol-selector=CEPHFS",
            "--provide-node-service=false",
            "--share-wait-timeout=3s",
        ],
    )
    .await
    .unwrap();
    let mut ceph = cephfs.controller().await;
    let volume = ceph
        .create_volume(create_request("pvc-ceph", GIB, &env.secrets, &[]))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    let error = env
        .client
        .create_snapshot(snapshot_request(
            "snap-nfs",
            &volume.volume_id,
            &env.secrets,
        ))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::InvalidArgument, "{error:?}");
    assert!(
        error.message().contains("protocol mismatch") && error.message().contains("CEPHFS"),
        "{}",
        error.message()
    );
    assert!(env.cloud.leftovers().snapshots.is_empty());

    let snapshot = snapshot_until_ready(
        &mut ceph,
        snapshot_request("snap-ceph", &volume.volume_id, &env.secrets),
    )
    .await
    .unwrap();
    let error = env
        .client
        .create_volume(restore_request(
            "pvc-nfs-from-ceph",
            &snapshot.snapshot_id,
            &env.secrets,
        ))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::InvalidArgument, "{error:?}");
    assert!(
        error.message().contains("protocol mismatch")
            && error.message().contains(&snapshot.snapshot_id),
        "{}",
        error.message()
    );
    assert_eq!(env.cloud.leftovers().shares.len(), 1);

    ceph.delete_snapshot(v1::DeleteSnapshotRequest {
        snapshot_id: snapshot.snapshot_id,
        secrets: env.secrets.clone(),
    })
    .await
    .unwrap();
    ceph.delete_volume(v1::DeleteVolumeRequest {
        volume_id: volume.volume_id,
        secrets: env.secrets.clone(),
    })
    .await
    .unwrap();
    cephfs.stop().await;
    env.assert_no_leftovers();
}
