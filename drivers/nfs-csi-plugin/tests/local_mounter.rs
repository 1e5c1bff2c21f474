//! The real binary with the local mounter: bind mounts done for real, inside the plugin's
//! private mount namespace, checked from the test through `/proc/<pid>/root`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::io::ErrorKind;

use common::{Plugin, mount_capability, mounted_here, publish_request, unpublish_request};
use csi_proto::v1::{
    GetPluginCapabilitiesRequest, GetPluginInfoRequest, NodeGetCapabilitiesRequest,
    NodeGetInfoRequest, NodeGetVolumeStatsRequest, ProbeRequest, node_service_capability,
    volume_usage::Unit,
};

#[tokio::test]
async fn identity_and_node_info_describe_the_plugin() {
    let plugin = Plugin::start_local(&[]).await;
    let info = plugin
        .identity()
        .get_plugin_info(GetPluginInfoRequest {})
        .await
        .unwrap();
    assert_eq!(info.get_ref().name, "nfs.csi.k8s.io");
    assert_eq!(info.get_ref().vendor_version, env!("CARGO_PKG_VERSION"));
    let caps = plugin
        .identity()
        .get_plugin_capabilities(GetPluginCapabilitiesRequest {})
        .await
        .unwrap();
    assert!(
        caps.get_ref().capabilities.is_empty(),
        "node-only plugin: {caps:?}"
    );
    let probe = plugin.identity().probe(ProbeRequest {}).await.unwrap();
    assert_eq!(probe.get_ref().ready, Some(true));

    let node_info = plugin
        .node()
        .node_get_info(NodeGetInfoRequest {})
        .await
        .unwrap();
    assert_eq!(node_info.get_ref().node_id, "node-1");
    let caps = plugin
        .node()
        .node_get_capabilities(NodeGetCapabilitiesRequest {})
        .await
        .unwrap();
    let types: Vec<_> = caps
        .into_inner()
        .capabilities
        .into_iter()
        .map(|c| match c.r#type {
            Some(node_service_capability::Type::Rpc(rpc)) => rpc.r#type(),
            None => panic!("capability without type"),
        })
        .collect();
    assert_eq!(
        types,
        vec![node_service_capability::rpc::Type::GetVolumeStats]
    );
}

#[tokio::test]
async fn the_driver_name_is_configurable() {
    let plugin = Plugin::start_local(&["--drivername=nfs.example.org"]).await;
    let info = plugin
        .identity()
        .get_plugin_info(GetPluginInfoRequest {})
        .await
        .unwrap();
    assert_eq!(info.into_inner().name, "nfs.example.org");
}

#[tokio::test]
async fn publish_mounts_the_export_read_write_and_unpublish_removes_it_idempotently() {
    let plugin = Plugin::start_local(&[]).await;
    let export = plugin.export("share-a");
    let target = plugin.target("pod-a");
    let mut node = plugin.node();

    node.node_publish_volume(publish_request("127.0.0.1", &export, &target))
        .await
        .unwrap();
    // Publishing again while mounted is fine.
    node.node_publish_volume(publish_request("127.0.0.1", &export, &target))
        .await
        .unwrap();

    // Written through the mount, seen in the export directory.
    std::fs::write(
        plugin.inside(&target).join("hello.txt"),
        "through the mount",
    )
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(export.join("hello.txt")).unwrap(),
        "through the mount"
    );
    // The mount lives only in the plugin's namespace.
    assert!(
        !mounted_here(&target),
        "mount leaked into the test's namespace"
    );

    // Stats come from the file system of the mount (the export's).
    let stats = node
        .node_get_volume_stats(NodeGetVolumeStatsRequest {
            volume_id: "vol-1".into(),
            volume_path: target.display().to_string(),
            staging_target_path: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let export_fs = nix::sys::statvfs::statvfs(&export).unwrap();
    let bytes = stats
        .usage
        .iter()
        .find(|u| u.unit() == Unit::Bytes)
        .unwrap();
    let inodes = stats
        .usage
        .iter()
        .find(|u| u.unit() == Unit::Inodes)
        .unwrap();
    let expected_total = export_fs.blocks() as i64 * export_fs.fragment_size() as i64;
    assert_eq!(bytes.total, expected_total);
    assert!(bytes.available > 0 && bytes.used >= 0 && bytes.available <= bytes.total);
    assert_eq!(inodes.total, export_fs.files() as i64);
    assert!(inodes.used > 0, "{inodes:?}");

    node.node_unpublish_volume(unpublish_request(&target))
        .await
        .unwrap();
    assert!(
        !plugin.inside(&target).exists(),
        "target directory left behind"
    );
    assert_eq!(
        std::fs::read_to_string(export.join("hello.txt")).unwrap(),
        "through the mount",
        "unpublish must not touch the data"
    );
    // Unpublishing again is fine.
    node.node_unpublish_volume(unpublish_request(&target))
        .await
        .unwrap();
}

#[rstest::rstest]
#[case::readonly_flag(true, &[])]
#[case::ro_mount_flag(false, &["ro"])]
#[tokio::test]
async fn readonly_publish_refuses_writes_with_erofs(
    #[case] readonly: bool,
    #[case] flags: &[&str],
) {
    let plugin = Plugin::start_local(&[]).await;
    let export = plugin.export("share-ro");
    std::fs::write(export.join("existing.txt"), "data").unwrap();
    let target = plugin.target("pod-ro");
    let mut request = publish_request("localhost", &export, &target);
    request.readonly = readonly;
    request.volume_capability = Some(mount_capability(flags));
    plugin.node().node_publish_volume(request).await.unwrap();

    let inside = plugin.inside(&target);
    assert_eq!(
        std::fs::read_to_string(inside.join("existing.txt")).unwrap(),
        "data"
    );
    let error = std::fs::write(inside.join("new.txt"), "nope").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::ReadOnlyFilesystem, "{error}");
    // The export itself stays writable.
    std::fs::write(export.join("new.txt"), "fine").unwrap();

    plugin
        .node()
        .node_unpublish_volume(unpublish_request(&target))
        .await
        .unwrap();
    assert!(!inside.exists());
}

