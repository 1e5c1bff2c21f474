//! Fault injection (HTTP errors, latency, stuck states, errors with user messages), the
//! journal, leftovers, and the control API over HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::{Client, control};
use fakes::{CloudConfig, FaultAction, FaultRule, Operation, Service, Times};
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn http_error_fault_fires_n_times() {
    let c = Client::start(CloudConfig::default()).await;
    c.cloud
        .add_fault(
            FaultRule::new(
                Operation::ShareCreate,
                FaultAction::HttpError {
                    status: 503,
                    message: Some("maintenance".into()),
                },
            )
            .times(Times::Count(2)),
        )
        .unwrap();
    let body = json!({"share": {"size": 1, "share_proto": "NFS"}});
    for _ in 0..2 {
        let r = c.post("/shares", body.clone()).await;
        assert_eq!(r.status, 503);
        assert_eq!(
            r.body,
            json!({"serviceUnavailable": {"code": 503, "message": "maintenance"}})
        );
    }
    assert_eq!(c.post("/shares", body).await.status, 200);
    assert!(c.cloud.faults().is_empty());
}

#[tokio::test]
async fn error_fault_ends_in_error_with_a_user_message() {
    let c = Client::start(CloudConfig::default()).await;
    c.cloud
        .add_fault(
            FaultRule::new(
                Operation::ShareCreate,
                FaultAction::Error {
                    detail_id: "009".into(),
                    message: None,
                },
            )
            .for_resource("doomed"),
        )
        .unwrap();
    let ok = c.create_share("fine", 1).await;
    let id = c.create_share("doomed", 1).await;
    c.wait_for(&format!("/shares/{id}"), "share", "status", "error")
        .await;
    assert_eq!(
        c.get(&format!("/shares/{ok}")).await.body["share"]["status"],
        "available"
    );
    let r = c.get(&format!("/messages?resource_id={id}")).await;
    let msg = &r.body["messages"][0];
    assert_eq!(msg["detail_id"], "009");
    assert_eq!(msg["action_id"], "002");
    assert_eq!(msg["resource_type"], "SHARE");
    assert_eq!(msg["message_level"], "ERROR");
    assert_eq!(
        msg["user_message"],
        "create: No storage could be allocated for this share request, Capacity filter didn't succeed."
    );
    insta::assert_json_snapshot!("user_message", msg, {
        ".id" => "[id]", ".resource_id" => "[id]", ".request_id" => "[id]",
        ".created_at" => "[time]", ".expires_at" => "[time]", ".links[].href" => "[url]",
    });
    // A share in error can be deleted (the driver's rollback).
    assert_eq!(c.delete(&format!("/shares/{id}")).await.status, 202);
}

#[tokio::test]
async fn stuck_fault_keeps_the_state() {
    let c = Client::start(CloudConfig::default()).await;
    let id = c.available_share("s", 1).await;
    c.cloud
        .add_fault(FaultRule::new(
            Operation::ShareExtend,
            FaultAction::Stuck { status: None },
        ))
        .unwrap();
    c.post(
        &format!("/shares/{id}/action"),
        json!({"extend": {"new_size": 2}}),
    )
    .await;
    for _ in 0..3 {
        assert_eq!(
            c.get(&format!("/shares/{id}")).await.body["share"]["status"],
            "extending"
        );
    }
    let left = c.cloud.leftovers();
    assert_eq!(left.shares[0].status, "extending");
}

#[tokio::test]
async fn delete_error_and_extend_error_states() {
    let c = Client::start(CloudConfig::default()).await;
    let id = c.available_share("e", 1).await;
    c.cloud
        .add_fault(FaultRule::new(
            Operation::ShareExtend,
            FaultAction::Error {
                detail_id: "002".into(),
                message: Some("no room".into()),
            },
        ))
        .unwrap();
    c.post(
        &format!("/shares/{id}/action"),
        json!({"extend": {"new_size": 5}}),
    )
    .await;
    let s = c
        .wait_for(
            &format!("/shares/{id}"),
            "share",
            "status",
            "extending_error",
        )
        .await;
    assert_eq!(s["size"], 1);
    let m = c.get(&format!("/messages?resource_id={id}")).await;
    assert_eq!(m.body["messages"][0]["user_message"], "extend: no room");
    assert_eq!(m.body["messages"][0]["action_id"], "008");
}

#[tokio::test]
async fn latency_fault_delays_the_answer() {
    let c = Client::start(CloudConfig::default()).await;
    c.cloud
        .add_fault(FaultRule::new(
            Operation::ShareList,
            FaultAction::Latency { ms: 300 },
        ))
        .unwrap();
    let start = Instant::now();
    assert_eq!(c.get("/shares").await.status, 200);
    assert!(
        start.elapsed() >= Duration::from_millis(300),
        "answered after {:?}",
        start.elapsed()
    );
}

