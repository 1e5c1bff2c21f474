//! A fake leaves nothing on the host: the temporary backend directory (the shares' bytes)
//! goes when the cloud is dropped, whatever the shares hold; a backend directory the caller
//! chose stays. (The binary's side is in `binary.rs`.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::PermissionsExt;

use common::Client;
use fakes::{CloudConfig, FakeCloud};

#[tokio::test]
async fn dropping_the_cloud_removes_its_temporary_backend() {
    let cloud = FakeCloud::start(CloudConfig::default()).await.unwrap();
    let root = cloud.backend_root();
    assert!(root.join("shares").is_dir(), "{}", root.display());

    drop(cloud);
    assert!(!root.exists(), "{} survived the cloud", root.display());
}

#[tokio::test]
async fn dropping_the_cloud_removes_a_backend_with_written_shares() {
    let client = Client::start(CloudConfig::default()).await;
    let id = client.available_share("written", 1).await;
    let share = client.cloud.share_dir(&id);
    std::fs::create_dir_all(share.join("a/b")).unwrap();
    std::fs::write(share.join("a/b/data"), b"bytes a workload wrote").unwrap();
    // A directory its writer made read-only must not keep the tree alive.
    std::fs::set_permissions(share.join("a"), std::fs::Permissions::from_mode(0o555)).unwrap();
    let snapshot = client
        .post(
            "/snapshots",
            serde_json::json!({"snapshot": {"share_id": id, "name": "snap"}}),
        )
        .await;
    assert_eq!(snapshot.status, 202, "{:?}", snapshot.body);
    let root = client.cloud.backend_root();
    assert!(share.starts_with(&root));

    // The HTTP client's keep-alive connections are still open when the cloud goes.
    let Client { http, cloud, .. } = client;
    drop(cloud);
    assert!(!root.exists(), "{} survived the cloud", root.display());
    drop(http);
}

#[tokio::test]
async fn a_backend_root_chosen_by_the_caller_is_kept() {
    let dir = tempfile::Builder::new()
        .prefix("backend-cleanup-")
        .tempdir()
        .unwrap();
    let root = dir.path().join("backend");
    let cloud = FakeCloud::builder(CloudConfig::default())
        .backend_root(&root)
        .start()
        .await
        .unwrap();
    let client = Client::for_cloud(cloud).await;
    let id = client.available_share("kept", 1).await;

    drop(client);
    assert!(root.join("shares").join(&id).is_dir());
}
