//! 50 concurrent creates: distinct names or one shared name give 50 distinct shares (names
//! are not unique in Manila), each with its own directory, and all delete cleanly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;

use common::Client;
use fakes::CloudConfig;
use rstest::rstest;
use serde_json::json;

const N: usize = 50;

#[rstest]
#[case::distinct_names(false)]
#[case::same_name(true)]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_creates_make_fifty_shares(#[case] same_name: bool) {
    let c = Arc::new(Client::start(CloudConfig::default()).await);
    let tasks: Vec<_> = (0..N)
        .map(|i| {
            let c = Arc::clone(&c);
            tokio::spawn(async move {
                let name = if same_name {
                    "pvc-same".to_owned()
                } else {
                    format!("pvc-{i}")
                };
                let r = c
                    .post(
                        "/shares",
                        json!({"share": {"name": name, "size": 1, "share_proto": "NFS"}}),
                    )
                    .await;
                assert_eq!(r.status, 200, "{:?}", r.body);
                r.body["share"]["id"].as_str().unwrap().to_owned()
            })
        })
        .collect();
    let mut ids = BTreeSet::new();
    for t in tasks {
        ids.insert(t.await.unwrap());
    }
    assert_eq!(ids.len(), N, "every create made its own share");

    let listed = c.get("/shares/detail").await;
    let listed: BTreeSet<String> = listed.body["shares"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(listed, ids);
    if same_name {
        let by_name = c.get("/shares/detail?name=pvc-same").await;
        assert_eq!(by_name.body["shares"].as_array().unwrap().len(), N);
    }
    let dirs = std::fs::read_dir(c.cloud.backend_root().join("shares"))
        .unwrap()
        .count();
    assert_eq!(dirs, N);

    let deletes: Vec<_> = ids
        .iter()
        .cloned()
        .map(|id| {
            let c = Arc::clone(&c);
            tokio::spawn(async move {
                c.wait_for(&format!("/shares/{id}"), "share", "status", "available")
                    .await;
                assert_eq!(c.delete(&format!("/shares/{id}")).await.status, 202);
                c.wait_gone(&format!("/shares/{id}")).await;
            })
        })
        .collect();
    for t in deletes {
        t.await.unwrap();
    }
    assert!(c.cloud.leftovers().is_empty(), "{:?}", c.cloud.leftovers());
}
