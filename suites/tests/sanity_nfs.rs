//! The sanity suite against another driver: the `nfs-csi-plugin` alone, a node-only
//! endpoint (Identity + Node, no Controller), in its own private mount namespace.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use suites::sanity::{self, SanityConfig};

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
    insta::assert_yaml_snapshot!("nfs_outcomes", support::outcomes(&report));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nfs_node_plugin_response_shapes() {
    let dir = support::scratch();
    let nfs = support::start_nfs_plugin(dir.path()).await;
    let channel = csi_proto::connect(&nfs.endpoint).await.unwrap();
    let (info, capabilities) = support::identity_shapes(&channel).await;
    insta::assert_debug_snapshot!("nfs_plugin_info", info);
    insta::assert_debug_snapshot!("nfs_plugin_capabilities", capabilities);
    let node_capabilities = support::node_capabilities(&channel).await;
    insta::assert_debug_snapshot!("nfs_node_capabilities", node_capabilities);
}
