//! Bad requests and unusable set-ups get precise codes and messages naming the culprit.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::path::Path;

use common::{Plugin, publish_request, unpublish_request};
use csi_proto::v1::{
    NodeExpandVolumeRequest, NodeGetVolumeStatsRequest, NodePublishVolumeRequest,
    NodeStageVolumeRequest, NodeUnstageVolumeRequest, VolumeCapability, volume_capability,
};
use rstest::rstest;
use tonic::Code;

fn valid(plugin: &Plugin) -> NodePublishVolumeRequest {
    publish_request("127.0.0.1", &plugin.export("share"), &plugin.target("pod"))
}

#[rstest]
#[case::no_volume_id(|r: &mut NodePublishVolumeRequest| r.volume_id.clear(), "volume_id is required")]
#[case::no_target(|r: &mut NodePublishVolumeRequest| r.target_path.clear(), "target_path is required")]
#[case::no_capability(|r: &mut NodePublishVolumeRequest| r.volume_capability = None, "volume_capability is required")]
#[case::no_access_type(
    |r: &mut NodePublishVolumeRequest| r.volume_capability = Some(VolumeCapability::default()),
    "volume_capability.access_type is required"
)]
#[case::block(
    |r: &mut NodePublishVolumeRequest| r.volume_capability = Some(VolumeCapability {
        access_type: Some(volume_capability::AccessType::Block(Default::default())),
        access_mode: None,
    }),
    "volume_capability.block is not supported"
)]
#[case::no_server(|r: &mut NodePublishVolumeRequest| { r.volume_context.remove("server"); }, "volume_context.server is required")]
#[case::blank_share(
    |r: &mut NodePublishVolumeRequest| { r.volume_context.insert("share".into(), " ".into()); },
    "volume_context.share is required"
)]
#[tokio::test]
async fn publish_arguments_are_validated(
    #[case] spoil: fn(&mut NodePublishVolumeRequest),
    #[case] expected: &str,
) {
    let plugin = Plugin::start_local(&[]).await;
    let mut request = valid(&plugin);
    spoil(&mut request);
    let status = plugin
        .node()
        .node_publish_volume(request)
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(
        status.message().contains(expected),
        "{:?} lacks {expected:?}",
        status.message()
    );
    assert!(
        !plugin.target("pod").exists(),
        "nothing is created for a bad request"
    );
}

