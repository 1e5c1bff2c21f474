//! Cinder v3: version discovery and microversions, the volume lifecycle with its statuses,
//! volume types (multiattach from 3.50), snapshots and volumes made from them, zones,
//! quotas and limits, faults and user messages, leftovers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::block::Block;
use fakes::{CloudConfig, FakeCloud, FaultAction, FaultRule, Operation, Times};
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn versions_and_microversions_as_cinder_answers_them() {
    let b = Block::start().await;
    let root = reqwest::get(format!("{}/volume/", b.cloud.base_url()))
        .await
        .unwrap();
    assert_eq!(root.status(), 300);
    let body: serde_json::Value = root.json().await.unwrap();
    assert_eq!(body["versions"][0]["id"], "v3.0");
    assert_eq!(body["versions"][0]["version"], "3.71");
    assert_eq!(body["versions"][0]["min_version"], "3.0");

    // No header: 3.0; the answer names the version in the same header.
    let r = b.cinder(Method::GET, "/volumes", None, None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.headers["openstack-api-version"], "volume 3.0");
    let r = b
        .cinder(Method::GET, "/volumes", Some("latest"), None)
        .await;
    assert_eq!(r.headers["openstack-api-version"], "volume 3.71");
    let r = b.cinder(Method::GET, "/volumes", Some("3.72"), None).await;
    assert_eq!(r.status, 406, "{:?}", r.body);
    let r = b.cinder(Method::GET, "/volumes", Some("3.07"), None).await;
    assert_eq!(r.status, 400);
    // Without a token: 401.
    let r = reqwest::get(format!("{}/volumes", b.cloud.cinder_url()))
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    // The catalog lists Cinder under both types, and Nova.
    let r = b
        .http
        .post(format!("{}/auth/tokens", b.cloud.auth_url()))
        .json(&common::password_auth())
        .send()
        .await
        .unwrap();
    let body: serde_json::Value = r.json().await.unwrap();
    let types: Vec<&str> = body["token"]["catalog"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["type"].as_str().unwrap())
        .collect();
    for t in ["block-storage", "volumev3", "compute"] {
        assert!(types.contains(&t), "{types:?}");
    }
}

#[tokio::test]
async fn a_cloud_without_cinder_has_no_volume_api() {
    let cloud = FakeCloud::start(CloudConfig::default()).await.unwrap();
    let r = reqwest::get(format!("{}/volume/", cloud.base_url()))
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
}

#[tokio::test]
async fn volume_goes_creating_available_deleting_gone_with_its_file() {
    let b = Block::start().await;
    let r = b
        .cinder(
            Method::POST,
            "/volumes",
            Some("3.70"),
            Some(json!({"volume": {"size": 2, "name": "pvc-1", "metadata": {"k": "v"}}})),
        )
        .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    let v = &r.body["volume"];
    assert_eq!(v["status"], "creating");
    assert_eq!(v["size"], 2);
    assert_eq!(v["volume_type"], "__DEFAULT__");
    assert_eq!(v["availability_zone"], "nova");
    assert_eq!(v["multiattach"], false);
    assert!(
        v.get("volume_type_id").is_some(),
        "3.63 adds volume_type_id"
    );
    let id = v["id"].as_str().unwrap().to_owned();
    let v = b.wait_volume(&id, "available").await;
    assert_eq!(v["metadata"]["k"], "v");
    // The file is sparse and has the volume's size.
    let file = b.cloud.volume_file(&id);
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 2 << 30);
    // An older microversion does not show the later fields.
    let old = b
        .cinder(Method::GET, &format!("/volumes/{id}"), Some("3.0"), None)
        .await;
    assert!(old.body["volume"].get("volume_type_id").is_none());
    // Listed by name.
    let list = b
        .cinder(
            Method::GET,
            "/volumes/detail?name=pvc-1",
            Some("3.70"),
            None,
        )
        .await;
    assert_eq!(list.body["volumes"].as_array().unwrap().len(), 1);
    assert_eq!(b.cloud.block_leftovers().volumes.len(), 1);

    let r = b
        .cinder(
            Method::DELETE,
            &format!("/volumes/{id}"),
            Some("3.70"),
            None,
        )
        .await;
    assert_eq!(r.status, 202);
    let r = b
        .cinder(Method::GET, &format!("/volumes/{id}"), Some("3.70"), None)
        .await;
    assert_eq!(r.body["volume"]["status"], "deleting");
    b.wait_gone(&format!("/volumes/{id}")).await;
    assert!(!file.exists(), "the volume's file stays after delete");
    assert!(b.cloud.block_leftovers().is_empty());
}