#[tokio::test]
async fn auth_fault_and_always() {
    let c = Client::start(CloudConfig::default()).await;
    c.cloud
        .add_fault(
            FaultRule::new(
                Operation::Auth,
                FaultAction::HttpError {
                    status: 500,
                    message: None,
                },
            )
            .times(Times::ALWAYS),
        )
        .unwrap();
    for _ in 0..3 {
        let r = c
            .http
            .post(format!("{}/auth/tokens", c.cloud.auth_url()))
            .json(&common::password_auth())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 500);
    }
    assert_eq!(c.cloud.faults()[0].fired, 3);
}

#[tokio::test]
async fn journal_records_method_path_microversion_token_status() {
    let c = Client::start(CloudConfig::default()).await;
    c.cloud.clear_journal();
    c.call_at("2.45", Method::GET, "/shares/detail?name=x", None)
        .await;
    let j = c.cloud.journal();
    assert_eq!(j.len(), 1);
    let e = &j[0];
    assert_eq!(
        (e.method.as_str(), e.path.as_str(), e.query.as_deref()),
        ("GET", "/share/v2/shares/detail", Some("name=x"))
    );
    assert_eq!(e.service, Service::Manila);
    assert_eq!(e.microversion.as_deref(), Some("2.45"));
    assert_eq!(e.token.as_deref(), Some(c.token.as_str()));
    assert_eq!(e.status, 200);
}

