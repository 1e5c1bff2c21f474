//! Keystone scopes beyond the project: trust-scoped tokens for the account's trustee,
//! domain-scoped tokens, the token method, and a catalog with several regions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{password_auth, resp};
use fakes::config::{CatalogSeed, EndpointUrl};
use fakes::{CloudConfig, FakeCloud};
use rstest::rstest;
use serde_json::{Value, json};

const TRUST_ID: &str = "7d6c5b4a39284f1e8d7c6b5a49382716";
const TRUSTEE_ID: &str = "2b3c4d5e6f708192a3b4c5d6e7f80912";
const PROJECT_ID: &str = "9a8b7c6d5e4f43a2b1c0d9e8f7a6b5c4";

async fn auth(cloud: &FakeCloud, body: Value) -> common::Resp {
    resp(
        reqwest::Client::new()
            .post(format!("{}/auth/tokens", cloud.auth_url()))
            .json(&body)
            .send()
            .await
            .unwrap(),
    )
    .await
}

fn token_of(r: &common::Resp) -> String {
    r.headers["x-subject-token"].to_str().unwrap().to_owned()
}

/// `GET /shares` with `token`: the status Manila answers.
async fn manila_status(cloud: &FakeCloud, token: &str) -> u16 {
    reqwest::Client::new()
        .get(format!("{}/shares", cloud.manila_url()))
        .header("X-Auth-Token", token)
        .header("X-OpenStack-Manila-API-Version", "2.37")
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

fn trust_auth(user: Value, trust_id: &str) -> Value {
    json!({"auth": {
        "identity": {"methods": ["password"], "password": {"user": user}},
        "scope": {"OS-TRUST:trust": {"id": trust_id}},
    }})
}

#[rstest]
#[case::trustee_by_id(json!({"id": TRUSTEE_ID, "password": "fake-trustee-password"}))]
#[case::trustee_by_name(json!({"name": "csi-trustee", "domain": {"name": "Default"}, "password": "fake-trustee-password"}))]
#[tokio::test]
async fn the_trustee_gets_a_trust_scoped_token_for_the_trustors_project(#[case] user: Value) {
    let cloud = FakeCloud::start(CloudConfig::default()).await.unwrap();
    let r = auth(&cloud, trust_auth(user, TRUST_ID)).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let token = &r.body["token"];
    assert_eq!(token["user"]["id"], TRUSTEE_ID);
    assert_eq!(token["project"]["id"], PROJECT_ID);
    assert_eq!(token["OS-TRUST:trust"]["id"], TRUST_ID);
    assert_eq!(token["OS-TRUST:trust"]["trustee_user"]["id"], TRUSTEE_ID);
    assert!(!token["catalog"].as_array().unwrap().is_empty());
    assert_eq!(manila_status(&cloud, &token_of(&r)).await, 200);
}

#[rstest]
#[case::wrong_trustee_password(
    trust_auth(json!({"id": TRUSTEE_ID, "password": "nope"}), TRUST_ID), 401
)]
#[case::trustor_is_not_the_trustee(
    trust_auth(json!({"name": "demo", "domain": {"name": "Default"}, "password": "fake-password"}), TRUST_ID), 401
)]
#[case::unknown_trust(
    trust_auth(json!({"id": TRUSTEE_ID, "password": "fake-trustee-password"}), "0000"), 404
)]
#[case::trustee_without_trust_scope(
    json!({"auth": {"identity": {"methods": ["password"], "password": {"user":
        {"id": TRUSTEE_ID, "password": "fake-trustee-password"}}}}}), 401
)]
#[tokio::test]
async fn trust_auth_is_refused_unless_trustee_and_trust_match(
    #[case] body: Value,
    #[case] status: u16,
) {
    let cloud = FakeCloud::start(CloudConfig::default()).await.unwrap();
    let r = auth(&cloud, body).await;
    assert_eq!(r.status, status, "{:?}", r.body);
    assert_eq!(r.body["error"]["code"], status);
}

#[tokio::test]
async fn a_seed_without_trustee_refuses_trust_auth() {
    let mut config = CloudConfig::default();
    config.account.trustee = None;
    let cloud = FakeCloud::start(config).await.unwrap();
    let r = auth(
        &cloud,
        trust_auth(
            json!({"id": TRUSTEE_ID, "password": "fake-trustee-password"}),
            TRUST_ID,
        ),
    )
    .await;
    assert_eq!(r.status, 401);
}

