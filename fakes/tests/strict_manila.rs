//! The fake is as strict as Manila: microversion headers, access rules, create-time checks,
//! share update, type lookup, list filters, and an API that answers while data is copied.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{Client, resp};
use fakes::{CloudConfig, Delays, FakeCloud, ShareTypeSeed};
use reqwest::Method;
use rstest::rstest;
use serde_json::{Value, json};

async fn allow(c: &Client, version: &str, share: &str, kind: &str, to: &str) -> common::Resp {
    c.call_at(
        version,
        Method::POST,
        &format!("/shares/{share}/action"),
        Some(json!({"allow_access": {"access_type": kind, "access_to": to, "access_level": "rw"}})),
    )
    .await
}

fn message(r: &common::Resp) -> String {
    r.body["badRequest"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

// ---- 1. microversions ---------------------------------------------------------------

#[tokio::test]
async fn version_discovery_matches_what_is_accepted() {
    let c = Client::start(CloudConfig::default()).await;
    let v2 = resp(
        reqwest::get(format!("{}/", c.cloud.manila_url()))
            .await
            .unwrap(),
    )
    .await;
    let max = v2.body["versions"][0]["version"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(max, "2.95", "the newest release (2026.1) ends at 2.95");
    assert_eq!(v2.body["versions"][0]["min_version"], "2.0");
    let ok = c.call_at(&max, Method::GET, "/shares", None).await;
    assert_eq!(ok.status, 200);
    assert_eq!(ok.headers["x-openstack-manila-api-version"], max.as_str());
    assert_eq!(
        c.call_at("2.96", Method::GET, "/shares", None).await.status,
        406
    );
}

#[tokio::test]
async fn only_the_manila_header_is_read() {
    let c = Client::start(CloudConfig::default()).await;
    // The generic header names 2.45, where /share-access-rules exists; Manila ignores it and
    // serves 2.0, where it does not.
    let id = c.available_share("s", 1).await;
    let r = resp(
        c.http
            .get(format!(
                "{}/share-access-rules?share_id={id}",
                c.cloud.manila_url()
            ))
            .header("X-Auth-Token", &c.token)
            .header("OpenStack-API-Version", "shared-file-system 2.45")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, 404, "{:?}", r.body);
    assert_eq!(r.headers["x-openstack-manila-api-version"], "2.0");
    let latest = c.call_at("latest", Method::GET, "/shares", None).await;
    assert_eq!(latest.status, 400, "`latest` is not a Manila version");
}

// ---- 2. allow_access in transitional statuses -----------------------------------------

#[tokio::test]
async fn allow_access_is_refused_while_the_share_is_busy() {
    let c = Client::start(CloudConfig::default()).await;
    let id = c.available_share("busy", 1).await;
    c.cloud.set_delays(Delays {
        share_create_ms: 600_000,
        share_resize_ms: 600_000,
        ..Delays::none()
    });
    let r = c
        .post(
            &format!("/shares/{id}/action"),
            json!({"extend": {"new_size": 2}}),
        )
        .await;
    assert_eq!(r.status, 202);
    let r = allow(&c, "2.84", &id, "ip", "10.0.0.1").await;
    assert_eq!(r.status, 400, "extending: {:?}", r.body);
    assert!(message(&r).contains("extending"), "{}", message(&r));

    let creating = c.create_share("creating", 1).await;
    let r = allow(&c, "2.84", &creating, "ip", "10.0.0.1").await;
    assert_eq!(r.status, 400, "creating: {:?}", r.body);
    assert!(message(&r).contains("creating"), "{}", message(&r));
}

// ---- 3. access rule validation --------------------------------------------------------

#[rstest]
#[case::ipv6_before_2_38("2.37", "ip", "fd00::1", 400)]
#[case::ipv6_from_2_38("2.38", "ip", "fd00::1", 200)]
#[case::ipv6_network_from_2_38("2.38", "ip", "fd00::/64", 200)]
#[case::ipv6_host_bits("2.38", "ip", "fd00::1/64", 400)]
#[case::cephx_before_2_13("2.12", "cephx", "alice", 400)]
#[case::cephx_from_2_13("2.13", "cephx", "alice", 200)]
#[case::cephx_with_period("2.13", "cephx", "alice.bob", 400)]
#[case::cephx_short("2.13", "cephx", "bob", 200)]
#[case::user_with_slash("2.84", "user", "ab/cd", 400)]
#[case::cidr_host_bits_set("2.84", "ip", "10.0.0.1/24", 400)]
#[case::cidr_network("2.84", "ip", "10.0.0.0/24", 200)]
#[case::user_too_short("2.84", "user", "bob", 400)]
#[case::user_four_chars("2.84", "user", "bobb", 200)]
#[case::user_too_long("2.84", "user", &"u".repeat(256), 400)]
#[case::user_255_chars("2.84", "user", &"u".repeat(255), 200)]
#[tokio::test]
async fn access_rules_are_validated_as_manila_does(
    #[case] version: &str,
    #[case] kind: &str,
    #[case] to: &str,
    #[case] status: u16,
) {
    let c = Client::start(CloudConfig::default()).await;
    let id = c.available_share("a", 1).await;
    let r = allow(&c, version, &id, kind, to).await;
    assert_eq!(r.status, status, "{kind}:{to} at {version}: {:?}", r.body);
    if status == 400 {
        assert!(r.body["badRequest"]["code"] == 400, "{:?}", r.body);
    }
}

#[tokio::test]
async fn access_list_action_ends_at_2_44() {
    let c = Client::start(CloudConfig::default()).await;
    let id = c.available_share("a", 1).await;
    let path = format!("/shares/{id}/action");
    let body = json!({"access_list": null});
    let r = c
        .call_at("2.44", Method::POST, &path, Some(body.clone()))
        .await;
    assert_eq!(r.status, 200);
    let r = c.call_at("2.45", Method::POST, &path, Some(body)).await;
    assert_eq!(r.status, 404, "{:?}", r.body);
    let r = c
        .call_at(
            "2.45",
            Method::GET,
            &format!("/share-access-rules?share_id={id}"),
            None,
        )
        .await;
    assert_eq!(r.status, 200);
}

// ---- 4. create-time checks ------------------------------------------------------------

fn two_types_two_zones() -> CloudConfig {
    let mut config = CloudConfig::default();
    let mut other = ShareTypeSeed::named("other");
    other.id = Some("0f0e0d0c-0b0a-4908-8706-050403020100".into());
    let mut limited = ShareTypeSeed::named("limited");
    limited.id = Some("1f1e1d1c-1b1a-4918-9716-151413121110".into());
    limited
        .extra_specs
        .insert("provisioning:min_share_size".into(), "2".into());
    limited
        .extra_specs
        .insert("provisioning:max_share_size".into(), "5".into());
    limited
        .extra_specs
        .insert("availability_zones".into(), "zone-a".into());
    config.manila.share_types.push(other);
    config.manila.share_types.push(limited);
    config.manila.availability_zones = vec!["zone-a".into(), "zone-b".into()];
    config
}

async fn snapshot_of(c: &Client, share: &str) -> String {
    let r = c
        .post("/snapshots", json!({"snapshot": {"share_id": share}}))
        .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    let snap = r.body["snapshot"]["id"].as_str().unwrap().to_owned();
    c.wait_for(
        &format!("/snapshots/{snap}"),
        "snapshot",
        "status",
        "available",
    )
    .await;
    snap
}

#[tokio::test]
async fn a_share_from_a_snapshot_keeps_the_parents_type_and_zone() {
    let c = Client::start(two_types_two_zones()).await;
    let r = c
        .post(
            "/shares",
            json!({"share": {"size": 1, "share_proto": "NFS", "availability_zone": "zone-a"}}),
        )
        .await;
    let parent = r.body["share"]["id"].as_str().unwrap().to_owned();
    c.wait_for(&format!("/shares/{parent}"), "share", "status", "available")
        .await;
    let snap = snapshot_of(&c, &parent).await;
    let new = |extra: Value| {
        let mut share = json!({"size": 1, "share_proto": "NFS", "snapshot_id": snap});
        for (k, v) in extra.as_object().unwrap() {
            share[k] = v.clone();
        }
        json!({ "share": share })
    };
    let r = c.post("/shares", new(json!({"share_type": "other"}))).await;
    assert_eq!(r.status, 400, "another type: {:?}", r.body);
    let r = c
        .post("/shares", new(json!({"availability_zone": "zone-b"})))
        .await;
    assert_eq!(r.status, 400, "another zone: {:?}", r.body);
    let r = c
        .post(
            "/shares",
            new(json!({"share_type": "default", "availability_zone": "zone-a"})),
        )
        .await;
    assert_eq!(r.status, 200, "same type and zone: {:?}", r.body);
}

#[rstest]
#[case::below_min(1, "zone-a", 400)]
#[case::above_max(6, "zone-a", 400)]
#[case::zone_not_of_the_type(3, "zone-b", 400)]
#[case::fits(3, "zone-a", 200)]
#[tokio::test]
async fn type_extra_specs_limit_size_and_zone(
    #[case] size: u64,
    #[case] zone: &str,
    #[case] status: u16,
) {
    let c = Client::start(two_types_two_zones()).await;
    let r = c
        .post(
            "/shares",
            json!({"share": {"size": size, "share_proto": "NFS", "share_type": "limited", "availability_zone": zone}}),
        )
        .await;
    assert_eq!(r.status, status, "{:?}", r.body);
}

#[tokio::test]
async fn only_enabled_protocols_are_accepted() {
    let c = Client::start(CloudConfig::default()).await;
    let r = c
        .post(
            "/shares",
            json!({"share": {"size": 1, "share_proto": "CIFS"}}),
        )
        .await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    assert!(message(&r).contains("CIFS"), "{}", message(&r));
    let r = c
        .post(
            "/shares",
            json!({"share": {"size": 1, "share_proto": "cephfs"}}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
}

#[tokio::test]
async fn a_share_network_with_a_dhss_false_type_fails_later() {
    let mut config = CloudConfig::default();
    config.manila.share_networks = vec!["net".into()];
    let c = Client::start(config).await;
    let net = c.get("/share-networks").await.body["share_networks"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = c
        .post(
            "/shares",
            json!({"share": {"size": 1, "share_proto": "NFS", "share_network_id": net}}),
        )
        .await;
    assert_eq!(r.status, 200, "accepted as Manila does: {:?}", r.body);
    let id = r.body["share"]["id"].as_str().unwrap().to_owned();
    c.wait_for(&format!("/shares/{id}"), "share", "status", "error")
        .await;
    let messages = c.get(&format!("/messages?resource_id={id}")).await;
    assert_eq!(messages.body["messages"][0]["detail_id"], "003");
}

// ---- 5. update, type lookup, list filters ---------------------------------------------

#[tokio::test]
async fn update_takes_manilas_keys_only() {
    let c = Client::start(CloudConfig::default()).await;
    let id = c.available_share("before", 1).await;
    let path = format!("/shares/{id}");
    let r = c
        .call(
            Method::PUT,
            &path,
            Some(json!({"share": {"name": "ignored", "description": "ignored"}})),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["share"]["name"], "before", "Manila ignores `name`");
    assert_eq!(r.body["share"]["description"], Value::Null);
    let r = c
        .call(
            Method::PUT,
            &path,
            Some(json!({"share": {"display_name": "after", "display_description": "d", "is_public": "true"}})),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["share"]["name"], "after");
    assert_eq!(r.body["share"]["description"], "d");
    assert_eq!(r.body["share"]["is_public"], true);
    let r = c
        .call(
            Method::PUT,
            &path,
            Some(json!({"share": {"is_public": "maybe"}})),
        )
        .await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn share_types_are_looked_up_by_id() {
    let c = Client::start(CloudConfig::default()).await;
    let id = c.get("/types/default").await.body["share_type"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(c.get(&format!("/types/{id}")).await.status, 200);
    let gold = c
        .cloud
        .add_share_type(&ShareTypeSeed::named("gold"))
        .unwrap();
    assert_eq!(c.get("/types/gold").await.status, 404);
    assert_eq!(
        c.get("/types/gold/extra_specs").await.status,
        403,
        "admin only"
    );
    let c = c.admin().await;
    assert_eq!(c.get("/types/gold/extra_specs").await.status, 404);
    assert_eq!(c.get(&format!("/types/{gold}")).await.status, 200);
}

#[tokio::test]
async fn list_filters_are_honoured_or_refused() {
    let c = Client::start(CloudConfig::default()).await;
    let a = c.available_share("alpha", 1).await;
    let b = c.available_share("beta", 2).await;
    let r = c
        .call(
            Method::POST,
            &format!("/shares/{b}/metadata"),
            Some(json!({"metadata": {"team": "blue"}})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let ids = |r: &common::Resp| -> Vec<String> {
        r.body["shares"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let r = c.get("/shares?unknown_filter=1").await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    assert_eq!(c.get("/shares?sort_key=colour").await.status, 400);
    assert_eq!(c.get("/shares?sort_dir=up").await.status, 400);
    assert_eq!(c.get("/shares?limit=x").await.status, 400);
    assert_eq!(c.get("/snapshots?unknown_filter=1").await.status, 400);
    assert_eq!(ids(&c.get("/shares?name=alpha").await), [a.as_str()]);
    assert_eq!(
        ids(&c
            .get("/shares?metadata=%7B%27team%27%3A+%27blue%27%7D")
            .await),
        [b.as_str()]
    );
    assert_eq!(
        ids(&c.get("/shares?sort_key=size&sort_dir=asc").await),
        [a.as_str(), b.as_str()]
    );
    assert_eq!(
        ids(&c.get("/shares?sort_key=size&sort_dir=desc&limit=1").await),
        [b.as_str()]
    );
    assert_eq!(
        ids(&c.get("/shares?sort_key=name&sort_dir=asc&offset=1").await),
        [b.as_str()]
    );
    let exports = c.get(&format!("/shares/{a}/export_locations")).await;
    let location = &exports.body["export_locations"][0];
    let el_id = location["id"].as_str().unwrap();
    let el_path = location["path"].as_str().unwrap();
    assert_eq!(
        ids(&c.get(&format!("/shares?export_location_id={el_id}")).await),
        [a.as_str()]
    );
    let r = c
        .http
        .get(format!("{}/shares", c.cloud.manila_url()))
        .query(&[("export_location_path", el_path)])
        .header("X-Auth-Token", &c.token)
        .header("X-OpenStack-Manila-API-Version", "2.84")
        .send()
        .await
        .unwrap();
    assert_eq!(ids(&resp(r).await), [a.as_str()]);
    assert_eq!(
        ids(&c.get("/shares?status=error").await),
        Vec::<String>::new()
    );
}

// ---- 6. data copies run outside the state lock ----------------------------------------

#[tokio::test]
async fn the_api_answers_while_a_snapshot_is_copied() {
    let cloud = FakeCloud::start(CloudConfig::default()).await.unwrap();
    let c = Client::for_cloud(cloud).await;
    let id = c.available_share("data", 1).await;
    std::fs::write(c.cloud.share_dir(&id).join("file"), b"bytes").unwrap();
    let pause = c.cloud.pause_backend_copies();

    let snap = c
        .post("/snapshots", json!({"snapshot": {"share_id": id}}))
        .await;
    assert_eq!(snap.status, 202, "{:?}", snap.body);
    let snap = snap.body["snapshot"]["id"].as_str().unwrap().to_owned();
    assert!(
        pause.wait_started(1, Duration::from_secs(10)),
        "the copy started"
    );
    // The copy is held: the API still answers, and shows the snapshot still creating.
    let r = c.get(&format!("/snapshots/{snap}")).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["snapshot"]["status"], "creating");
    assert_eq!(c.get("/shares").await.status, 200);
    assert_eq!(
        pause.finished(),
        0,
        "the reads were answered during the copy"
    );

    pause.release();
    assert!(pause.wait_finished(1, Duration::from_secs(10)));
    c.wait_for(
        &format!("/snapshots/{snap}"),
        "snapshot",
        "status",
        "available",
    )
    .await;

    // A share from the snapshot: creating_from_snapshot while its copy is held.
    let pause = c.cloud.pause_backend_copies();
    let r = c
        .post(
            "/shares",
            json!({"share": {"size": 1, "share_proto": "NFS", "snapshot_id": snap}}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let restored = r.body["share"]["id"].as_str().unwrap().to_owned();
    assert!(pause.wait_started(1, Duration::from_secs(10)));
    let r = c.get(&format!("/shares/{restored}")).await;
    assert_eq!(r.body["share"]["status"], "creating_from_snapshot");
    assert_eq!(pause.finished(), 0);
    pause.release();
    c.wait_for(
        &format!("/shares/{restored}"),
        "share",
        "status",
        "available",
    )
    .await;
    assert_eq!(
        std::fs::read(c.cloud.share_dir(&restored).join("file")).unwrap(),
        b"bytes"
    );
}
