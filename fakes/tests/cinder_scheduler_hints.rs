//! Cinder volume create with `OS-SCH-HNT:scheduler_hints` beside `volume`: `same_host` /
//! `different_host` (a volume id or a list of distinct ids) are checked and kept, visible in
//! `FakeCloud::block_volume`; a malformed or unknown one is refused with 400 and nothing is
//! created.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;

use common::block::Block;
use reqwest::Method;
use serde_json::{Value, json};

fn create_body(name: &str, hints: Value) -> Value {
    json!({"volume": {"name": name, "size": 1}, "OS-SCH-HNT:scheduler_hints": hints})
}

#[tokio::test]
async fn same_and_different_host_are_checked_and_kept() {
    let b = Block::start().await;
    let a = b.volume(json!({"name": "a", "size": 1})).await;
    let c = b.volume(json!({"name": "c", "size": 1})).await;

    let r = b
        .cinder(
            Method::POST,
            "/volumes",
            Some("3.70"),
            Some(create_body(
                "hinted",
                json!({"same_host": a, "different_host": [a, c], "query": "ignored"}),
            )),
        )
        .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    let id = r.body["volume"]["id"].as_str().unwrap().to_owned();
    let view = b.cloud.block_volume(&id).unwrap();
    assert_eq!(
        view.scheduler_hints,
        BTreeMap::from([
            ("same_host".to_string(), vec![a.clone()]),
            ("different_host".to_string(), vec![a.clone(), c.clone()]),
        ])
    );
    // Null hints, or none: no hints kept.
    let r = b
        .cinder(
            Method::POST,
            "/volumes",
            None,
            Some(create_body("plain", Value::Null)),
        )
        .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    let plain = r.body["volume"]["id"].as_str().unwrap().to_owned();
    assert!(
        b.cloud
            .block_volume(&plain)
            .unwrap()
            .scheduler_hints
            .is_empty()
    );
    assert!(b.cloud.block_volume(&a).unwrap().scheduler_hints.is_empty());

    let before = b.cloud.block_leftovers().volumes.len();
    let missing = "3f1d8a4e-0000-4000-8000-00000000dead";
    for (hints, text) in [
        (json!("not an object"), "OS-SCH-HNT:scheduler_hints"),
        (json!({"same_host": "pvc-by-name"}), "same_host"),
        (json!({"different_host": [a, a]}), "different_host"),
        (json!({"different_host": [1]}), "different_host"),
        (json!({"same_host": {"id": a}}), "same_host"),
        (json!({"same_host": missing}), missing),
        (json!({"different_host": [c, missing]}), missing),
    ] {
        let r = b
            .cinder(
                Method::POST,
                "/volumes",
                Some("3.70"),
                Some(create_body("refused", hints.clone())),
            )
            .await;
        assert_eq!(r.status, 400, "{hints}: {:?}", r.body);
        let message = r.body["badRequest"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(text), "{hints}: {message}");
    }
    assert_eq!(b.cloud.block_leftovers().volumes.len(), before);
}