#[tokio::test]
async fn exports_resolve_under_the_local_export_root() {
    let root = tempfile::Builder::new()
        .prefix("local-mounter-")
        .tempdir()
        .unwrap();
    std::fs::create_dir_all(root.path().join("exports/share-r")).unwrap();
    std::fs::write(root.path().join("exports/share-r/f"), "rooted").unwrap();
    let root_flag = format!("--local-export-root={}", root.path().display());
    let plugin = Plugin::start_local(&[&root_flag]).await;
    let target = plugin.target("pod-r");
    let request = publish_request(
        "127.0.0.1",
        std::path::Path::new("/exports/share-r"),
        &target,
    );
    plugin.node().node_publish_volume(request).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(plugin.inside(&target).join("f")).unwrap(),
        "rooted"
    );
}

/// Each call is logged with its method and outcome; Probe (called while waiting for
/// start-up) stays out of the info-level log.
#[tokio::test]
async fn calls_are_logged_with_method_and_outcome_and_probes_stay_quiet() {
    let plugin = Plugin::start_local(&[]).await;
    plugin
        .node()
        .node_get_info(NodeGetInfoRequest {})
        .await
        .unwrap();
    let mut bad = unpublish_request(std::path::Path::new("/x"));
    bad.volume_id.clear();
    plugin.node().node_unpublish_volume(bad).await.unwrap_err();

    let expected = [
        "method=/csi.v1.Node/NodeGetInfo",
        "gRPC call OK",
        "method=/csi.v1.Node/NodeUnpublishVolume code=InvalidArgument grpc_message=volume_id is required",
    ];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let log = loop {
        let log = plugin.log();
        if expected.iter().all(|e| log.contains(e)) || std::time::Instant::now() > deadline {
            break log;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    for line in expected {
        assert!(log.contains(line), "log lacks {line:?}:\n{log}");
    }
    assert!(!log.contains("Probe"), "Probe logged at info level:\n{log}");
    assert!(
        !log.contains('\u{1b}'),
        "colour codes in a log file:\n{log}"
    );
}

/// SIGTERM stops the plugin cleanly and removes its socket.
#[tokio::test]
async fn sigterm_stops_the_plugin_and_removes_the_socket() {
    let mut plugin = Plugin::start_local(&[]).await;
    let socket = plugin.dir.path().join("csi.sock");
    assert!(socket.exists());
    let pid = nix::unistd::Pid::from_raw(plugin.pid() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = plugin.wait_exit(std::time::Duration::from_secs(10)).await;
    assert!(
        status.success(),
        "exit status {status}; log:\n{}",
        plugin.log()
    );
    assert!(!socket.exists(), "socket left behind");
}
