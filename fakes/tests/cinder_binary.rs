//! The `fake-openstack` binary with block storage (`--server NAME=ZONE`): a volume attached
//! over HTTP is a loop device on the host, and SIGTERM leaves none behind.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::block::{loop_backing_files, require_loop_devices};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

const EXE: &str = env!("CARGO_BIN_EXE_fake-openstack");

#[test]
fn the_binary_serves_block_storage_and_detaches_everything_on_sigterm() {
    require_loop_devices();
    let dir = tempfile::tempdir().unwrap();
    let clouds = dir.path().join("clouds.yaml");
    let mut child = Command::new(EXE)
        .args([
            "--port",
            "0",
            "--server",
            "worker-1=zone-a",
            "--delay-ms",
            "0",
        ])
        .arg("--write-clouds-yaml")
        .arg(&clouds)
        .env("TMPDIR", dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let http = reqwest::Client::new();
    // Ready once clouds.yaml is written and the control API answers.
    let deadline = Instant::now() + Duration::from_secs(20);
    let base = loop {
        assert!(
            child.try_wait().unwrap().is_none(),
            "fake-openstack exited early"
        );
        let ready = std::fs::read_to_string(&clouds)
            .ok()
            .and_then(|t| serde_yaml::from_str::<serde_yaml::Value>(&t).ok())
            .and_then(|d| {
                d["clouds"]["fake"]["auth"]["auth_url"]
                    .as_str()
                    .map(str::to_owned)
            })
            .map(|url| url.trim_end_matches("/identity/v3").to_owned())
            .filter(|base| {
                rt.block_on(http.get(format!("{base}/_fake/health")).send())
                    .is_ok_and(|r| r.status() == 200)
            });
        if let Some(base) = ready {
            break base;
        }
        assert!(
            Instant::now() < deadline,
            "fake-openstack never became ready"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let (file, link): (PathBuf, PathBuf) = rt.block_on(async {
        let r = http
            .post(format!("{base}/identity/v3/auth/tokens"))
            .json(&common::password_auth())
            .send()
            .await
            .unwrap();
        let token = r.headers()["x-subject-token"].to_str().unwrap().to_owned();
        let body: Value = r.json().await.unwrap();
        let cinder = body["token"]["catalog"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["type"] == "block-storage")
            .unwrap()["endpoints"][0]["url"]
            .as_str()
            .unwrap()
            .to_owned();
        let servers: Value = http
            .get(format!("{base}/_fake/servers"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let server = servers[0]["id"].as_str().unwrap().to_owned();
        let disk_dir = PathBuf::from(servers[0]["disk_dir"].as_str().unwrap());
        let created: Value = http
            .post(format!("{cinder}/volumes"))
            .header("X-Auth-Token", &token)
            .json(&json!({"volume": {"size": 1}}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let volume = created["volume"]["id"].as_str().unwrap().to_owned();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let v: Value = http
                .get(format!("{cinder}/volumes/{volume}"))
                .header("X-Auth-Token", &token)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            if v["volume"]["status"] == "available" {
                break;
            }
            assert!(Instant::now() < deadline, "never available: {v}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let r = http
            .post(format!(
                "{base}/compute/v2.1/servers/{server}/os-volume_attachments"
            ))
            .header("X-Auth-Token", &token)
            .json(&json!({"volumeAttachment": {"volumeId": volume}}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let left: Value = http
            .get(format!("{base}/_fake/leftovers"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let file = PathBuf::from(left["loop_devices"][0]["file"].as_str().unwrap());
        (file, disk_dir.join(format!("virtio-{}", &volume[..20])))
    });
    assert!(
        loop_backing_files().contains(&file),
        "{file:?} not on a loop device"
    );
    assert!(std::fs::symlink_metadata(&link).is_ok(), "{link:?} missing");

    kill(
        Pid::from_raw(i32::try_from(child.id()).unwrap()),
        Signal::SIGTERM,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "fake-openstack ignored SIGTERM");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(status.success(), "exit {status}");
    assert!(
        !loop_backing_files().contains(&file),
        "loop device over {file:?} left"
    );
    assert!(!file.exists(), "{file:?} left");
    assert!(std::fs::symlink_metadata(&link).is_err(), "{link:?} left");
}