#[tokio::test]
async fn bad_input_is_refused() {
    let b = Block::start().await;
    for (body, status) in [
        (json!({"volume": {"size": 0}}), 400),
        (
            json!({"volume": {"size": 1, "availability_zone": "elsewhere"}}),
            400,
        ),
        (json!({"volume": {"size": 1, "volume_type": "gold"}}), 404),
        (
            json!({"volume": {"size": 1, "snapshot_id": "missing"}}),
            404,
        ),
        (json!({"nothing": {}}), 400),
    ] {
        let r = b
            .cinder(Method::POST, "/volumes", Some("3.70"), Some(body.clone()))
            .await;
        assert_eq!(r.status, status, "{body}: {:?}", r.body);
    }
    assert!(b.cloud.block_leftovers().is_empty());
}

#[tokio::test]
async fn multiattach_type_needs_microversion_3_50() {
    let b = Block::start().await;
    let types = b.cinder(Method::GET, "/types", Some("3.70"), None).await;
    let multi = types.body["volume_types"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "multiattach")
        .unwrap()
        .clone();
    assert_eq!(multi["extra_specs"]["multiattach"], "<is> True");
    let specs = b
        .cinder(
            Method::GET,
            &format!("/types/{}/extra_specs", multi["id"].as_str().unwrap()),
            Some("3.70"),
            None,
        )
        .await;
    assert_eq!(specs.body["extra_specs"]["multiattach"], "<is> True");
    let default = b
        .cinder(Method::GET, "/types/default", Some("3.62"), None)
        .await;
    assert_eq!(default.body["volume_type"]["name"], "__DEFAULT__");

    let body = json!({"volume": {"size": 1, "volume_type": "multiattach"}});
    let r = b
        .cinder(Method::POST, "/volumes", Some("3.49"), Some(body.clone()))
        .await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    let r = b
        .cinder(Method::POST, "/volumes", Some("3.50"), Some(body))
        .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    assert_eq!(r.body["volume"]["multiattach"], true);
}

#[tokio::test]
async fn extend_of_an_available_volume_grows_its_file() {
    let b = Block::start().await;
    let id = b.volume(json!({"size": 1})).await;
    let extend = |size: u64| json!({"os-extend": {"new_size": size}});
    let r = b
        .cinder(
            Method::POST,
            &format!("/volumes/{id}/action"),
            Some("3.0"),
            Some(extend(1)),
        )
        .await;
    assert_eq!(r.status, 400, "not larger");
    let r = b
        .cinder(
            Method::POST,
            &format!("/volumes/{id}/action"),
            Some("3.0"),
            Some(extend(3)),
        )
        .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    let v = b
        .cinder(Method::GET, &format!("/volumes/{id}"), Some("3.0"), None)
        .await;
    assert_eq!(v.body["volume"]["status"], "extending");
    let v = b.wait_volume(&id, "available").await;
    assert_eq!(v["size"], 3);
    assert_eq!(
        std::fs::metadata(b.cloud.volume_file(&id)).unwrap().len(),
        3 << 30
    );
}

fn read_at(file: &std::path::Path, offset: u64, len: usize) -> Vec<u8> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(file).unwrap();
    f.seek(SeekFrom::Start(offset)).unwrap();
    let mut buf = vec![0; len];
    f.read_exact(&mut buf).unwrap();
    buf
}

