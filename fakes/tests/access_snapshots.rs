//! Access rules (actions and `/share-access-rules`) and snapshots (including restoring a
//! share from one, bytes included).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Client;
use fakes::{CloudConfig, Delays, ShareTypeSeed};
use reqwest::Method;
use rstest::rstest;
use serde_json::json;

#[tokio::test]
async fn allow_list_deny_with_states() {
    let mut config = CloudConfig::default();
    config.manila.delays.access_ms = 200;
    let c = Client::start(config).await;
    let id = c.available_share("a", 1).await;
    let action = format!("/shares/{id}/action");
    let r = c.post(&action, json!({"allow_access": {"access_type": "ip", "access_to": "10.0.0.0/24", "access_level": "rw"}})).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["access"]["state"], "queued_to_apply");
    let rule = r.body["access"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        c.get(&format!("/shares/{id}")).await.body["share"]["access_rules_status"],
        "syncing"
    );
    c.wait_for(
        &format!("/share-access-rules/{rule}"),
        "access",
        "state",
        "active",
    )
    .await;
    // The action exists up to 2.44 (then `/share-access-rules`), as in Manila.
    let listed = c
        .call_at(
            "2.44",
            Method::POST,
            &action,
            Some(json!({"access_list": null})),
        )
        .await;
    assert_eq!(listed.body["access_list"][0]["access_to"], "10.0.0.0/24");
    let by_share = c.get(&format!("/share-access-rules?share_id={id}")).await;
    assert_eq!(by_share.body["access_list"][0]["id"], rule.as_str());
    assert_eq!(
        c.post(&action, json!({"deny_access": {"access_id": rule}}))
            .await
            .status,
        202
    );
    assert_eq!(
        c.get(&format!("/share-access-rules/{rule}")).await.body["access"]["state"],
        "queued_to_deny"
    );
    c.wait_gone(&format!("/share-access-rules/{rule}")).await;
    assert!(c.cloud.leftovers().access_rules.is_empty());
}

