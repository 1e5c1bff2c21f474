//! CephFS shares on a named file system carry `__mount_options: fs=<name>` in their
//! metadata, as Manila's CephFS driver (`cephfs_filesystem_name`) puts it there.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Client;
use fakes::CloudConfig;
use reqwest::Method;
use serde_json::json;

async fn create(c: &Client, name: &str, protocol: &str) -> serde_json::Value {
    let r = c
        .call(
            Method::POST,
            "/shares",
            Some(json!({"share": {"size": 1, "share_proto": protocol, "name": name}})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.body["share"]["id"].as_str().unwrap().to_string();
    c.get(&format!("/shares/{id}")).await.body
}

#[tokio::test]
async fn cephfs_shares_name_their_file_system_in_the_metadata() {
    let mut config = CloudConfig::default();
    config.manila.cephfs_filesystem_name = Some("fs-b".into());
    let c = Client::start(config).await;
    let ceph = create(&c, "ceph", "CEPHFS").await;
    assert_eq!(ceph["share"]["metadata"]["__mount_options"], "fs=fs-b");
    let nfs = create(&c, "nfs", "NFS").await;
    assert!(
        nfs["share"]["metadata"].get("__mount_options").is_none(),
        "{nfs}"
    );

    // Without a file system name (the default), CephFS shares carry no such metadata.
    let c = Client::start(CloudConfig::default()).await;
    let ceph = create(&c, "ceph", "CEPHFS").await;
    assert!(
        ceph["share"]["metadata"].get("__mount_options").is_none(),
        "{ceph}"
    );
}
