//! Nova attaches Cinder volumes to servers for real: a loop device over the volume's file,
//! linked from the server's disk directory as `virtio-<id[..20]>`; data written through it
//! is there on another server after detach; a non-multiattach volume in use is refused;
//! extend grows the device; nothing is left on the host when the cloud goes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileTypeExt;
use std::path::PathBuf;

use common::block::{
    Block, block_device_bytes, disk_link, loop_backing_files, require_loop_devices,
};
use fakes::{FaultAction, FaultRule, Operation};
use reqwest::Method;
use serde_json::json;

fn write_at(device: &std::path::Path, offset: u64, data: &[u8]) {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(device)
        .unwrap();
    f.seek(SeekFrom::Start(offset)).unwrap();
    f.write_all(data).unwrap();
    f.sync_all().unwrap();
}

fn read_at(device: &std::path::Path, offset: u64, len: usize) -> Vec<u8> {
    let mut f = std::fs::File::open(device).unwrap();
    f.seek(SeekFrom::Start(offset)).unwrap();
    let mut buf = vec![0; len];
    f.read_exact(&mut buf).unwrap();
    buf
}

#[tokio::test]
async fn attach_publishes_a_block_device_backed_by_the_volume_file() {
    require_loop_devices();
    let b = Block::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let (one, disk_one) = b.server(dirs.path(), "node-1", "nova");
    let (two, disk_two) = b.server(dirs.path(), "node-2", "nova");
    let vol = b.volume(json!({"size": 1, "name": "data"})).await;

    let r = b
        .nova(
            Method::POST,
            &format!("/servers/{one}/os-volume_attachments"),
            "2.1",
            Some(json!({"volumeAttachment": {"volumeId": vol}})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["volumeAttachment"]["device"], "/dev/vdb");
    assert_eq!(r.body["volumeAttachment"]["serverId"], one.as_str());
    // The journal says which service answered each request.
    let services: Vec<(fakes::Service, String)> = b
        .cloud
        .journal()
        .into_iter()
        .map(|e| (e.service, e.path))
        .collect();
    assert!(
        services
            .iter()
            .any(|(s, p)| *s == fakes::Service::Nova && p.ends_with("/os-volume_attachments")),
        "{services:?}"
    );
    assert!(
        services
            .iter()
            .any(|(s, p)| *s == fakes::Service::Cinder && p.contains("/volumes")),
        "{services:?}"
    );
    let v = b
        .cinder(Method::GET, &format!("/volumes/{vol}"), Some("3.70"), None)
        .await;
    assert!(["attaching", "in-use"].contains(&v.body["volume"]["status"].as_str().unwrap()));
    let v = b.wait_volume(&vol, "in-use").await;
    assert_eq!(v["attachments"][0]["server_id"], one.as_str());
    assert_eq!(v["attachments"][0]["device"], "/dev/vdb");

    let link = disk_link(&disk_one, &vol);
    let device = std::fs::read_link(&link).unwrap();
    assert!(
        device.to_string_lossy().starts_with("/dev/loop"),
        "{device:?}"
    );
    assert!(
        std::fs::metadata(&link)
            .unwrap()
            .file_type()
            .is_block_device()
    );
    assert!(
        loop_backing_files().contains(&b.cloud.volume_file(&vol)),
        "the loop device is not backed by the volume file"
    );
    assert_eq!(block_device_bytes(&device), 1 << 30);

    // A second, non-multiattach attach is refused while in use; the list shows one.
    let r = b
        .nova(
            Method::POST,
            &format!("/servers/{two}/os-volume_attachments"),
            "2.60",
            Some(json!({"volumeAttachment": {"volumeId": vol}})),
        )
        .await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    assert!(!disk_link(&disk_two, &vol).exists());
    let list = b
        .nova(
            Method::GET,
            &format!("/servers/{one}/os-volume_attachments"),
            "2.1",
            None,
        )
        .await;
    assert_eq!(list.body["volumeAttachments"].as_array().unwrap().len(), 1);
    // The next volume on the same server gets the next device name.
    let other = b.volume(json!({"size": 1})).await;
    assert_eq!(b.attach(&one, &other).await, "/dev/vdc");

    // Data written through the device is there after detach, on the other server.
    write_at(&link, 1 << 20, b"written on node-1");
    b.detach(&one, &vol, "available").await;
    assert!(!link.exists(), "the link stays after detach");
    assert!(
        !loop_backing_files().contains(&b.cloud.volume_file(&vol)),
        "the loop device stays after detach"
    );
    assert_eq!(b.attach(&two, &vol).await, "/dev/vdb");
    let link_two = disk_link(&disk_two, &vol);
    assert_eq!(read_at(&link_two, 1 << 20, 17), b"written on node-1");

    // An attached volume cannot be deleted.
    let r = b
        .cinder(
            Method::DELETE,
            &format!("/volumes/{vol}"),
            Some("3.70"),
            None,
        )
        .await;
    assert_eq!(r.status, 400);
    // Cinder's attachments API (3.27) shows what Nova made.
    let a = b
        .cinder(Method::GET, "/attachments", Some("3.27"), None)
        .await;
    assert_eq!(
        a.body["attachments"].as_array().unwrap().len(),
        2,
        "{:?}",
        a.body
    );
    assert_eq!(
        b.cinder(Method::GET, "/attachments", Some("3.26"), None)
            .await
            .status,
        404
    );

    b.detach(&two, &vol, "available").await;
    b.detach(&one, &other, "available").await;
    let left = b.cloud.block_leftovers();
    assert!(
        left.attachments.is_empty() && left.loop_devices.is_empty(),
        "{left:?}"
    );
}

#[tokio::test]
async fn a_filesystem_made_on_one_server_mounts_on_another() {
    require_loop_devices();
    let b = Block::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let (one, disk_one) = b.server(dirs.path(), "node-1", "nova");
    let (two, disk_two) = b.server(dirs.path(), "node-2", "nova");
    let vol = b.volume(json!({"size": 1})).await;
    b.attach(&one, &vol).await;
    let out = std::process::Command::new("mkfs.ext4")
        .args(["-q", "-F", "-L", "fakevol"])
        .arg(disk_link(&disk_one, &vol))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "mkfs.ext4: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    b.detach(&one, &vol, "available").await;
    b.attach(&two, &vol).await;
    let out = std::process::Command::new("blkid")
        .args(["-s", "LABEL", "-o", "value"])
        .arg(disk_link(&disk_two, &vol))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "fakevol");
    b.detach(&two, &vol, "available").await;
}