#[tokio::test]
async fn snapshot_then_volume_from_snapshot_holds_the_data() {
    use std::io::{Seek, SeekFrom, Write};
    let b = Block::start().await;
    let id = b.volume(json!({"size": 1, "name": "source"})).await;
    let file = b.cloud.volume_file(&id);
    let mut f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
    f.seek(SeekFrom::Start(3 << 20)).unwrap();
    f.write_all(b"cinder bytes").unwrap();
    f.sync_all().unwrap();
    drop(f);

    let r = b
        .cinder(
            Method::POST,
            "/snapshots",
            Some("3.70"),
            Some(json!({"snapshot": {"volume_id": id, "name": "snap"}})),
        )
        .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    assert_eq!(r.body["snapshot"]["status"], "creating");
    let snap = r.body["snapshot"]["id"].as_str().unwrap().to_owned();
    let s = b
        .wait(&format!("/snapshots/{snap}"), "snapshot", "available")
        .await;
    assert_eq!(s["volume_id"], id.as_str());
    assert_eq!(s["size"], 1);
    // Changing the source afterwards does not change the snapshot.
    let mut f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
    f.seek(SeekFrom::Start(3 << 20)).unwrap();
    f.write_all(b"CHANGED!!!!!").unwrap();
    drop(f);
    // A volume with snapshots cannot go.
    let r = b
        .cinder(
            Method::DELETE,
            &format!("/volumes/{id}"),
            Some("3.70"),
            None,
        )
        .await;
    assert_eq!(r.status, 400);

    let restored = b.volume(json!({"size": 2, "snapshot_id": snap})).await;
    let file = b.cloud.volume_file(&restored);
    assert_eq!(
        std::fs::metadata(&file).unwrap().len(),
        2 << 30,
        "the restored volume has its own size"
    );
    assert_eq!(read_at(&file, 3 << 20, 12), b"cinder bytes");
    let clone = b.volume(json!({"source_volid": id})).await;
    assert_eq!(
        read_at(&b.cloud.volume_file(&clone), 3 << 20, 12),
        b"CHANGED!!!!!"
    );

    let r = b
        .cinder(
            Method::DELETE,
            &format!("/snapshots/{snap}"),
            Some("3.70"),
            None,
        )
        .await;
    assert_eq!(r.status, 202);
    b.wait_gone(&format!("/snapshots/{snap}")).await;
    for v in [&id, &restored, &clone] {
        let r = b
            .cinder(Method::DELETE, &format!("/volumes/{v}"), Some("3.70"), None)
            .await;
        assert_eq!(r.status, 202, "{:?}", r.body);
        b.wait_gone(&format!("/volumes/{v}")).await;
    }
    assert!(
        b.cloud.block_leftovers().is_empty(),
        "{:?}",
        b.cloud.block_leftovers()
    );
    let left: Vec<_> = std::fs::read_dir(b.cloud.backend_root().join("volume-snapshots"))
        .unwrap()
        .collect();
    assert!(left.is_empty(), "snapshot files left: {left:?}");
}

