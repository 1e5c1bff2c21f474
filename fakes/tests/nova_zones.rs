//! Nova's compute availability zones (`GET /os-availability-zone` under `/compute`): the
//! seeded zones and the servers' zones, as real Nova answers the non-detailed listing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::block::Block;
use fakes::{CloudConfig, FaultAction, FaultRule, Operation};
use reqwest::Method;
use serde_json::json;

fn zone_names(body: &serde_json::Value) -> Vec<String> {
    body["availabilityZoneInfo"]
        .as_array()
        .unwrap()
        .iter()
        .map(|z| z["zoneName"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn compute_zones_are_nova_alone_without_seed_or_servers() {
    let b = Block::start().await;
    let r = b
        .nova(Method::GET, "/os-availability-zone", "2.1", None)
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(
        r.body,
        json!({"availabilityZoneInfo": [
            {"zoneName": "nova", "zoneState": {"available": true}, "hosts": null}
        ]})
    );
}

#[tokio::test]
async fn compute_zones_are_the_seeded_ones_and_the_servers_sorted_once_each() {
    let mut config = CloudConfig::default();
    config.cinder.present = true;
    config.nova.availability_zones = vec!["zone-c".into(), "zone-a".into()];
    let b = Block::with(config).await;
    let dirs = tempfile::tempdir().unwrap();
    b.server(dirs.path(), "node-1", "zone-b");
    b.server(dirs.path(), "node-2", "zone-a");
    let r = b
        .nova(Method::GET, "/os-availability-zone", "2.93", None)
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(zone_names(&r.body), ["zone-a", "zone-b", "zone-c"]);
    // Cinder's volume zones are a separate list: the seed's `cinder.availability_zones`.
    let v = b
        .cinder(Method::GET, "/os-availability-zone", Some("3.70"), None)
        .await;
    assert_eq!(zone_names(&v.body), ["nova"]);
}

#[tokio::test]
async fn compute_zones_answer_an_injected_fault() {
    let b = Block::start().await;
    b.cloud
        .add_fault(FaultRule::new(
            Operation::ComputeAvailabilityZones,
            FaultAction::HttpError {
                status: 503,
                message: Some("nova-api is down".into()),
            },
        ))
        .unwrap();
    let r = b
        .nova(Method::GET, "/os-availability-zone", "2.1", None)
        .await;
    assert_eq!(r.status, 503, "{:?}", r.body);
    assert!(
        r.body.to_string().contains("nova-api is down"),
        "{:?}",
        r.body
    );
}

#[tokio::test]
async fn an_empty_seeded_compute_zone_is_refused() {
    let mut config = CloudConfig::default();
    config.cinder.present = true;
    config.nova.availability_zones = vec![String::new()];
    let err = fakes::FakeCloud::start(config).await.err().unwrap();
    assert!(err.to_string().contains("nova.availability_zones"), "{err}");
}
