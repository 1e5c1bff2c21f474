//! Keystone v3 API tests: discovery, the authentication methods, bad credentials and
//! bad input, token validation and expiry, the catalog with and without Manila.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Client, resp};
use fakes::{CloudConfig, FakeCloud};
use rstest::rstest;
use serde_json::{Value, json};

async fn auth(cloud: &FakeCloud, body: Value) -> common::Resp {
    let http = reqwest::Client::new();
    resp(
        http.post(format!("{}/auth/tokens", cloud.auth_url()))
            .json(&body)
            .send()
            .await
            .unwrap(),
    )
    .await
}

fn password(user: Value, scope: Option<Value>) -> Value {
    let mut body =
        json!({"auth": {"identity": {"methods": ["password"], "password": {"user": user}}}});
    if let Some(scope) = scope {
        body["auth"]["scope"] = scope;
    }
    body
}

const USER_ID: &str = "4f1b2c3d5e6f47a8b9c0d1e2f3a4b5c6";
const PROJECT_ID: &str = "9a8b7c6d5e4f43a2b1c0d9e8f7a6b5c4";

#[rstest]
#[case::user_name_project_name(
    json!({"name": "demo", "domain": {"name": "Default"}, "password": "fake-password"}),
    json!({"project": {"name": "demo", "domain": {"name": "Default"}}})
)]
#[case::user_id_project_id(
    json!({"id": USER_ID, "password": "fake-password"}),
    json!({"project": {"id": PROJECT_ID}})
)]
#[case::domain_ids(
    json!({"name": "demo", "domain": {"id": "default"}, "password": "fake-password"}),
    json!({"project": {"name": "demo", "domain": {"id": "default"}}})
)]
#[tokio::test]
async fn password_auth_issues_a_scoped_token_with_catalog(
    #[case] user: Value,
    #[case] scope: Value,
) {
    let cloud = FakeCloud::start(CloudConfig::default()).await.unwrap();
    let r = auth(&cloud, password(user, Some(scope))).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert!(
        r.headers["x-subject-token"]
            .to_str()
            .unwrap()
            .starts_with("gAAAA")
    );
    let token = &r.body["token"];
    assert_eq!(token["project"]["id"], PROJECT_ID);
    assert_eq!(token["methods"], json!(["password"]));
    let types: Vec<&str> = token["catalog"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["identity", "shared-file-system", "sharev2"]);
    let manila = &token["catalog"][1]["endpoints"];
    let interfaces: Vec<&str> = manila
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["interface"].as_str().unwrap())
        .collect();
    assert_eq!(interfaces, ["public", "internal", "admin"]);
    assert_eq!(manila[0]["url"], cloud.manila_url());
    assert_eq!(manila[0]["region"], "RegionOne");
}

#[rstest]
#[case::by_id(json!({"id": "0e1d2c3b4a5948e7a6b5c4d3e2f1a0b9", "secret": "fake-app-cred-secret"}))]
#[case::by_name_and_user(json!({"name": "csi", "user": {"name": "demo", "domain": {"name": "Default"}}, "secret": "fake-app-cred-secret"}))]
#[tokio::test]
async fn application_credentials_authenticate(#[case] cred: Value) {
    let cloud = FakeCloud::start(CloudConfig::default()).await.unwrap();
    let body = json!({"auth": {"identity": {"methods": ["application_credential"], "application_credential": cred}}});
    let r = auth(&cloud, body).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(r.body["token"]["application_credential"]["name"], "csi");
    assert_eq!(r.body["token"]["project"]["name"], "demo");
}

#[rstest]
#[case::wrong_password(password(json!({"name": "demo", "domain": {"name": "Default"}, "password": "nope"}), None))]
#[case::wrong_domain(password(json!({"name": "demo", "domain": {"name": "Other"}, "password": "fake-password"}), None))]
#[case::wrong_project(password(
    json!({"name": "demo", "domain": {"name": "Default"}, "password": "fake-password"}),
    Some(json!({"project": {"id": "0000"}}))
))]
#[case::wrong_app_cred_secret(json!({"auth": {"identity": {"methods": ["application_credential"],
    "application_credential": {"id": "0e1d2c3b4a5948e7a6b5c4d3e2f1a0b9", "secret": "nope"}}}}))]
#[case::unknown_method(json!({"auth": {"identity": {"methods": ["totp"]}}}))]
#[tokio::test]
async fn wrong_credentials_are_401_with_keystone_body(#[case] body: Value) {
    let cloud = FakeCloud::start(CloudConfig::default()).await.unwrap();
    let r = auth(&cloud, body).await;
    assert_eq!(r.status, 401);
    assert_eq!(
        r.body,
        json!({"error": {"code": 401, "title": "Unauthorized", "message": "The request you have made requires authentication."}})
    );
}

#[tokio::test]
async fn malformed_auth_bodies_are_400() {
    let cloud = FakeCloud::start(CloudConfig::default()).await.unwrap();
    let http = reqwest::Client::new();
    let r = resp(
        http.post(format!("{}/auth/tokens", cloud.auth_url()))
            .body("{not json")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body["error"]["title"], "Bad Request");
    let r = auth(&cloud, json!({"auth": {}})).await;
    assert_eq!(r.status, 400);
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("'identity' is a required property")
    );
}