#[tokio::test]
async fn faults_end_in_error_states_with_user_messages() {
    let b = Block::start().await;
    b.cloud
        .add_fault(
            FaultRule::new(
                Operation::VolumeCreate,
                FaultAction::Error {
                    detail_id: "002".into(),
                    message: None,
                },
            )
            .for_resource("doomed"),
        )
        .unwrap();
    let r = b
        .cinder(
            Method::POST,
            "/volumes",
            Some("3.70"),
            Some(json!({"volume": {"size": 1, "name": "doomed"}})),
        )
        .await;
    assert_eq!(r.status, 202);
    let doomed = r.body["volume"]["id"].as_str().unwrap().to_owned();
    b.wait_volume(&doomed, "error").await;
    let messages = b
        .cinder(
            Method::GET,
            &format!("/messages?resource_uuid={doomed}"),
            Some("3.3"),
            None,
        )
        .await;
    assert_eq!(messages.status, 200);
    let m = &messages.body["messages"][0];
    assert_eq!(m["resource_type"], "VOLUME");
    assert_eq!(m["message_level"], "ERROR");
    assert!(m["event_id"].as_str().unwrap().ends_with("_002"), "{m}");
    let r = b.cinder(Method::GET, "/messages", Some("3.0"), None).await;
    assert_eq!(r.status, 404, "messages from 3.3");

    // Extend ending in error_extending.
    let id = b.volume(json!({"size": 1})).await;
    b.cloud
        .add_fault(FaultRule::new(
            Operation::VolumeExtend,
            FaultAction::Error {
                detail_id: "001".into(),
                message: Some("no room".into()),
            },
        ))
        .unwrap();
    let r = b
        .cinder(
            Method::POST,
            &format!("/volumes/{id}/action"),
            Some("3.70"),
            Some(json!({"os-extend": {"new_size": 2}})),
        )
        .await;
    assert_eq!(r.status, 202);
    let v = b.wait_volume(&id, "error_extending").await;
    assert_eq!(v["size"], 1);

    // HTTP errors, and a delete that never finishes.
    b.cloud
        .add_fault(
            FaultRule::new(
                Operation::VolumeList,
                FaultAction::HttpError {
                    status: 503,
                    message: None,
                },
            )
            .times(Times::Count(1)),
        )
        .unwrap();
    let r = b.cinder(Method::GET, "/volumes", Some("3.70"), None).await;
    assert_eq!(r.status, 503);
    assert_eq!(
        b.cinder(Method::GET, "/volumes", Some("3.70"), None)
            .await
            .status,
        200
    );
    b.cloud
        .add_fault(
            FaultRule::new(Operation::VolumeDelete, FaultAction::Stuck { status: None })
                .for_resource(doomed.clone()),
        )
        .unwrap();
    let r = b
        .cinder(
            Method::DELETE,
            &format!("/volumes/{doomed}"),
            Some("3.70"),
            None,
        )
        .await;
    assert_eq!(r.status, 202);
    let left = b.cloud.block_leftovers();
    assert!(
        left.volumes
            .iter()
            .any(|v| v.id == doomed && v.status == "deleting"),
        "{left:?}"
    );
}

#[tokio::test]
async fn zones_quotas_and_limits_come_from_the_seed() {
    let mut config = CloudConfig::default();
    config.cinder.present = true;
    config.cinder.availability_zones = vec!["zone-a".into(), "zone-b".into()];
    config.cinder.quotas.volumes = 1;
    let b = Block::with(config).await;
    let z = b
        .cinder(Method::GET, "/os-availability-zone", Some("3.70"), None)
        .await;
    assert_eq!(z.body["availabilityZoneInfo"][1]["zoneName"], "zone-b");
    let id = b
        .volume(json!({"size": 1, "availability_zone": "zone-b"}))
        .await;
    let r = b
        .cinder(
            Method::POST,
            "/volumes",
            Some("3.70"),
            Some(json!({"volume": {"size": 1}})),
        )
        .await;
    assert_eq!(r.status, 413, "{:?}", r.body);
    let project = b.cloud.account().project_id;
    let q = b
        .cinder(
            Method::GET,
            &format!("/os-quota-sets/{project}?usage=true"),
            Some("3.70"),
            None,
        )
        .await;
    assert_eq!(q.body["quota_set"]["volumes"]["limit"], 1);
    assert_eq!(q.body["quota_set"]["volumes"]["in_use"], 1);
    let l = b.cinder(Method::GET, "/limits", Some("3.70"), None).await;
    assert_eq!(l.body["limits"]["absolute"]["maxTotalVolumes"], 1);
    assert_eq!(l.body["limits"]["absolute"]["totalGigabytesUsed"], 1);
    let v = b
        .cinder(Method::GET, &format!("/volumes/{id}"), Some("3.70"), None)
        .await;
    assert_eq!(v.body["volume"]["availability_zone"], "zone-b");
}