#[tokio::test]
async fn control_api_drives_everything() {
    let c = Client::start(CloudConfig::default()).await;
    let (http, cloud) = (&c.http, &c.cloud);
    assert_eq!(
        control(http, cloud, Method::GET, "/health", None)
            .await
            .body["status"],
        "ok"
    );

    // Faults.
    let r = control(http, cloud, Method::POST, "/faults", Some(json!({"operation": "share_delete", "action": {"http_error": {"status": 500}}, "times": "always"}))).await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let fault_id = r.body["id"].as_u64().unwrap();
    assert_eq!(
        control(http, cloud, Method::GET, "/faults", None)
            .await
            .body[0]["operation"],
        "share_delete"
    );
    let bad = control(
        http,
        cloud,
        Method::POST,
        "/faults",
        Some(json!({"operation": "share_delete", "action": {"http_error": {"status": 200}}})),
    )
    .await;
    assert_eq!(bad.status, 400);
    assert!(
        bad.body["error"].as_str().unwrap().contains("200"),
        "{:?}",
        bad.body
    );
    let bad = control(
        http,
        cloud,
        Method::POST,
        "/faults",
        Some(json!({"operation": "share_nuke", "action": {"latency": {"ms": 1}}})),
    )
    .await;
    assert!(
        bad.body["error"].as_str().unwrap().contains("share_nuke"),
        "{:?}",
        bad.body
    );
    assert_eq!(
        control(
            http,
            cloud,
            Method::DELETE,
            &format!("/faults/{fault_id}"),
            None
        )
        .await
        .status,
        204
    );
    assert_eq!(
        control(
            http,
            cloud,
            Method::DELETE,
            &format!("/faults/{fault_id}"),
            None
        )
        .await
        .status,
        404
    );

    // Share types.
    let r = control(
        http,
        cloud,
        Method::POST,
        "/share-types",
        Some(json!({"name": "gold", "driver_handles_share_servers": false})),
    )
    .await;
    assert_eq!(r.status, 201);
    assert_eq!(c.get("/types").await.body["share_types"][1]["name"], "gold");
    assert_eq!(
        control(
            http,
            cloud,
            Method::PUT,
            "/default-share-type",
            Some(json!({"name": "gold"}))
        )
        .await
        .status,
        204
    );
    assert_eq!(
        c.get("/types/default").await.body["share_type"]["name"],
        "gold"
    );
    assert_eq!(
        control(http, cloud, Method::DELETE, "/share-types/gold", None)
            .await
            .status,
        204
    );
    assert_eq!(
        control(http, cloud, Method::DELETE, "/share-types/gold", None)
            .await
            .status,
        404
    );
    // Removing the default type left no default.
    assert_eq!(c.get("/types/default").await.status, 404);
    assert_eq!(
        control(
            http,
            cloud,
            Method::PUT,
            "/default-share-type",
            Some(json!({"name": "default"}))
        )
        .await
        .status,
        204
    );

    // Delays.
    assert_eq!(
        control(
            http,
            cloud,
            Method::PUT,
            "/delays",
            Some(json!({"share_create_ms": 60000}))
        )
        .await
        .status,
        204
    );
    let id = c.create_share("slow", 1).await;
    assert_eq!(
        c.get(&format!("/shares/{id}")).await.body["share"]["status"],
        "creating"
    );
    assert_eq!(
        control(http, cloud, Method::GET, "/delays", None)
            .await
            .body["share_create_ms"],
        60000
    );

    // Leftovers.
    let left = control(http, cloud, Method::GET, "/leftovers", None).await;
    assert_eq!(left.body["shares"][0]["id"], id.as_str());

    // Manila switches.
    assert_eq!(
        control(
            http,
            cloud,
            Method::PUT,
            "/manila",
            Some(json!({"types_forbidden": true}))
        )
        .await
        .status,
        204
    );
    assert_eq!(c.get("/types").await.status, 403);
    assert_eq!(
        control(
            http,
            cloud,
            Method::PUT,
            "/manila",
            Some(json!({"present": false}))
        )
        .await
        .status,
        204
    );
    assert_eq!(c.get("/shares").await.status, 404);
    assert_eq!(
        control(http, cloud, Method::GET, "/manila", None)
            .await
            .body,
        json!({"present": false, "types_forbidden": true})
    );

    // Tokens.
    control(
        http,
        cloud,
        Method::PUT,
        "/manila",
        Some(json!({"present": true})),
    )
    .await;
    assert_eq!(
        control(http, cloud, Method::POST, "/tokens/expire", None)
            .await
            .status,
        204
    );
    assert_eq!(c.get("/shares").await.status, 401);
    assert_eq!(
        control(
            http,
            cloud,
            Method::PUT,
            "/token-lifetime",
            Some(json!({"seconds": 0}))
        )
        .await
        .status,
        400
    );

    // Credentials.
    let secret = control(
        http,
        cloud,
        Method::GET,
        "/secret?kind=application-credential",
        None,
    )
    .await;
    assert_eq!(
        secret.body["os-applicationCredentialID"],
        "0e1d2c3b4a5948e7a6b5c4d3e2f1a0b9"
    );
    let clouds = c
        .http
        .get(format!("{}/clouds.yaml?cloud=mine", cloud.control_url()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        clouds.contains("mine:") && clouds.contains(&cloud.auth_url()),
        "{clouds}"
    );

    // Journal, then reset.
    let journal = control(http, cloud, Method::GET, "/journal?since=0", None).await;
    assert!(
        journal
            .body
            .as_array()
            .unwrap()
            .iter()
            .all(|e| !e["path"].as_str().unwrap().starts_with("/_fake"))
    );
    assert_eq!(
        control(http, cloud, Method::POST, "/reset", None)
            .await
            .status,
        204
    );
    assert!(cloud.leftovers().is_empty());
    assert!(cloud.journal().is_empty());
    assert_eq!(
        control(http, cloud, Method::GET, "/nope", None)
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn in_process_secret_and_clouds_yaml() {
    let c = Client::start(CloudConfig::default()).await;
    let s = c.cloud.secret(fakes::SecretKind::Password);
    assert_eq!(s["os-authURL"], c.cloud.auth_url());
    assert_eq!(s["os-password"], "fake-password");
    let y: serde_yaml::Value = serde_yaml::from_str(&c.cloud.clouds_yaml("x")).unwrap();
    assert_eq!(y["clouds"]["x"]["auth"]["project_name"], "demo");
}

#[tokio::test]
async fn stuck_shares_can_be_force_deleted_or_reset_by_an_admin() {
    let c = Client::start(CloudConfig::default()).await;
    c.cloud
        .add_fault(
            FaultRule::new(Operation::ShareDelete, FaultAction::Stuck { status: None })
                .times(Times::ALWAYS),
        )
        .unwrap();
    let a = c.available_share("a", 1).await;
    let b = c.available_share("b", 1).await;
    c.delete(&format!("/shares/{a}")).await;
    c.delete(&format!("/shares/{b}")).await;
    assert_eq!(
        c.get(&format!("/shares/{a}")).await.body["share"]["status"],
        "deleting"
    );
    // Admin actions: 403 for the seed's member account, as Manila's policy answers.
    for action in [
        json!({"force_delete": null}),
        json!({"reset_status": {"status": "available"}}),
    ] {
        let r = c.post(&format!("/shares/{a}/action"), action).await;
        assert_eq!(r.status, 403, "{:?}", r.body);
    }
    let c = c.admin().await;
    assert_eq!(
        c.post(
            &format!("/shares/{a}/action"),
            json!({"force_delete": null})
        )
        .await
        .status,
        202
    );
    c.wait_gone(&format!("/shares/{a}")).await;
    let r = c
        .post(
            &format!("/shares/{b}/action"),
            json!({"reset_status": {"status": "available"}}),
        )
        .await;
    assert_eq!(r.status, 202);
    assert_eq!(
        c.get(&format!("/shares/{b}")).await.body["share"]["status"],
        "available"
    );
    let r = c
        .post(
            &format!("/shares/{b}/action"),
            json!({"reset_status": {"status": "happy"}}),
        )
        .await;
    assert_eq!(r.status, 400);
}