#[tokio::test]
async fn unpublish_and_stats_arguments_are_validated() {
    let plugin = Plugin::start_local(&[]).await;
    let mut node = plugin.node();
    let status = node
        .node_unpublish_volume(unpublish_request(Path::new("")))
        .await
        .unwrap_err();
    assert_eq!(
        (status.code(), status.message()),
        (Code::InvalidArgument, "target_path is required")
    );

    let mut no_id = unpublish_request(Path::new("/x"));
    no_id.volume_id.clear();
    let status = node.node_unpublish_volume(no_id).await.unwrap_err();
    assert_eq!(
        (status.code(), status.message()),
        (Code::InvalidArgument, "volume_id is required")
    );

    let status = node
        .node_get_volume_stats(NodeGetVolumeStatsRequest {
            volume_id: "vol-1".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        (status.code(), status.message()),
        (Code::InvalidArgument, "volume_path is required")
    );

    let missing = plugin.dir.path().join("no-such-volume");
    let status = node
        .node_get_volume_stats(NodeGetVolumeStatsRequest {
            volume_id: "vol-1".into(),
            volume_path: missing.display().to_string(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    assert_eq!(
        status.message(),
        format!("volume path {} does not exist", missing.display())
    );
}

#[tokio::test]
async fn the_local_mounter_refuses_remote_servers_naming_the_server() {
    let plugin = Plugin::start_local(&[]).await;
    let request = publish_request("203.0.113.7", &plugin.export("s"), &plugin.target("pod"));
    let status = plugin
        .node()
        .node_publish_volume(request)
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::FailedPrecondition);
    assert!(
        status
            .message()
            .contains("server \"203.0.113.7\" is not a local address"),
        "{status:?}"
    );
    assert!(
        !plugin.target("pod").exists(),
        "the failed publish left its target directory"
    );
}

#[tokio::test]
async fn a_missing_export_directory_is_not_found_and_named() {
    let plugin = Plugin::start_local(&[]).await;
    let missing = plugin.dir.path().join("exports/never-created");
    let request = publish_request("127.0.0.1", &missing, &plugin.target("pod"));
    let status = plugin
        .node()
        .node_publish_volume(request)
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    assert_eq!(
        status.message(),
        format!(
            "export directory {} for 127.0.0.1:{} does not exist",
            missing.display(),
            missing.display()
        )
    );
}

#[tokio::test]
async fn staging_and_expansion_are_unimplemented() {
    let plugin = Plugin::start_local(&[]).await;
    let mut node = plugin.node();
    let stage = node
        .node_stage_volume(NodeStageVolumeRequest::default())
        .await
        .unwrap_err();
    let unstage = node
        .node_unstage_volume(NodeUnstageVolumeRequest::default())
        .await
        .unwrap_err();
    let expand = node
        .node_expand_volume(NodeExpandVolumeRequest::default())
        .await
        .unwrap_err();
    for status in [stage, unstage, expand] {
        assert_eq!(status.code(), Code::Unimplemented, "{status:?}");
    }
}

/// This machine has no NFS client, so the kernel mounter must refuse to start, saying why.
#[tokio::test]
async fn the_kernel_mounter_refuses_to_start_without_an_nfs_client() {
    let filesystems = std::fs::read_to_string("/proc/filesystems").unwrap();
    let has_nfs = filesystems
        .lines()
        .any(|l| l.ends_with("\tnfs") || l.ends_with("\tnfs4"));
    let has_helper = ["/sbin/mount.nfs", "/usr/sbin/mount.nfs"]
        .iter()
        .any(|p| Path::new(p).exists());
    if has_nfs && has_helper {
        eprintln!("skipped: this machine has an NFS client");
        return;
    }
    let error = match Plugin::start(&["--mounter=kernel", "--nodeid=n1"]).await {
        Ok(_) => panic!("the kernel mounter started without an NFS client"),
        Err(error) => error,
    };
    assert!(
        error.contains("the kernel mounter cannot work here"),
        "{error}"
    );
    assert!(
        error.contains("NFS client") || error.contains("mount.nfs"),
        "{error}"
    );
}

#[tokio::test]
async fn a_missing_socket_directory_stops_start_up_naming_it() {
    let error = match Plugin::start(&[
        "--mounter=local",
        "--nodeid=n1",
        "--endpoint=unix:///no/such/dir/csi.sock",
    ])
    .await
    {
        Ok(_) => panic!("started without its socket directory"),
        Err(error) => error,
    };
    assert!(
        error.contains("directory /no/such/dir does not exist"),
        "{error}"
    );
}

#[tokio::test]
async fn an_empty_node_id_stops_start_up() {
    let error = match Plugin::start(&["--mounter=local", "--nodeid="]).await {
        Ok(_) => panic!("started with an empty node id"),
        Err(error) => error,
    };
    assert!(error.contains("--nodeid must not be empty"), "{error}");
}

#[rstest]
#[case::climbing_out("exports/share/../../secret")]
#[case::parent_at_the_end("secret/inner/..")]
#[tokio::test]
async fn a_share_path_with_parent_components_is_refused(#[case] relative: &str) {
    let plugin = Plugin::start_local(&[]).await;
    plugin.export("share");
    // A directory that is not an export, reachable through `..`.
    std::fs::create_dir_all(plugin.dir.path().join("secret/inner")).unwrap();
    let share = plugin.dir.path().join(relative);
    let request = publish_request("127.0.0.1", &share, &plugin.target("pod"));
    let status = plugin
        .node()
        .node_publish_volume(request)
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(
        status.message().starts_with(&format!(
            "volume_context.share {:?} contains \"..\"",
            share.display().to_string()
        )),
        "{}",
        status.message()
    );
    assert!(
        !plugin.target("pod").exists(),
        "the refused publish left its target directory"
    );
}

#[tokio::test]
async fn a_share_path_through_a_symlink_out_of_the_export_root_is_refused() {
    let root = tempfile::Builder::new()
        .prefix("bad_input-root-")
        .tempdir()
        .unwrap();
    let outside = tempfile::Builder::new()
        .prefix("bad_input-outside-")
        .tempdir()
        .unwrap();
    std::os::unix::fs::symlink(outside.path(), root.path().join("escape")).unwrap();
    let root_flag = format!("--local-export-root={}", root.path().display());
    let plugin = Plugin::start_local(&[root_flag.as_str()]).await;
    let request = publish_request("127.0.0.1", Path::new("/escape"), &plugin.target("pod"));
    let status = plugin
        .node()
        .node_publish_volume(request)
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(
        status.message().contains("outside the export root"),
        "{}",
        status.message()
    );
}