#[tokio::test]
async fn old_microversions_see_new_state_and_os_prefixed_actions() {
    let c = Client::start(CloudConfig::default()).await;
    let id = c.available_share("old", 1).await;
    c.cloud.set_delays(Delays::uniform(60_000));
    let r = c
        .call_at(
            "2.6",
            Method::POST,
            &format!("/shares/{id}/action"),
            Some(json!({"os-allow_access": {"access_type": "ip", "access_to": "10.1.1.1"}})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["access"]["state"], "new");
    assert!(
        r.body["access"].get("access_key").is_none(),
        "access_key only from 2.21"
    );
}

#[tokio::test]
async fn cephx_rules_get_an_access_key() {
    let c = Client::start(CloudConfig::default()).await;
    let id = c.available_share("ceph", 1).await;
    let r = c
        .post(
            &format!("/shares/{id}/action"),
            json!({"allow_access": {"access_type": "cephx", "access_to": "alice"}}),
        )
        .await;
    let key = r.body["access"]["access_key"].as_str().unwrap();
    assert!(key.starts_with("AQ") && key.len() > 40, "{key}");
}

#[rstest]
#[case::bad_type(json!({"access_type": "dns", "access_to": "x"}), 400)]
#[case::bad_ip(json!({"access_type": "ip", "access_to": "10.0.0.300"}), 400)]
#[case::bad_level(json!({"access_type": "ip", "access_to": "10.0.0.1", "access_level": "rwx"}), 400)]
#[tokio::test]
async fn bad_access_rules(#[case] args: serde_json::Value, #[case] status: u16) {
    let c = Client::start(CloudConfig::default()).await;
    let id = c.available_share("b", 1).await;
    let r = c
        .post(
            &format!("/shares/{id}/action"),
            json!({"allow_access": args}),
        )
        .await;
    assert_eq!(r.status, status);
    assert_eq!(r.body["badRequest"]["code"], 400);
}

#[tokio::test]
async fn duplicate_rules_and_unknown_denies() {
    let c = Client::start(CloudConfig::default()).await;
    let id = c.available_share("d", 1).await;
    let action = format!("/shares/{id}/action");
    let allow = json!({"allow_access": {"access_type": "ip", "access_to": "0.0.0.0/0"}});
    assert_eq!(c.post(&action, allow.clone()).await.status, 200);
    let r = c.post(&action, allow).await;
    assert_eq!(
        r.body["badRequest"]["message"],
        "Share access ip:0.0.0.0/0 exists."
    );
    let r = c
        .post(&action, json!({"deny_access": {"access_id": "nope"}}))
        .await;
    assert_eq!(r.status, 404);
    assert_eq!(
        c.get("/share-access-rules").await.status,
        400,
        "share_id is required"
    );
}

#[tokio::test]
async fn snapshot_and_restore_copy_bytes() {
    let c = Client::start(CloudConfig::default()).await;
    let id = c.available_share("src", 2).await;
    std::fs::write(c.cloud.share_dir(&id).join("data"), b"v1").unwrap();
    let r = c
        .post(
            "/snapshots",
            json!({"snapshot": {"share_id": id, "name": "snap"}}),
        )
        .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    assert_eq!(r.body["snapshot"]["status"], "creating");
    let snap = r.body["snapshot"]["id"].as_str().unwrap().to_owned();
    c.wait_for(
        &format!("/snapshots/{snap}"),
        "snapshot",
        "status",
        "available",
    )
    .await;
    std::fs::write(c.cloud.share_dir(&id).join("data"), b"v2").unwrap();
    assert_eq!(
        c.get("/snapshots/detail?name=snap").await.body["snapshots"][0]["id"],
        snap.as_str()
    );

    let r = c.post("/shares", json!({"share": {"name": "restored", "size": 2, "share_proto": "NFS", "snapshot_id": snap}})).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["share"]["status"], "creating_from_snapshot");
    let restored = r.body["share"]["id"].as_str().unwrap().to_owned();
    c.wait_for(
        &format!("/shares/{restored}"),
        "share",
        "status",
        "available",
    )
    .await;
    assert_eq!(
        std::fs::read(c.cloud.share_dir(&restored).join("data")).unwrap(),
        b"v1"
    );

    let r = c.delete(&format!("/shares/{id}")).await;
    assert_eq!(
        r.status, 403,
        "a share with snapshots cannot be deleted: {:?}",
        r.body
    );
    assert_eq!(
        r.body["forbidden"]["message"],
        "Invalid share: Share still has 1 dependent snapshots."
    );
    assert_eq!(c.delete(&format!("/snapshots/{snap}")).await.status, 202);
    c.wait_gone(&format!("/snapshots/{snap}")).await;
    assert_eq!(c.delete(&format!("/shares/{id}")).await.status, 202);
    assert_eq!(c.delete(&format!("/shares/{restored}")).await.status, 202);
    c.wait_gone(&format!("/shares/{id}")).await;
    c.wait_gone(&format!("/shares/{restored}")).await;
    assert!(c.cloud.leftovers().is_empty());
}

#[tokio::test]
async fn below_2_54_creating_from_snapshot_reads_creating() {
    let c = Client::start(CloudConfig::default()).await;
    let id = c.available_share("src", 1).await;
    let snap = c
        .post("/snapshots", json!({"snapshot": {"share_id": id}}))
        .await
        .body["snapshot"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    c.wait_for(
        &format!("/snapshots/{snap}"),
        "snapshot",
        "status",
        "available",
    )
    .await;
    let r = c
        .call_at(
            "2.53",
            Method::POST,
            "/shares",
            Some(json!({"share": {"size": 1, "share_proto": "NFS", "snapshot_id": snap}})),
        )
        .await;
    assert_eq!(r.body["share"]["status"], "creating");
}

#[tokio::test]
async fn snapshots_need_type_support() {
    let mut config = CloudConfig::default();
    let mut plain = ShareTypeSeed::named("plain");
    plain.snapshot_support = false;
    plain.create_share_from_snapshot_support = false;
    config.manila.share_types = vec![plain];
    config.manila.default_share_type = Some("plain".into());
    let c = Client::start(config).await;
    let id = c.available_share("p", 1).await;
    let r = c
        .post("/snapshots", json!({"snapshot": {"share_id": id}}))
        .await;
    assert_eq!(r.status, 422);
    assert!(
        r.body["computeFault"]["message"]
            .as_str()
            .unwrap()
            .contains("does not have that capability")
    );
}
