//! The fake metadata service: per-node `meta_data.json` documents, set in-process and over
//! the control API, 404 for a node without one, cleared by reset.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::control;
use fakes::{CloudConfig, FakeCloud, NodeMetadata};
use reqwest::Method;
use serde_json::{Value, json};

async fn get(http: &reqwest::Client, url: &str) -> (u16, Option<Value>) {
    let response = http.get(url).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.ok())
}

#[tokio::test]
async fn each_node_has_its_own_document() {
    let cloud = FakeCloud::start(CloudConfig::default()).await.unwrap();
    let http = reqwest::Client::new();
    cloud
        .set_node_metadata(
            "worker-1",
            NodeMetadata {
                uuid: "5d1c6d0e-3a43-4c0b-9a8f-0c3b1b0f4e11".into(),
                availability_zone: "zone-a".into(),
                name: None,
            },
        )
        .unwrap();
    let (status, body) = get(&http, &cloud.metadata_url("worker-1")).await;
    assert_eq!(status, 200);
    let body = body.unwrap();
    assert_eq!(body["uuid"], "5d1c6d0e-3a43-4c0b-9a8f-0c3b1b0f4e11");
    assert_eq!(body["availability_zone"], "zone-a");
    assert_eq!(body["name"], "worker-1");
    assert_eq!(body["project_id"], cloud.account().project_id);

    // Over the control API, for another node.
    let put = control(
        &http,
        &cloud,
        Method::PUT,
        "/metadata/worker-2",
        Some(json!({"uuid": "b0c4a1f2-0000-4000-8000-000000000002", "availability_zone": "zone-b", "name": "vm-2"})),
    )
    .await;
    assert_eq!(put.status, 204, "{:?}", put.body);
    let (status, body) = get(&http, &cloud.metadata_url("worker-2")).await;
    assert_eq!(status, 200);
    let body = body.unwrap();
    assert_eq!(body["availability_zone"], "zone-b");
    assert_eq!(body["hostname"], "vm-2");

    // A node without a document, and the default node at Nova's own path.
    assert_eq!(get(&http, &cloud.metadata_url("worker-3")).await.0, 404);
    let nova_path = format!("{}/openstack/latest/meta_data.json", cloud.base_url());
    assert_eq!(get(&http, &nova_path).await.0, 404);
    let put = control(
        &http,
        &cloud,
        Method::PUT,
        "/metadata/default",
        Some(json!({"uuid": "d", "availability_zone": "nova"})),
    )
    .await;
    assert_eq!(put.status, 204);
    assert_eq!(get(&http, &nova_path).await.1.unwrap()["uuid"], "d");

    // Bad documents are refused.
    for bad in [
        json!({"uuid": "", "availability_zone": "nova"}),
        json!({"uuid": "x"}),
        json!({"uuid": "x", "availability_zone": "nova", "extra": 1}),
    ] {
        let put = control(&http, &cloud, Method::PUT, "/metadata/w", Some(bad)).await;
        assert_eq!(put.status, 400, "{:?}", put.body);
    }
    assert!(
        cloud
            .set_node_metadata(
                "w",
                NodeMetadata {
                    uuid: "x".into(),
                    availability_zone: " ".into(),
                    name: None
                }
            )
            .is_err()
    );

    // Listing, removal, reset.
    let list = control(&http, &cloud, Method::GET, "/metadata", None).await;
    assert_eq!(list.body["worker-2"]["availability_zone"], "zone-b");
    let delete = control(&http, &cloud, Method::DELETE, "/metadata/worker-2", None).await;
    assert_eq!(delete.status, 204);
    assert_eq!(get(&http, &cloud.metadata_url("worker-2")).await.0, 404);
    assert!(cloud.remove_node_metadata("worker-1"));
    assert!(!cloud.remove_node_metadata("worker-1"));
    cloud.reset().unwrap();
    assert_eq!(get(&http, &nova_path).await.0, 404);
    assert!(cloud.leftovers().is_empty());
}
