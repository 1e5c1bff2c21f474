//! Share groups (microversion 2.31, experimental until 2.55) and share group types: the
//! lifecycle, shares created in a group, and what Manila refuses (a share type the group does
//! not hold, an unknown or unavailable group, deleting a group that still has shares).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Client;
use fakes::CloudConfig;
use fakes::config::{ShareGroupSeed, ShareGroupTypeSeed, ShareTypeSeed};
use reqwest::Method;
use serde_json::json;

/// Types `default` and `other`; group type `gt` (default) holds `default` only; a seeded
/// group `seeded` of that type.
fn config() -> CloudConfig {
    let mut config = CloudConfig::default();
    config
        .manila
        .share_types
        .push(ShareTypeSeed::named("other"));
    config.manila.share_group_types = vec![ShareGroupTypeSeed {
        name: "gt".into(),
        share_types: vec!["default".into()],
        is_default: true,
        ..ShareGroupTypeSeed::default()
    }];
    config.manila.share_groups = vec![ShareGroupSeed {
        name: Some("seeded".into()),
        share_group_type: "gt".into(),
        ..ShareGroupSeed::default()
    }];
    config
}

async fn new_group(c: &Client, name: &str) -> String {
    let r = c
        .post("/share-groups", json!({"share_group": {"name": name}}))
        .await;
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.body["share_group"]["status"], "creating");
    r.body["share_group"]["id"].as_str().unwrap().to_owned()
}

fn share_in(group: &str, share_type: Option<&str>) -> serde_json::Value {
    let mut share =
        json!({"size": 1, "share_proto": "NFS", "name": "member", "share_group_id": group});
    if let Some(t) = share_type {
        share["share_type"] = json!(t);
    }
    json!({ "share": share })
}

#[tokio::test]
async fn share_group_lifecycle() {
    let mut c = Client::start(config()).await;
    let types = c.get("/share-group-types").await;
    assert_eq!(types.status, 200, "{}", types.body);
    let gt = &types.body["share_group_types"][0];
    assert_eq!(gt["name"], "gt");
    let default_type = c.get("/types/default").await.body["share_type"]["id"].clone();
    assert_eq!(gt["share_types"], json!([default_type]));
    let gt_id = gt["id"].as_str().unwrap().to_owned();
    assert_eq!(
        c.get(&format!("/share-group-types/{gt_id}")).await.body["share_group_type"]["name"],
        "gt"
    );

    let id = new_group(&c, "g1").await;
    let group = c.get(&format!("/share-groups/{id}")).await;
    assert_eq!(group.status, 200, "{}", group.body);
    assert_eq!(group.body["share_group"]["status"], "available");
    assert_eq!(
        group.body["share_group"]["share_group_type_id"],
        gt_id.as_str()
    );
    assert_eq!(
        group.body["share_group"]["share_types"],
        json!([default_type])
    );
    let listed = c.get("/share-groups/detail").await.body["share_groups"].clone();
    let names: Vec<_> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["seeded", "g1"]);
    assert_eq!(
        c.get("/share-groups?name=g1").await.body["share_groups"][0]["id"],
        id.as_str()
    );

    // A group type's share types bound the group's (given by id); an unknown group type is
    // 404, a malformed one or a field Manila does not know 400.
    let types = c.get("/types").await.body["share_types"].clone();
    let other = types
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "other")
        .unwrap()["id"]
        .clone();
    for bad in [
        json!({"share_types": [other]}),
        json!({"share_types": ["other"]}),
        json!({"share_group_type_id": "gt"}),
        json!({"share_proto": "NFS"}),
    ] {
        let r = c.post("/share-groups", json!({ "share_group": bad })).await;
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
    }
    let r = c
        .post(
            "/share-groups",
            json!({"share_group": {"share_group_type_id": "3f1d8a4e-0000-4000-8000-00000000dead"}}),
        )
        .await;
    assert_eq!(r.status, 404, "{}", r.body);

    assert_eq!(c.delete(&format!("/share-groups/{id}")).await.status, 202);
    assert_eq!(c.get(&format!("/share-groups/{id}")).await.status, 404);
    assert_eq!(c.delete(&format!("/share-groups/{id}")).await.status, 404);

    // Experimental before 2.55: only with the header; absent before 2.31.
    assert_eq!(
        c.call_at("2.54", Method::GET, "/share-groups", None)
            .await
            .status,
        404
    );
    let r = c
        .http
        .get(format!("{}/share-groups", c.cloud.manila_url()))
        .header("X-Auth-Token", &c.token)
        .header("X-OpenStack-Manila-API-Version", "2.54")
        .header("X-OpenStack-Manila-API-Experimental", "True")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        c.call_at("2.30", Method::GET, "/share-group-types", None)
            .await
            .status,
        404
    );

    // A reset goes back to the seeded group.
    let extra = new_group(&c, "g2").await;
    c.cloud.reset().unwrap();
    c.reauth().await;
    assert_eq!(c.get(&format!("/share-groups/{extra}")).await.status, 404);
    let listed = c.get("/share-groups").await.body["share_groups"].clone();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["name"], "seeded");
}

#[tokio::test]
async fn shares_join_a_group_of_their_type_and_keep_it_from_being_deleted() {
    let c = Client::start(config()).await;
    let group = new_group(&c, "g").await;

    let r = c.post("/shares", share_in(&group, None)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["share"]["share_group_id"], group.as_str());
    let share = r.body["share"]["id"].as_str().unwrap().to_owned();
    c.wait_for(&format!("/shares/{share}"), "share", "status", "available")
        .await;
    let members = c
        .get(&format!("/shares/detail?share_group_id={group}"))
        .await;
    assert_eq!(members.body["shares"].as_array().unwrap().len(), 1);
    assert_eq!(members.body["shares"][0]["id"], share.as_str());

    // A type the group does not hold: 400; no such group: 404; nothing created.
    let r = c.post("/shares", share_in(&group, Some("other"))).await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body["badRequest"]["message"]
            .as_str()
            .unwrap()
            .contains("not supported by the specified share group"),
        "{}",
        r.body
    );
    let r = c
        .post(
            "/shares",
            share_in("3f1d8a4e-0000-4000-8000-00000000dead", None),
        )
        .await;
    assert_eq!(r.status, 404, "{}", r.body);
    assert_eq!(c.cloud.leftovers().shares.len(), 1);

    // Deleting the group while it has shares: 409; once they are gone: 202.
    let r = c.delete(&format!("/share-groups/{group}")).await;
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!(
        c.get(&format!("/share-groups/{group}")).await.body["share_group"]["status"],
        "available"
    );
    c.delete(&format!("/shares/{share}")).await;
    c.wait_gone(&format!("/shares/{share}")).await;
    assert_eq!(
        c.delete(&format!("/share-groups/{group}")).await.status,
        202
    );
}

#[tokio::test]
async fn a_group_that_is_not_available_takes_no_shares() {
    let mut config = config();
    config.manila.share_groups.push(ShareGroupSeed {
        name: Some("broken".into()),
        share_group_type: "gt".into(),
        status: "error".into(),
        ..ShareGroupSeed::default()
    });
    let c = Client::start(config).await;
    let broken = c.get("/share-groups?name=broken").await.body["share_groups"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = c.post("/shares", share_in(&broken, None)).await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body["badRequest"]["message"]
            .as_str()
            .unwrap()
            .contains("status must be available"),
        "{}",
        r.body
    );
    assert!(c.cloud.leftovers().shares.is_empty());
    // A group in error can be deleted.
    assert_eq!(
        c.delete(&format!("/share-groups/{broken}")).await.status,
        202
    );
}
