//! The sanity suite against another driver: the `nfs-csi-plugin` alone, a node-only
//! endpoint (Identity + Node, no Controller), in its own private mount namespace.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use csi_proto::v1::{self, identity_client::IdentityClient, node_client::NodeClient};
use suites::sanity::{self, Outcome, SanityConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nfs_node_plugin_passes_the_node_only_sanity_cases() {
    let dir = support::scratch();
    let nfs = support::start_nfs_plugin(dir.path()).await;
    let mut config = SanityConfig::new(nfs.endpoint.clone());
    config.mount_dir = dir.path().join("csi-mount");
    config.staging_dir = dir.path().join("csi-staging");
    let report = sanity::run(config).await.unwrap();
    let summary = report.summary();
    println!("{summary}");
    assert!(
        report.success(),
        "{summary}\n--- plugin log:\n{}",
        nfs.log()
    );
    let outcomes: Vec<String> = report
        .cases
        .iter()
        .map(|case| match &case.outcome {
            Outcome::Passed => format!("passed: {}", case.name),
            Outcome::Failed(_) => format!("FAILED: {}", case.name),
            Outcome::Skipped(reason) => format!("skipped: {} ({reason})", case.name),
        })
        .collect();
    insta::assert_yaml_snapshot!("nfs_outcomes", outcomes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nfs_node_plugin_response_shapes() {
    let dir = support::scratch();
    let nfs = support::start_nfs_plugin(dir.path()).await;
    let channel = csi_proto::connect(&nfs.endpoint).await.unwrap();
    let mut identity = IdentityClient::new(channel.clone());
    let mut info = identity
        .get_plugin_info(v1::GetPluginInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(!info.vendor_version.is_empty());
    info.vendor_version = "[version]".into();
    insta::assert_debug_snapshot!("nfs_plugin_info", info);
    let capabilities = identity
        .get_plugin_capabilities(v1::GetPluginCapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner();
    insta::assert_debug_snapshot!("nfs_plugin_capabilities", capabilities);
    let mut node = NodeClient::new(channel);
    let node_capabilities = node
        .node_get_capabilities(v1::NodeGetCapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner();
    insta::assert_debug_snapshot!("nfs_node_capabilities", node_capabilities);
}