#[tokio::test]
async fn version_documents() {
    let cloud = FakeCloud::start(CloudConfig::default()).await.unwrap();
    let http = reqwest::Client::new();
    let root = resp(
        http.get(format!("{}/identity", cloud.base_url()))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(root.status, 300);
    assert_eq!(root.body["versions"]["values"][0]["id"], "v3.14");
    let v3 = resp(http.get(cloud.auth_url()).send().await.unwrap()).await;
    assert_eq!(v3.status, 200);
    insta::assert_json_snapshot!("keystone_v3_version", v3.body, {".version.links[0].href" => "[url]"});
}

#[tokio::test]
async fn token_body_shape() {
    let cloud = FakeCloud::start(CloudConfig::default()).await.unwrap();
    let r = auth(&cloud, common::password_auth()).await;
    insta::assert_json_snapshot!("keystone_token", r.body, {
        ".token.issued_at" => "[time]", ".token.expires_at" => "[time]", ".token.audit_ids[0]" => "[audit]",
        ".token.catalog[].endpoints[].id" => "[id]", ".token.catalog[].endpoints[].url" => "[url]",
    });
}

#[tokio::test]
async fn tokens_validate_and_expired_tokens_are_refused_until_reauth() {
    let mut c = Client::start(CloudConfig::default()).await;
    // Validation: GET /v3/auth/tokens with the token as both caller and subject.
    let r = resp(
        c.http
            .get(format!("{}/auth/tokens", c.cloud.auth_url()))
            .header("X-Auth-Token", &c.token)
            .header("X-Subject-Token", &c.token)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(c.get("/shares").await.status, 200);
    c.cloud.expire_tokens();
    let r = c.get("/shares").await;
    assert_eq!(r.status, 401);
    assert_eq!(r.body["error"]["title"], "Unauthorized");
    assert!(
        r.headers["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Keystone uri=")
    );
    c.reauth().await;
    assert_eq!(c.get("/shares").await.status, 200);
}

#[tokio::test]
async fn token_lifetime_is_configurable() {
    let config = CloudConfig {
        token_lifetime_secs: 90,
        ..CloudConfig::default()
    };
    let cloud = FakeCloud::start(config).await.unwrap();
    let r = auth(&cloud, common::password_auth()).await;
    let parse = |k: &str| {
        chrono::DateTime::parse_from_rfc3339(r.body["token"][k].as_str().unwrap()).unwrap()
    };
    assert_eq!((parse("expires_at") - parse("issued_at")).num_seconds(), 90);
}

#[rstest]
#[case::missing(None)]
#[case::unknown(Some("gAAAAnot-a-token"))]
#[tokio::test]
async fn manila_refuses_missing_or_unknown_tokens(#[case] token: Option<&str>) {
    let cloud = FakeCloud::start(CloudConfig::default()).await.unwrap();
    let mut req = reqwest::Client::new().get(format!("{}/shares", cloud.manila_url()));
    if let Some(t) = token {
        req = req.header("X-Auth-Token", t);
    }
    let r = resp(req.send().await.unwrap()).await;
    assert_eq!(r.status, 401);
    assert_eq!(r.body["error"]["code"], 401);
}

#[tokio::test]
async fn manila_less_cloud_has_no_manila_in_catalog_and_404s() {
    let mut config = CloudConfig::default();
    config.manila.present = false;
    let cloud = FakeCloud::start(config).await.unwrap();
    let r = auth(&cloud, common::password_auth()).await;
    let types: Vec<&str> = r.body["token"]["catalog"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["identity"]);
    let r = reqwest::get(format!("{}/share/", cloud.base_url()))
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    // Manila appearing later: the next token's catalog has it.
    cloud.set_manila_present(true);
    let r = auth(&cloud, common::password_auth()).await;
    assert_eq!(r.body["token"]["catalog"].as_array().unwrap().len(), 3);
}

/// The seed's account is a member; its administrator is another user of the project whose
/// tokens carry `admin` (its wrong password is refused like any other).
#[tokio::test]
async fn the_account_is_a_member_and_the_administrator_a_user_of_its_own() {
    let cloud = FakeCloud::start(CloudConfig::default()).await.unwrap();
    let roles = |r: &common::Resp| -> Vec<String> {
        r.body["token"]["roles"]
            .as_array()
            .unwrap()
            .iter()
            .map(|role| role["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let member = auth(&cloud, common::password_auth()).await;
    assert_eq!(member.status, 201);
    assert_eq!(roles(&member), ["member", "reader"]);
    let admin = auth(&cloud, common::admin_auth()).await;
    assert_eq!(admin.status, 201, "{:?}", admin.body);
    assert_eq!(roles(&admin), ["admin", "member", "reader"]);
    assert_eq!(admin.body["token"]["user"]["name"], "admin");
    assert_eq!(admin.body["token"]["project"]["id"], PROJECT_ID);
    let mut wrong = common::admin_auth();
    wrong["auth"]["identity"]["password"]["user"]["password"] = json!("fake-password");
    assert_eq!(auth(&cloud, wrong).await.status, 401);
    // Seeded without an administrator, nobody is one.
    let mut config = CloudConfig::default();
    config.account.admin = None;
    let bare = FakeCloud::start(config).await.unwrap();
    assert_eq!(auth(&bare, common::admin_auth()).await.status, 401);
}
