//! Manila API tests: versions and microversions, share lifecycle, export locations,
//! extend/shrink, metadata, share types, zones, networks, quotas, and bad input.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Client, resp};
use fakes::{CloudConfig, Delays, FakeCloud, ShareTypeSeed};
use reqwest::Method;
use rstest::rstest;
use serde_json::{Value, json};

#[tokio::test]
async fn version_documents_announce_the_range() {
    let cloud = FakeCloud::start(CloudConfig::default()).await.unwrap();
    let root = resp(
        reqwest::get(format!("{}/share/", cloud.base_url()))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        root.status, 300,
        "the unversioned root is Multiple Choices, as in Manila"
    );
    let v2 = resp(
        reqwest::get(format!("{}/", cloud.manila_url()))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(v2.status, 200);
    insta::assert_json_snapshot!("manila_v2_versions", v2.body, {".versions[0].links[1].href" => "[url]"});
}

#[rstest]
#[case::too_high(
    "2.96",
    406,
    "computeFault",
    "Version 2.96 is not supported by the API. Minimum is 2.0 and maximum is 2.95."
)]
#[case::too_low(
    "1.9",
    406,
    "computeFault",
    "Version 1.9 is not supported by the API. Minimum is 2.0 and maximum is 2.95."
)]
#[case::latest_is_not_a_version(
    "latest",
    400,
    "badRequest",
    "API Version String latest is of invalid format. Must be of format MajorNum.MinorNum."
)]
#[case::leading_zero_major(
    "02.7",
    400,
    "badRequest",
    "API Version String 02.7 is of invalid format. Must be of format MajorNum.MinorNum."
)]
#[case::malformed(
    "2.x",
    400,
    "badRequest",
    "API Version String 2.x is of invalid format. Must be of format MajorNum.MinorNum."
)]
#[tokio::test]
async fn bad_microversions(
    #[case] version: &str,
    #[case] status: u16,
    #[case] key: &str,
    #[case] message: &str,
) {
    let c = Client::start(CloudConfig::default()).await;
    let r = c.call_at(version, Method::GET, "/shares", None).await;
    assert_eq!(r.status, status);
    assert_eq!(r.body, json!({key: {"code": status, "message": message}}));
}