#[tokio::test]
async fn multiattach_volumes_attach_to_two_servers_from_compute_2_60() {
    require_loop_devices();
    let b = Block::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let (one, disk_one) = b.server(dirs.path(), "node-1", "nova");
    let (two, disk_two) = b.server(dirs.path(), "node-2", "nova");
    let vol = b
        .volume(json!({"size": 1, "volume_type": "multiattach"}))
        .await;
    let r = b
        .nova(
            Method::POST,
            &format!("/servers/{one}/os-volume_attachments"),
            "2.59",
            Some(json!({"volumeAttachment": {"volumeId": vol}})),
        )
        .await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    b.attach(&one, &vol).await;
    b.attach(&two, &vol).await;
    write_at(&disk_link(&disk_one, &vol), 0, b"shared");
    assert_eq!(read_at(&disk_link(&disk_two, &vol), 0, 6), b"shared");
    // Detaching one leaves it in use by the other.
    b.detach(&one, &vol, "in-use").await;
    assert!(disk_link(&disk_two, &vol).exists());
    b.detach(&two, &vol, "available").await;
}

#[tokio::test]
async fn extend_of_an_in_use_volume_grows_the_block_device_from_3_42() {
    require_loop_devices();
    let b = Block::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let (one, disk_one) = b.server(dirs.path(), "node-1", "nova");
    let vol = b.volume(json!({"size": 1})).await;
    b.attach(&one, &vol).await;
    let device = std::fs::read_link(disk_link(&disk_one, &vol)).unwrap();
    let extend = json!({"os-extend": {"new_size": 2}});
    let r = b
        .cinder(
            Method::POST,
            &format!("/volumes/{vol}/action"),
            Some("3.41"),
            Some(extend.clone()),
        )
        .await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    let r = b
        .cinder(
            Method::POST,
            &format!("/volumes/{vol}/action"),
            Some("3.42"),
            Some(extend),
        )
        .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    let v = b.wait_volume(&vol, "in-use").await;
    assert_eq!(v["size"], 2);
    assert_eq!(block_device_bytes(&device), 2 << 30);
    b.detach(&one, &vol, "available").await;
}

