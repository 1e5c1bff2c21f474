//! Volume and snapshot ids that are not Manila ids never reach a Manila URL: a handle like
//! `../snapshots/<id>` would otherwise be resolved by the URL parser into another resource's
//! path (DeleteVolume deleting a snapshot, ControllerExpandVolume extending another share).
//! Deletes of such ids succeed as deletes of something that does not exist (CSI's
//! idempotency rule); every other RPC answers NotFound; nothing is changed in the cloud.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use csi_proto::v1::{self, volume_content_source};
use support::{ControllerEnv, GIB, create_request, mount_capability, snapshot_until_ready};
use tonic::Code;

/// A volume and a snapshot of it, and the journal cleared.
async fn volume_and_snapshot(env: &mut ControllerEnv) -> (v1::Volume, v1::Snapshot) {
    let volume = env.create("pvc-ids", GIB).await.unwrap();
    let snapshot = snapshot_until_ready(
        &mut env.client,
        v1::CreateSnapshotRequest {
            source_volume_id: volume.volume_id.clone(),
            name: "snap-ids".into(),
            secrets: env.secrets.clone(),
            parameters: Default::default(),
        },
    )
    .await
    .unwrap();
    env.cloud.clear_journal();
    (volume, snapshot)
}

/// Nothing changed: no Manila request but reads, and both resources still there.
fn assert_untouched(env: &ControllerEnv, volume: &v1::Volume, snapshot: &v1::Snapshot) {
    let writes: Vec<_> = env
        .cloud
        .journal()
        .into_iter()
        .filter(|e| e.method != "GET" && !e.path.ends_with("/auth/tokens"))
        .collect();
    assert!(
        writes.is_empty(),
        "a malformed id changed the cloud: {writes:#?}"
    );
    let leftovers = env.cloud.leftovers();
    assert_eq!(leftovers.shares.len(), 1, "{leftovers:#?}");
    assert_eq!(leftovers.shares[0].id, volume.volume_id);
    assert_eq!(leftovers.snapshots.len(), 1, "{leftovers:#?}");
    assert_eq!(leftovers.snapshots[0].id, snapshot.snapshot_id);
}

async fn cleanup(mut env: ControllerEnv, volume: v1::Volume, snapshot: v1::Snapshot) {
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
async fn delete_volume_of_a_handle_climbing_into_snapshots_deletes_nothing() {
    let mut env = ControllerEnv::start(&[]).await;
    let (volume, snapshot) = volume_and_snapshot(&mut env).await;
    let handle = format!("../snapshots/{}", snapshot.snapshot_id);
    env.delete(&handle).await.unwrap();
    assert_untouched(&env, &volume, &snapshot);
    cleanup(env, volume, snapshot).await;
}

#[tokio::test]
async fn delete_snapshot_of_an_id_climbing_into_shares_deletes_nothing() {
    let mut env = ControllerEnv::start(&[]).await;
    let (volume, snapshot) = volume_and_snapshot(&mut env).await;
    for id in [
        format!("../shares/{}", volume.volume_id),
        format!("{}/", snapshot.snapshot_id),
        format!("{}?force=true", snapshot.snapshot_id),
        "reallyfakesnapshotid".to_string(),
    ] {
        env.client
            .delete_snapshot(v1::DeleteSnapshotRequest {
                snapshot_id: id.clone(),
                secrets: env.secrets.clone(),
            })
            .await
            .unwrap_or_else(|e| panic!("DeleteSnapshot {id:?}: {e:?}"));
    }
    assert_untouched(&env, &volume, &snapshot);
    cleanup(env, volume, snapshot).await;
}

#[tokio::test]
async fn expanding_a_malformed_id_is_not_found_and_extends_nothing() {
    let mut env = ControllerEnv::start(&[]).await;
    let (volume, snapshot) = volume_and_snapshot(&mut env).await;
    let handle = format!("x/../{}", volume.volume_id);
    let error = env
        .client
        .controller_expand_volume(v1::ControllerExpandVolumeRequest {
            volume_id: handle.clone(),
            capacity_range: Some(v1::CapacityRange {
                required_bytes: 2 * GIB,
                limit_bytes: 0,
            }),
            secrets: env.secrets.clone(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::NotFound, "{error:?}");
    assert!(
        error.message().contains(&format!("{handle:?}"))
            && error.message().contains("not a Manila share id"),
        "{}",
        error.message()
    );
    assert_untouched(&env, &volume, &snapshot);
    cleanup(env, volume, snapshot).await;
}

#[tokio::test]
async fn validating_a_malformed_id_is_not_found() {
    let mut env = ControllerEnv::start(&[]).await;
    let (volume, snapshot) = volume_and_snapshot(&mut env).await;
    let error = env
        .client
        .validate_volume_capabilities(v1::ValidateVolumeCapabilitiesRequest {
            volume_id: format!("x/../{}", volume.volume_id),
            volume_capabilities: vec![mount_capability(
                csi_proto::v1::volume_capability::access_mode::Mode::MultiNodeMultiWriter,
            )],
            secrets: env.secrets.clone(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::NotFound, "{error:?}");
    assert_untouched(&env, &volume, &snapshot);
    cleanup(env, volume, snapshot).await;
}

#[tokio::test]
async fn snapshots_and_restores_from_malformed_ids_are_not_found() {
    let mut env = ControllerEnv::start(&[]).await;
    let (volume, snapshot) = volume_and_snapshot(&mut env).await;
    let error = env
        .client
        .create_snapshot(v1::CreateSnapshotRequest {
            source_volume_id: format!("x/../{}", volume.volume_id),
            name: "snap-other".into(),
            secrets: env.secrets.clone(),
            parameters: Default::default(),
        })
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::NotFound, "{error:?}");
    let mut restore = create_request("pvc-restore", GIB, &env.secrets, &[]);
    restore.volume_content_source = Some(v1::VolumeContentSource {
        r#type: Some(volume_content_source::Type::Snapshot(
            volume_content_source::SnapshotSource {
                snapshot_id: format!("x/../{}", snapshot.snapshot_id),
            },
        )),
    });
    let error = env.client.create_volume(restore).await.unwrap_err();
    assert_eq!(error.code(), Code::NotFound, "{error:?}");
    assert!(
        error.message().contains("not a Manila snapshot id"),
        "{}",
        error.message()
    );
    assert_untouched(&env, &volume, &snapshot);
    cleanup(env, volume, snapshot).await;
}