#[tokio::test]
async fn microversion_is_echoed_in_manilas_header_only() {
    let c = Client::start(CloudConfig::default()).await;
    let r = c.call_at("2.45", Method::GET, "/shares", None).await;
    assert_eq!(r.headers["x-openstack-manila-api-version"], "2.45");
    assert_eq!(r.headers["vary"], "X-OpenStack-Manila-API-Version");
    assert!(
        !r.headers.contains_key("openstack-api-version"),
        "Manila does not send the generic header"
    );
    // The generic header is not read by Manila: alone, it leaves the default 2.0.
    let r = resp(
        c.http
            .get(format!("{}/shares", c.cloud.manila_url()))
            .header("X-Auth-Token", &c.token)
            .header("OpenStack-API-Version", "shared-file-system 2.7")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(r.headers["x-openstack-manila-api-version"], "2.0");
    // No header: 2.0.
    let r = resp(
        c.http
            .get(format!("{}/shares", c.cloud.manila_url()))
            .header("X-Auth-Token", &c.token)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(r.headers["x-openstack-manila-api-version"], "2.0");
}

#[tokio::test]
async fn urls_with_the_project_id_work_too() {
    let c = Client::start(CloudConfig::default()).await;
    let id = c.create_share("p", 1).await;
    let r = c
        .get(&format!("/9a8b7c6d5e4f43a2b1c0d9e8f7a6b5c4/shares/{id}"))
        .await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn share_lifecycle_with_zero_delay() {
    // As the administrator, who sees the admin-only fields and locations too.
    let mut config = CloudConfig::default();
    config.manila.delays = Delays::none();
    let c = Client::start(config).await.admin().await;
    let r = c
        .post("/shares", json!({"share": {"name": "pvc-1", "size": 2, "share_proto": "nfs", "metadata": {"k": "v"}}}))
        .await;
    assert_eq!(r.status, 200);
    insta::assert_json_snapshot!("share_created", r.body, {
        ".share.id" => "[id]", ".share.share_type" => "[type-id]",
        ".share.created_at" => "[time]", ".share.links[].href" => "[url]",
    });
    let id = r.body["share"]["id"].as_str().unwrap().to_owned();
    // The next read sees it available.
    let r = c.get(&format!("/shares/{id}")).await;
    assert_eq!(r.body["share"]["status"], "available");
    assert!(
        c.cloud.share_dir(&id).is_dir(),
        "the share is backed by a directory"
    );

    let el = c.get(&format!("/shares/{id}/export_locations")).await;
    let locations = el.body["export_locations"].as_array().unwrap();
    assert_eq!(locations.len(), 2);
    let dir = c.cloud.share_dir(&id).display().to_string();
    assert_eq!(locations[0]["path"], format!("127.0.0.1:{dir}"));
    assert_eq!(locations[0]["preferred"], true);
    assert_eq!(locations[1]["is_admin_only"], true);

    let r = c.delete(&format!("/shares/{id}")).await;
    assert_eq!(r.status, 202);
    let r = c.get(&format!("/shares/{id}")).await;
    assert_eq!(r.status, 404);
    assert_eq!(
        r.body,
        json!({"itemNotFound": {"code": 404, "message": format!("Share {id} could not be found.")}})
    );
    assert!(!c.cloud.share_dir(&id).exists());
    assert!(c.cloud.leftovers().is_empty());
}

#[tokio::test]
async fn with_a_delay_shares_stay_creating_then_deleting() {
    let mut config = CloudConfig::default();
    config.manila.delays = Delays::uniform(300);
    let c = Client::start(config).await;
    let id = c.create_share("slow", 1).await;
    let r = c.get(&format!("/shares/{id}")).await;
    assert_eq!(r.body["share"]["status"], "creating");
    assert_eq!(
        c.get(&format!("/shares/{id}/export_locations")).await.body["export_locations"],
        json!([])
    );
    c.wait_for(&format!("/shares/{id}"), "share", "status", "available")
        .await;
    c.delete(&format!("/shares/{id}")).await;
    assert_eq!(
        c.get(&format!("/shares/{id}")).await.body["share"]["status"],
        "deleting"
    );
    let r = c.delete(&format!("/shares/{id}")).await;
    assert_eq!(
        r.status, 403,
        "deleting twice is refused while deleting: {:?}",
        r.body
    );
    c.wait_gone(&format!("/shares/{id}")).await;
}

#[tokio::test]
async fn non_admins_do_not_see_admin_only_locations() {
    // The seed's account is a member by default.
    let c = Client::start(CloudConfig::default()).await;
    let id = c.available_share("x", 1).await;
    let el = c.get(&format!("/shares/{id}/export_locations")).await;
    assert_eq!(el.body["export_locations"].as_array().unwrap().len(), 1);
    assert!(
        el.body["export_locations"][0]
            .get("is_admin_only")
            .is_none()
    );
}

#[tokio::test]
async fn detail_filters_by_name_and_names_are_not_unique() {
    let c = Client::start(CloudConfig::default()).await;
    let a = c.create_share("same", 1).await;
    let b = c.create_share("same", 1).await;
    c.create_share("other", 1).await;
    let r = c.get("/shares/detail?name=same").await;
    let ids: Vec<&str> = r.body["shares"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [b.as_str(), a.as_str()], "newest first");
    assert_eq!(
        c.get("/shares").await.body["shares"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
}

#[tokio::test]
async fn extend_and_shrink() {
    let mut config = CloudConfig::default();
    config.manila.delays = Delays::none();
    let c = Client::start(config).await;
    let id = c.available_share("grow", 1).await;
    let action = format!("/shares/{id}/action");
    assert_eq!(
        c.post(&action, json!({"extend": {"new_size": 3}}))
            .await
            .status,
        202
    );
    assert_eq!(
        c.get(&format!("/shares/{id}")).await.body["share"]["status"],
        "available"
    );
    assert_eq!(
        c.get(&format!("/shares/{id}")).await.body["share"]["size"],
        3
    );
    let r = c.post(&action, json!({"extend": {"new_size": 2}})).await;
    assert_eq!(r.status, 400);
    assert!(
        r.body["badRequest"]["message"]
            .as_str()
            .unwrap()
            .contains("must be greater than current size")
    );
    assert_eq!(
        c.post(&action, json!({"shrink": {"new_size": 2}}))
            .await
            .status,
        202
    );
    assert_eq!(
        c.get(&format!("/shares/{id}")).await.body["share"]["size"],
        2
    );
}

#[rstest]
#[case::prefixed_below_2_7("2.6", "os-extend", 202)]
#[case::unprefixed_below_2_7("2.6", "extend", 400)]
#[case::unprefixed_from_2_7("2.7", "extend", 202)]
#[case::prefixed_from_2_7("2.7", "os-extend", 400)]
#[tokio::test]
async fn action_prefixes_follow_the_microversion(
    #[case] version: &str,
    #[case] key: &str,
    #[case] status: u16,
) {
    let c = Client::start(CloudConfig::default()).await;
    let id = c.available_share("v", 1).await;
    let r = c
        .call_at(
            version,
            Method::POST,
            &format!("/shares/{id}/action"),
            Some(json!({key: {"new_size": 2}})),
        )
        .await;
    assert_eq!(r.status, status, "{:?}", r.body);
}

#[rstest]
#[case::malformed_json(None, 400, "badRequest")]
#[case::no_share_key(Some(json!({"volume": {}})), 422, "computeFault")]
#[case::zero_size(Some(json!({"share": {"size": 0, "share_proto": "NFS"}})), 400, "badRequest")]
#[case::size_not_a_number(Some(json!({"share": {"size": "big", "share_proto": "NFS"}})), 400, "badRequest")]
#[case::bad_protocol(Some(json!({"share": {"size": 1, "share_proto": "FTP"}})), 400, "badRequest")]
#[case::unknown_share_type(Some(json!({"share": {"size": 1, "share_proto": "NFS", "share_type": "gold"}})), 404, "itemNotFound")]
#[case::unknown_zone(Some(json!({"share": {"size": 1, "share_proto": "NFS", "availability_zone": "mars"}})), 404, "itemNotFound")]
#[case::unknown_snapshot(Some(json!({"share": {"size": 1, "share_proto": "NFS", "snapshot_id": "nope"}})), 404, "itemNotFound")]
#[case::metadata_not_strings(Some(json!({"share": {"size": 1, "share_proto": "NFS", "metadata": {"a": 1}}})), 400, "badRequest")]
#[tokio::test]
async fn bad_share_creates(#[case] body: Option<Value>, #[case] status: u16, #[case] key: &str) {
    let c = Client::start(CloudConfig::default()).await;
    let r = match body {
        Some(body) => c.post("/shares", body).await,
        None => {
            resp(
                c.http
                    .post(format!("{}/shares", c.cloud.manila_url()))
                    .header("X-Auth-Token", &c.token)
                    .header("Content-Type", "application/json")
                    .body("{\"share\": ")
                    .send()
                    .await
                    .unwrap(),
            )
            .await
        }
    };
    assert_eq!(r.status, status, "{:?}", r.body);
    assert_eq!(r.body[key]["code"], status, "{:?}", r.body);
    assert!(c.cloud.leftovers().is_empty());
}

#[tokio::test]
async fn unknown_share_type_message_names_it() {
    let c = Client::start(CloudConfig::default()).await;
    let r = c
        .post(
            "/shares",
            json!({"share": {"size": 1, "share_proto": "NFS", "share_type": "gold"}}),
        )
        .await;
    assert_eq!(
        r.body["itemNotFound"]["message"],
        "Share type with name gold could not be found."
    );
}

#[tokio::test]
async fn dhss_types_need_a_share_network() {
    let mut config = CloudConfig::default();
    let mut dhss = ShareTypeSeed::named("dhss");
    dhss.driver_handles_share_servers = true;
    config.manila.share_types.push(dhss);
    config.manila.share_networks = vec!["net1".into()];
    let c = Client::start(config).await;
    let r = c
        .post(
            "/shares",
            json!({"share": {"size": 1, "share_proto": "NFS", "share_type": "dhss"}}),
        )
        .await;
    assert_eq!(r.status, 400);
    let nets = c.get("/share-networks").await;
    let net = nets.body["share_networks"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = c
        .post("/shares", json!({"share": {"size": 1, "share_proto": "NFS", "share_type": "dhss", "share_network_id": net}}))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(
        c.delete(&format!("/share-networks/{net}")).await.status,
        409
    );
}

#[tokio::test]
async fn quotas_are_enforced_with_413() {
    let mut config = CloudConfig::default();
    config.manila.quotas.gigabytes = 5;
    let c = Client::start(config).await;
    c.create_share("a", 4).await;
    let r = c
        .post(
            "/shares",
            json!({"share": {"size": 2, "share_proto": "NFS"}}),
        )
        .await;
    assert_eq!(r.status, 413);
    assert!(
        r.body["overLimit"]["message"]
            .as_str()
            .unwrap()
            .contains("gigabytes quota")
    );
    let q = c
        .get("/quota-sets/9a8b7c6d5e4f43a2b1c0d9e8f7a6b5c4/detail")
        .await;
    assert_eq!(
        q.body["quota_set"]["gigabytes"],
        json!({"limit": 5, "in_use": 4, "reserved": 0})
    );
}

#[tokio::test]
async fn metadata_set_get_delete() {
    let c = Client::start(CloudConfig::default()).await;
    let id = c.available_share("m", 1).await;
    let path = format!("/shares/{id}/metadata");
    let r = c
        .post(&path, json!({"metadata": {"a": "1", "b": "2"}}))
        .await;
    assert_eq!(r.body["metadata"], json!({"a": "1", "b": "2"}));
    assert_eq!(
        c.get(&format!("{path}/a")).await.body,
        json!({"meta": {"a": "1"}})
    );
    assert_eq!(c.delete(&format!("{path}/a")).await.status, 200);
    assert_eq!(c.get(&path).await.body["metadata"], json!({"b": "2"}));
    assert_eq!(c.get(&format!("{path}/a")).await.status, 404);
}

#[tokio::test]
async fn share_types_list_default_and_runtime_changes() {
    let c = Client::start(CloudConfig::default()).await;
    let r = c.get("/types").await;
    assert_eq!(r.body["share_types"], r.body["volume_types"]);
    insta::assert_json_snapshot!("share_types", r.body["share_types"], {"[].id" => "[id]"});
    let mut gold = ShareTypeSeed::named("gold");
    gold.snapshot_support = false;
    let gold_id = c.cloud.add_share_type(&gold).unwrap();
    assert_eq!(
        c.get("/types").await.body["share_types"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    // Extra specs: the member sees the tenant-visible ones in the type, the whole list is
    // for administrators.
    let path = format!("/types/{gold_id}/extra_specs");
    assert_eq!(c.get(&path).await.status, 403);
    let mut c = c;
    c.sign_in_as_admin().await;
    assert_eq!(
        c.get(&path).await.body["extra_specs"]["snapshot_support"],
        "False"
    );
    c.reauth().await;
    c.cloud.remove_share_type("default").unwrap();
    assert_eq!(c.get("/types/default").await.status, 404);
    let r = c
        .post(
            "/shares",
            json!({"share": {"size": 1, "share_proto": "NFS"}}),
        )
        .await;
    assert_eq!(r.status, 400, "no type and no default: {:?}", r.body);
}

#[tokio::test]
async fn forbidden_types_answer_403() {
    let mut config = CloudConfig::default();
    config.manila.types_forbidden = true;
    let c = Client::start(config).await;
    let r = c.get("/types").await;
    assert_eq!(r.status, 403);
    assert_eq!(
        r.body,
        json!({"forbidden": {"code": 403, "message": "Policy doesn't allow share_type:index to be performed."}})
    );
}

#[rstest]
#[case("2.6", "/os-availability-zone", 200)]
#[case("2.6", "/availability-zones", 404)]
#[case("2.7", "/availability-zones", 200)]
#[case("2.36", "/messages", 404)]
#[case("2.44", "/share-access-rules?share_id=x", 404)]
#[tokio::test]
async fn resources_exist_from_their_microversion(
    #[case] version: &str,
    #[case] path: &str,
    #[case] status: u16,
) {
    let c = Client::start(CloudConfig::default()).await;
    assert_eq!(
        c.call_at(version, Method::GET, path, None).await.status,
        status
    );
}

#[tokio::test]
async fn zones_from_the_seed() {
    let mut config = CloudConfig::default();
    config.manila.availability_zones = vec!["az1".into(), "az2".into()];
    let c = Client::start(config).await;
    let r = c.get("/availability-zones").await;
    let names: Vec<&str> = r.body["availability_zones"]
        .as_array()
        .unwrap()
        .iter()
        .map(|z| z["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["az1", "az2"]);
    let id = c.create_share("z", 1).await;
    assert_eq!(
        c.get(&format!("/shares/{id}")).await.body["share"]["availability_zone"],
        "az1"
    );
}

#[tokio::test]
async fn admins_create_and_delete_types_through_the_api() {
    let c = Client::start(CloudConfig::default()).await;
    let silver = json!({"share_type": {"name": "silver", "extra_specs": {"driver_handles_share_servers": "false", "snapshot_support": "True", "thin": "yes"}}});
    assert_eq!(
        c.post("/types", silver.clone()).await.status,
        403,
        "a member may not"
    );
    let c = c.admin().await;
    let r = c.post("/types", silver).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let id = r.body["share_type"]["id"].as_str().unwrap().to_owned();
    assert_eq!(r.body["share_type"]["extra_specs"]["thin"], "yes");
    assert_eq!(
        r.body["share_type"]["extra_specs"]["create_share_from_snapshot_support"],
        "False"
    );
    let r = c.post("/types", json!({"share_type": {"name": "silver", "extra_specs": {"driver_handles_share_servers": false}}})).await;
    assert_eq!(r.status, 409);
    let r = c
        .post(
            "/types",
            json!({"share_type": {"name": "bronze", "extra_specs": {}}}),
        )
        .await;
    assert_eq!(
        r.status, 400,
        "driver_handles_share_servers is required: {:?}",
        r.body
    );
    let share = c
        .post(
            "/shares",
            json!({"share": {"size": 1, "share_proto": "NFS", "share_type": "silver"}}),
        )
        .await;
    let share = share.body["share"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        c.delete(&format!("/types/{id}")).await.status,
        400,
        "in use"
    );
    c.wait_for(&format!("/shares/{share}"), "share", "status", "available")
        .await;
    c.delete(&format!("/shares/{share}")).await;
    c.wait_gone(&format!("/shares/{share}")).await;
    assert_eq!(c.delete(&format!("/types/{id}")).await.status, 202);
    assert_eq!(
        c.get("/types").await.body["share_types"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}
