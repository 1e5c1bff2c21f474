//! The control API for block storage: servers, Cinder delays, leftovers with volumes,
//! attachments and loop devices; reset detaches and removes everything.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::block::{Block, disk_link, loop_backing_files, require_loop_devices};
use common::control;
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn control_api_adds_servers_sets_delays_and_reports_block_leftovers() {
    require_loop_devices();
    let b = Block::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let disk = dirs.path().join("w1");
    let r = control(
        &b.http,
        &b.cloud,
        Method::POST,
        "/servers",
        Some(json!({"name": "w1", "availability_zone": "nova", "disk_dir": disk})),
    )
    .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let server = r.body["id"].as_str().unwrap().to_owned();
    let r = control(
        &b.http,
        &b.cloud,
        Method::POST,
        "/servers",
        Some(json!({"name": "w1", "availability_zone": "nova"})),
    )
    .await;
    assert_eq!(r.status, 400, "a second server of the same name");
    let r = control(&b.http, &b.cloud, Method::GET, "/metadata/w1", None).await;
    assert_eq!(r.body["uuid"], server.as_str());

    let r = control(
        &b.http,
        &b.cloud,
        Method::PUT,
        "/cinder-delays",
        Some(json!({"volume_create_ms": 0})),
    )
    .await;
    assert_eq!(r.status, 204);
    let r = control(&b.http, &b.cloud, Method::GET, "/cinder-delays", None).await;
    assert_eq!(r.body["volume_create_ms"], 0);
    assert_eq!(
        r.body["volume_delete_ms"], 100,
        "omitted fields take their default"
    );
    let r = control(
        &b.http,
        &b.cloud,
        Method::PUT,
        "/cinder-delays",
        Some(json!({"attach_ms": 100_000_000_000u64})),
    )
    .await;
    assert_eq!(r.status, 400);

    let vol = b.volume(json!({"size": 1, "name": "left"})).await;
    b.attach(&server, &vol).await;
    let r = control(&b.http, &b.cloud, Method::GET, "/leftovers", None).await;
    assert_eq!(r.body["volumes"][0]["id"], vol.as_str());
    assert_eq!(r.body["attachments"][0]["server_id"], server.as_str());
    assert_eq!(r.body["loop_devices"].as_array().unwrap().len(), 1);
    assert!(r.body["shares"].as_array().unwrap().is_empty());

    // Reset: no volume, no loop device, no link, no server.
    let file = b.cloud.volume_file(&vol);
    let r = control(&b.http, &b.cloud, Method::POST, "/reset", None).await;
    assert_eq!(r.status, 204, "{:?}", r.body);
    assert!(!loop_backing_files().contains(&file));
    assert!(!file.exists());
    assert!(std::fs::symlink_metadata(disk_link(&disk, &vol)).is_err());
    assert!(b.cloud.block_leftovers().is_empty());
    let r = control(&b.http, &b.cloud, Method::GET, "/servers", None).await;
    assert_eq!(r.body, json!([]));
}

#[tokio::test]
async fn seeded_servers_exist_with_their_metadata() {
    let mut config = fakes::CloudConfig::default();
    config.cinder.present = true;
    config.nova.servers.push(fakes::ServerSeed {
        name: "seeded".into(),
        availability_zone: "zone-x".into(),
        id: Some("11111111-2222-4333-8444-555555555555".into()),
        disk_dir: None,
    });
    let b = Block::with(config).await;
    let dir = b.cloud.server_disk_dir("seeded").unwrap();
    assert!(
        dir.starts_with(b.cloud.backend_root()) && dir.is_dir(),
        "{dir:?}"
    );
    let doc: serde_json::Value = reqwest::get(b.cloud.metadata_url("seeded"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(doc["uuid"], "11111111-2222-4333-8444-555555555555");
    let list = b.nova(Method::GET, "/servers/detail", "2.1", None).await;
    assert_eq!(list.body["servers"][0]["name"], "seeded");
    // The seed's servers come back after a reset.
    b.cloud.reset().unwrap();
    assert!(b.cloud.server_disk_dir("seeded").is_some());
}
