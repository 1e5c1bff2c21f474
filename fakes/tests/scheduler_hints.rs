//! Share scheduler hints (microversion 2.65): `same_host`/`different_host` name existing
//! shares and are kept in the share's metadata as Manila keeps them; below 2.65 ignored.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Client;
use fakes::CloudConfig;
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn scheduler_hints_are_kept_as_affinity_metadata() {
    let c = Client::start(CloudConfig::default()).await;
    let a = c.available_share("a", 1).await;
    let b = c.available_share("b", 1).await;
    let body = |hints| json!({"share": {"size": 1, "share_proto": "NFS", "name": "hinted", "scheduler_hints": hints}});

    let r = c
        .call_at(
            "2.65",
            Method::POST,
            "/shares",
            Some(body(
                json!({"same_host": a, "different_host": format!("{a},{b}")}),
            )),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.body["share"]["id"].as_str().unwrap().to_string();
    let metadata = c.get(&format!("/shares/{id}/metadata")).await.body;
    assert_eq!(metadata["metadata"]["__affinity_same_host"], a.as_str());
    assert_eq!(
        metadata["metadata"]["__affinity_different_host"],
        format!("{a},{b}")
    );

    // An unknown share, an unknown hint, a non-string: refused, nothing created.
    let missing = "3f1d8a4e-0000-4000-8000-00000000dead";
    let r = c
        .call_at(
            "2.65",
            Method::POST,
            "/shares",
            Some(body(json!({"same_host": missing}))),
        )
        .await;
    assert_eq!(r.status, 404, "{}", r.body);
    for bad in [json!({"near": a}), json!({"same_host": 1}), json!("x")] {
        let r = c
            .call_at("2.65", Method::POST, "/shares", Some(body(bad)))
            .await;
        assert_eq!(r.status, 400, "{}", r.body);
    }

    // Below 2.65 the field is not part of the API.
    let r = c
        .call_at(
            "2.64",
            Method::POST,
            "/shares",
            Some(body(json!({"same_host": missing}))),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let old = r.body["share"]["id"].as_str().unwrap().to_string();
    let metadata = c.get(&format!("/shares/{old}/metadata")).await.body;
    assert!(
        metadata["metadata"].get("__affinity_same_host").is_none(),
        "{metadata}"
    );
    assert_eq!(c.cloud.leftovers().shares.len(), 4);
}