/// Snapshot copies run outside the state lock: while one is held, the API answers and the
/// snapshot stays `creating`; released, it becomes `available`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_answers_while_a_volume_snapshot_is_copied() {
    let b = Block::start().await;
    let id = b.volume(json!({"size": 1})).await;
    let pause = b.cloud.pause_backend_copies();
    let snap = {
        let cinder_url = b.cloud.cinder_url();
        let (http, token) = (b.http.clone(), b.token.clone());
        let id = id.clone();
        tokio::spawn(async move {
            http.post(format!("{cinder_url}/snapshots"))
                .header("X-Auth-Token", token)
                .header("OpenStack-API-Version", "volume 3.70")
                .json(&json!({"snapshot": {"volume_id": id}}))
                .send()
                .await
                .unwrap()
                .json::<serde_json::Value>()
                .await
                .unwrap()
        })
    };
    assert!(
        pause.wait_started(1, std::time::Duration::from_secs(10)),
        "the copy never started"
    );
    let list = b
        .cinder(Method::GET, "/snapshots/detail", Some("3.70"), None)
        .await;
    assert_eq!(list.status, 200);
    assert_eq!(list.body["snapshots"][0]["status"], "creating");
    pause.release();
    let created = snap.await.unwrap();
    let snap_id = created["snapshot"]["id"].as_str().unwrap().to_owned();
    b.wait(&format!("/snapshots/{snap_id}"), "snapshot", "available")
        .await;
    assert_eq!(pause.finished(), 1);
}

/// A volume stuck in a fault is reset or force-deleted by the administrator only.
#[tokio::test]
async fn stuck_volumes_are_reset_or_force_deleted_by_an_admin() {
    let b = Block::start().await;
    b.cloud
        .add_fault(FaultRule::new(
            Operation::VolumeCreate,
            FaultAction::Stuck { status: None },
        ))
        .unwrap();
    let r = b
        .cinder(
            Method::POST,
            "/volumes",
            Some("3.70"),
            Some(json!({"volume": {"size": 1}})),
        )
        .await;
    let id = r.body["volume"]["id"].as_str().unwrap().to_owned();
    let reset = json!({"os-reset_status": {"status": "available"}});
    let path = format!("/volumes/{id}/action");
    let r = b
        .cinder(Method::POST, &path, Some("3.70"), Some(reset.clone()))
        .await;
    assert_eq!(r.status, 403, "a member may not reset");
    let mut admin = b;
    admin.token = common::token_for(&admin.http, &admin.cloud, common::admin_auth()).await;
    let r = admin
        .cinder(Method::POST, &path, Some("3.70"), Some(reset))
        .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    admin.wait_volume(&id, "available").await;
    let r = admin
        .cinder(
            Method::POST,
            &path,
            Some("3.70"),
            Some(json!({"os-force_delete": {}})),
        )
        .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    admin.wait_gone(&format!("/volumes/{id}")).await;
    assert!(!admin.cloud.volume_file(&id).exists());
}

/// Lists page with `limit` and `marker`, a full page linking to the next, as the Cinder CSI
/// driver's ListVolumes reads them.
#[tokio::test]
async fn volume_lists_page_with_limit_and_marker() {
    let mut config = CloudConfig::default();
    config.cinder.present = true;
    config.cinder.delays = fakes::CinderDelays::none();
    let b = Block::with(config).await;
    let mut ids = Vec::new();
    for n in 0..3 {
        ids.push(b.volume(json!({"size": 1, "name": format!("v{n}")})).await);
    }
    let page = b
        .cinder(Method::GET, "/volumes/detail?limit=2", Some("3.70"), None)
        .await;
    let got: Vec<&str> = page.body["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["id"].as_str().unwrap())
        .collect();
    assert_eq!(got, [ids[0].as_str(), ids[1].as_str()]);
    let next = page.body["volumes_links"][0]["href"].as_str().unwrap();
    assert!(next.ends_with(&format!("marker={}", ids[1])), "{next}");
    let r = b
        .http
        .get(next)
        .header("X-Auth-Token", &b.token)
        .send()
        .await
        .unwrap();
    let rest: serde_json::Value = r.json().await.unwrap();
    assert_eq!(rest["volumes"].as_array().unwrap().len(), 1);
    assert_eq!(rest["volumes"][0]["id"], ids[2].as_str());
    assert!(rest.get("volumes_links").is_none());
    let bad = b
        .cinder(Method::GET, "/volumes?marker=nope", Some("3.70"), None)
        .await;
    assert_eq!(bad.status, 400);
}