#[tokio::test]
async fn attach_faults_and_unknown_things_are_refused() {
    require_loop_devices();
    let b = Block::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let (one, disk_one) = b.server(dirs.path(), "node-1", "nova");
    let vol = b.volume(json!({"size": 1})).await;
    let attach = json!({"volumeAttachment": {"volumeId": vol}});
    let r = b
        .nova(
            Method::POST,
            "/servers/missing/os-volume_attachments",
            "2.1",
            Some(attach.clone()),
        )
        .await;
    assert_eq!(r.status, 404);
    let r = b
        .nova(
            Method::POST,
            &format!("/servers/{one}/os-volume_attachments"),
            "2.1",
            Some(json!({"volumeAttachment": {"volumeId": "missing"}})),
        )
        .await;
    assert_eq!(r.status, 404);
    b.cloud
        .add_fault(
            FaultRule::new(
                Operation::VolumeAttach,
                FaultAction::HttpError {
                    status: 500,
                    message: None,
                },
            )
            .for_resource(vol.clone()),
        )
        .unwrap();
    let r = b
        .nova(
            Method::POST,
            &format!("/servers/{one}/os-volume_attachments"),
            "2.1",
            Some(attach),
        )
        .await;
    assert_eq!(r.status, 500);
    assert!(!disk_link(&disk_one, &vol).exists());
    let v = b
        .cinder(Method::GET, &format!("/volumes/{vol}"), Some("3.70"), None)
        .await;
    assert_eq!(v.body["volume"]["status"], "available");
}

#[tokio::test]
async fn servers_are_their_nodes_metadata_documents() {
    let b = Block::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let (id, _) = b.server(dirs.path(), "worker-1", "zone-a");
    let doc: serde_json::Value = reqwest::get(b.cloud.metadata_url("worker-1"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(doc["uuid"], id.as_str());
    assert_eq!(doc["availability_zone"], "zone-a");
    assert_eq!(doc["name"], "worker-1");
    let s = b
        .nova(Method::GET, &format!("/servers/{id}"), "2.1", None)
        .await;
    assert_eq!(s.body["server"]["OS-EXT-AZ:availability_zone"], "zone-a");
}

#[tokio::test]
async fn nothing_is_left_on_the_host_after_the_cloud_drops() {
    require_loop_devices();
    let dirs = tempfile::tempdir().unwrap();
    let (files, links, root): (Vec<PathBuf>, Vec<PathBuf>, PathBuf) = {
        let b = Block::start().await;
        let (one, disk_one) = b.server(dirs.path(), "node-1", "nova");
        let (two, disk_two) = b.server(dirs.path(), "node-2", "nova");
        let v1 = b.volume(json!({"size": 1})).await;
        let v2 = b
            .volume(json!({"size": 1, "volume_type": "multiattach"}))
            .await;
        b.attach(&one, &v1).await;
        b.attach(&one, &v2).await;
        b.attach(&two, &v2).await;
        let files = vec![b.cloud.volume_file(&v1), b.cloud.volume_file(&v2)];
        let backing = loop_backing_files();
        for f in &files {
            assert!(backing.contains(f), "{f:?} not attached: {backing:?}");
        }
        assert_eq!(b.cloud.block_leftovers().loop_devices.len(), 3);
        let links = vec![
            disk_link(&disk_one, &v1),
            disk_link(&disk_one, &v2),
            disk_link(&disk_two, &v2),
        ];
        (files, links, b.cloud.backend_root())
    };
    let backing = loop_backing_files();
    for f in &files {
        assert!(
            !backing.contains(f),
            "loop device over {f:?} left after drop"
        );
        assert!(!f.exists(), "{f:?} left after drop");
    }
    for l in &links {
        assert!(
            std::fs::symlink_metadata(l).is_err(),
            "link {l:?} left after drop"
        );
    }
    assert!(!root.exists(), "backend {root:?} left");
}