#[rstest]
#[case::by_id(json!({"id": "default"}))]
#[case::by_name(json!({"name": "Default"}))]
#[tokio::test]
async fn domain_scope_gives_a_domain_token_that_manila_refuses(#[case] domain: Value) {
    let cloud = FakeCloud::start(CloudConfig::default()).await.unwrap();
    let mut body = password_auth();
    body["auth"]["scope"] = json!({"domain": domain});
    let r = auth(&cloud, body).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let token = &r.body["token"];
    assert_eq!(token["domain"]["id"], "default");
    assert!(token.get("project").is_none(), "{token}");
    assert!(!token["catalog"].as_array().unwrap().is_empty());
    // Manila works on a project: a domain token is not enough.
    assert_eq!(manila_status(&cloud, &token_of(&r)).await, 401);
    let mut body = password_auth();
    body["auth"]["scope"] = json!({"domain": {"name": "Other"}});
    assert_eq!(auth(&cloud, body).await.status, 401);
}

fn token_auth(id: &str, scope: Option<Value>) -> Value {
    let mut body = json!({"auth": {"identity": {"methods": ["token"], "token": {"id": id}}}});
    if let Some(scope) = scope {
        body["auth"]["scope"] = scope;
    }
    body
}

#[tokio::test]
async fn the_token_method_exchanges_a_valid_token() {
    let cloud = FakeCloud::start(CloudConfig::default()).await.unwrap();
    let first = auth(&cloud, password_auth()).await;
    let old = token_of(&first);
    for scope in [None, Some(json!({"project": {"id": PROJECT_ID}}))] {
        let r = auth(&cloud, token_auth(&old, scope)).await;
        assert_eq!(r.status, 201, "{:?}", r.body);
        assert_eq!(r.body["token"]["methods"], json!(["token"]));
        assert_eq!(r.body["token"]["project"]["id"], PROJECT_ID);
        assert!(
            r.body["token"]["expires_at"].as_str().unwrap()
                <= first.body["token"]["expires_at"].as_str().unwrap(),
            "a token from a token outlives it"
        );
        let new = token_of(&r);
        assert_ne!(new, old);
        assert_eq!(manila_status(&cloud, &new).await, 200);
    }
    let r = auth(
        &cloud,
        token_auth(&old, Some(json!({"project": {"id": "0000"}}))),
    )
    .await;
    assert_eq!(r.status, 401);
    assert_eq!(
        auth(&cloud, token_auth("gAAAAunknown", None)).await.status,
        401
    );
    cloud.expire_tokens();
    assert_eq!(auth(&cloud, token_auth(&old, None)).await.status, 401);
    let r = auth(
        &cloud,
        json!({"auth": {"identity": {"methods": ["token"]}}}),
    )
    .await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn the_catalog_lists_every_region_and_interface_with_overrides() {
    let config = CloudConfig {
        catalog: CatalogSeed {
            extra_regions: vec!["RegionTwo".into()],
            manila_endpoints: vec![EndpointUrl {
                region: "RegionOne".into(),
                interface: "public".into(),
                url: "http://127.0.0.1:9/share/v2".into(),
            }],
        },
        ..CloudConfig::default()
    };
    let cloud = FakeCloud::start(config).await.unwrap();
    let r = auth(&cloud, password_auth()).await;
    assert_eq!(r.status, 201);
    let catalog = r.body["token"]["catalog"].as_array().unwrap();
    let mut ids = std::collections::BTreeSet::new();
    for service in catalog {
        let endpoints: Vec<(String, String, String)> = service["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                assert!(ids.insert(e["id"].as_str().unwrap().to_owned()), "{e}");
                assert_eq!(e["region"], e["region_id"]);
                (
                    e["region"].as_str().unwrap().to_owned(),
                    e["interface"].as_str().unwrap().to_owned(),
                    e["url"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        let shape: Vec<(&str, &str)> = endpoints
            .iter()
            .map(|(r, i, _)| (r.as_str(), i.as_str()))
            .collect();
        assert_eq!(
            shape,
            [
                ("RegionOne", "public"),
                ("RegionOne", "internal"),
                ("RegionOne", "admin"),
                ("RegionTwo", "public"),
                ("RegionTwo", "internal"),
                ("RegionTwo", "admin"),
            ]
        );
        for (region, interface, url) in &endpoints {
            let expected = match service["type"].as_str().unwrap() {
                "identity" => format!("{}/identity", cloud.base_url()),
                _ if (region.as_str(), interface.as_str()) == ("RegionOne", "public") => {
                    "http://127.0.0.1:9/share/v2".into()
                }
                _ => cloud.manila_url(),
            };
            assert_eq!(url, &expected, "{region}/{interface}");
        }
    }
    assert_eq!(catalog.len(), 3);
}
