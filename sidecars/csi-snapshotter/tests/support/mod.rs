//! What the snapshotter's tests share beyond the test kit: snapshotters built from their
//! command line, and Manila snapshots made and watched behind the sidecars' backs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use csi_proto::v1::{CreateSnapshotRequest, DeleteSnapshotRequest};
use csi_snapshotter::{Config, Snapshotter};
use fakes::FakeCloud;
use kube::Client;
use testkit::cloud::csi_secrets;
use testkit::drivers::ManilaController;
use testkit::sidecars::args;
use testkit::wait_for;

/// A snapshotter for the driver at `socket` with `extra` flags (it waits for the driver's
/// Probe itself).
pub async fn snapshotter(client: Client, socket: &Path, extra: &[&str]) -> Snapshotter {
    let config = <Config as clap::Parser>::try_parse_from(args("csi-snapshotter", socket, extra));
    Snapshotter::new(config.unwrap(), client).await.unwrap()
}

/// CreateSnapshot as the test (not the sidecar) calls it; returns (id, ready).
pub async fn create_snapshot(
    driver: &ManilaController,
    cloud: &FakeCloud,
    name: &str,
    share: &str,
) -> (String, bool) {
    let snapshot = driver
        .controller()
        .create_snapshot(CreateSnapshotRequest {
            source_volume_id: share.into(),
            name: name.into(),
            secrets: csi_secrets(cloud),
            parameters: HashMap::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .snapshot
        .unwrap();
    (snapshot.snapshot_id, snapshot.ready_to_use)
}

/// DeleteSnapshot as the test (not the sidecar) calls it.
pub async fn delete_snapshot(driver: &ManilaController, cloud: &FakeCloud, id: &str) {
    driver
        .controller()
        .delete_snapshot(DeleteSnapshotRequest {
            snapshot_id: id.into(),
            secrets: csi_secrets(cloud),
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

/// Waits until the fake holds no Manila snapshot `id`.
pub async fn wait_manila_snapshot_gone(cloud: &FakeCloud, id: &str, timeout: Duration) {
    wait_for(
        &format!("Manila snapshot {id} deleted"),
        timeout,
        || async {
            let left = manila_snapshots(cloud);
            if left.iter().any(|(left_id, _, _)| left_id == id) {
                Err(format!("{left:?}"))
            } else {
                Ok(Some(()))
            }
        },
    )
    .await
}
