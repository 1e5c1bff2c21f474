//! Node Service cases: capabilities, NodeGetInfo, argument checks of every Node RPC,
//! NodeGetVolumeStats, NodeExpandVolume, and the full volume lifecycle.

use csi_proto::v1::plugin_capability::service;
use csi_proto::v1::{self, CapacityRange};
use tonic::Code;

use super::publish::node_requirement;
use crate::sanity::PathKind;
use crate::sanity::case::{Case, case};
use crate::sanity::context::CaseContext;
use crate::sanity::session::{ControllerCap, NodeCap};
use crate::sanity::verdict::{
    CaseResult, Verdict, describe_status, ensure, expect_code, expect_ok, require,
};

const GROUP: &str = "Node Service";

/// The Node cases.
pub fn cases() -> Vec<Case> {
    vec![
        case!(
            GROUP,
            "NodeGetCapabilities",
            "should return appropriate capabilities",
            capabilities
        ),
        case!(
            GROUP,
            "NodeGetInfo",
            "should return appropriate values",
            info
        ),
        case!(
            GROUP,
            "NodePublishVolume",
            "should fail when no volume id is provided",
            publish_no_volume_id
        ),
        case!(
            GROUP,
            "NodePublishVolume",
            "should fail when no target path is provided",
            publish_no_target
        ),
        case!(
            GROUP,
            "NodePublishVolume",
            "should fail when no volume capability is provided",
            publish_no_capability
        ),
        case!(
            GROUP,
            "NodeUnpublishVolume",
            "should fail when no volume id is provided",
            unpublish_no_volume_id
        ),
        case!(
            GROUP,
            "NodeUnpublishVolume",
            "should fail when no target path is provided",
            unpublish_no_target
        ),
        case!(
            GROUP,
            "NodeUnpublishVolume",
            "should remove target path",
            unpublish_removes_target
        ),
        case!(
            GROUP,
            "NodeStageVolume",
            "should fail when no volume id is provided",
            stage_no_volume_id
        ),
        case!(
            GROUP,
            "NodeStageVolume",
            "should fail when no staging target path is provided",
            stage_no_path
        ),
        case!(
            GROUP,
            "NodeStageVolume",
            "should fail when no volume capability is provided",
            stage_no_capability
        ),
        case!(
            GROUP,
            "NodeUnstageVolume",
            "should fail when no volume id is provided",
            unstage_no_volume_id
        ),
        case!(
            GROUP,
            "NodeUnstageVolume",
            "should fail when no staging target path is provided",
            unstage_no_path
        ),
        case!(
            GROUP,
            "NodeGetVolumeStats",
            "should fail when no volume id is provided",
            stats_no_volume_id
        ),
        case!(
            GROUP,
            "NodeGetVolumeStats",
            "should fail when no volume path is provided",
            stats_no_path
        ),
        case!(
            GROUP,
            "NodeGetVolumeStats",
            "should fail when volume is not found",
            stats_unknown_volume
        ),
        case!(
            GROUP,
            "NodeGetVolumeStats",
            "should fail when volume does not exist on the specified path",
            stats_wrong_path
        ),
        case!(
            GROUP,
            "NodeExpandVolume",
            "should fail when no volume id is provided",
            expand_no_volume_id
        ),
        case!(
            GROUP,
            "NodeExpandVolume",
            "should fail when no volume path is provided",
            expand_no_path
        ),
        case!(
            GROUP,
            "NodeExpandVolume",
            "should fail when volume is not found",
            expand_unknown_volume
        ),
        case!(
            GROUP,
            "NodeExpandVolume",
            "should work if node-expand is called after node-publish",
            expand_after_publish
        ),
        case!(GROUP, "", "should work", lifecycle_once),
        case!(GROUP, "", "should be idempotent", lifecycle_repeated),
    ]
}

async fn capabilities(cx: &mut CaseContext) -> CaseResult {
    cx.node_caps()?;
    let response = expect_ok(
        cx.node()
            .node_get_capabilities(v1::NodeGetCapabilitiesRequest {})
            .await,
        "NodeGetCapabilities",
    )?;
    for capability in response.capabilities {
        match capability.r#type {
            Some(v1::node_service_capability::Type::Rpc(rpc)) => {
                ensure(NodeCap::try_from(rpc.r#type).is_ok(), || {
                    format!("unknown node capability {}", rpc.r#type)
                })?;
            }
            None => return Err(Verdict::Fail("a node capability has no type".into())),
        }
    }
    Ok(())
}

async fn node_info(cx: &CaseContext) -> CaseResult<v1::NodeGetInfoResponse> {
    let info = expect_ok(
        cx.node().node_get_info(v1::NodeGetInfoRequest {}).await,
        "NodeGetInfo",
    )?;
    ensure(!info.node_id.is_empty(), || {
        "NodeGetInfo returned an empty node id".into()
    })?;
    Ok(info)
}

async fn info(cx: &mut CaseContext) -> CaseResult {
    cx.node_caps()?;
    let info = node_info(cx).await?;
    ensure(info.max_volumes_per_node >= 0, || {
        format!(
            "max_volumes_per_node is negative: {}",
            info.max_volumes_per_node
        )
    })?;
    if cx
        .session()
        .has_plugin_service(service::Type::VolumeAccessibilityConstraints)
    {
        ensure(info.accessible_topology.is_some(), || {
            "the plugin advertises VOLUME_ACCESSIBILITY_CONSTRAINTS but NodeGetInfo has no accessible_topology".into()
        })?;
    }
    Ok(())
}

fn publish_request(cx: &CaseContext, volume_id: &str) -> v1::NodePublishVolumeRequest {
    v1::NodePublishVolumeRequest {
        volume_id: volume_id.to_owned(),
        secrets: cx.config().secrets.node_publish_volume_secret.clone(),
        ..Default::default()
    }
}

async fn publish_no_volume_id(cx: &mut CaseContext) -> CaseResult {
    cx.node_caps()?;
    let request = publish_request(cx, "");
    expect_code(
        cx.node_publish(request).await,
        Code::InvalidArgument,
        "NodePublishVolume without a volume id",
    )
}

async fn publish_no_target(cx: &mut CaseContext) -> CaseResult {
    cx.node_caps()?;
    let request = publish_request(cx, &cx.unknown_volume_id());
    expect_code(
        cx.node_publish(request).await,
        Code::InvalidArgument,
        "NodePublishVolume without a target path",
    )
}

async fn publish_no_capability(cx: &mut CaseContext) -> CaseResult {
    cx.node_caps()?;
    let mut request = publish_request(cx, &cx.unknown_volume_id());
    request.target_path = cx.target_path();
    expect_code(
        cx.node_publish(request).await,
        Code::InvalidArgument,
        "NodePublishVolume without a volume capability",
    )
}

async fn unpublish_no_volume_id(cx: &mut CaseContext) -> CaseResult {
    cx.node_caps()?;
    expect_code(
        cx.node_unpublish("", "").await,
        Code::InvalidArgument,
        "NodeUnpublishVolume without a volume id",
    )
}

async fn unpublish_no_target(cx: &mut CaseContext) -> CaseResult {
    cx.node_caps()?;
    let id = cx.unknown_volume_id();
    expect_code(
        cx.node_unpublish(&id, "").await,
        Code::InvalidArgument,
        "NodeUnpublishVolume without a target path",
    )
}

/// A provisioned volume, controller-published to this node, staged and published at the
/// target path (each step only when the plugin has it).
async fn provision_and_publish(
    cx: &mut CaseContext,
    name: &str,
    count: u32,
) -> CaseResult<v1::Volume> {
    let info = node_info(cx).await?;
    let mut request = cx.create_request(name);
    request.accessibility_requirements = node_requirement(&info);
    let volume = cx.must_create_volume(request).await?;
    let mut publish_context = Default::default();
    if cx.has_controller(ControllerCap::PublishUnpublishVolume) {
        let response = cx
            .controller_publish(v1::ControllerPublishVolumeRequest {
                volume_id: volume.volume_id.clone(),
                node_id: info.node_id.clone(),
                volume_capability: Some(cx.writer()),
                volume_context: volume.volume_context.clone(),
                readonly: false,
                secrets: cx.config().secrets.controller_publish_volume_secret.clone(),
            })
            .await
            .map_err(|s| {
                Verdict::Fail(format!(
                    "ControllerPublishVolume failed: {}",
                    describe_status(&s)
                ))
            })?;
        publish_context = response.publish_context;
    }
    let staged = cx.has_node(NodeCap::StageUnstageVolume);
    if staged {
        for i in 0..count {
            let request = v1::NodeStageVolumeRequest {
                volume_id: volume.volume_id.clone(),
                publish_context: publish_context.clone(),
                staging_target_path: cx.staging_path(),
                volume_capability: Some(cx.writer()),
                secrets: cx.config().secrets.node_stage_volume_secret.clone(),
                volume_context: volume.volume_context.clone(),
            };
            cx.node_stage(request).await.map_err(|s| {
                Verdict::Fail(format!(
                    "NodeStageVolume #{} failed: {}",
                    i + 1,
                    describe_status(&s)
                ))
            })?;
        }
    }
    for i in 0..count {
        let request = v1::NodePublishVolumeRequest {
            volume_id: volume.volume_id.clone(),
            publish_context: publish_context.clone(),
            staging_target_path: if staged {
                cx.staging_path()
            } else {
                String::new()
            },
            target_path: cx.target_path(),
            volume_capability: Some(cx.writer()),
            readonly: false,
            secrets: cx.config().secrets.node_publish_volume_secret.clone(),
            volume_context: volume.volume_context.clone(),
        };
        cx.node_publish(request).await.map_err(|s| {
            Verdict::Fail(format!(
                "NodePublishVolume #{} failed: {}",
                i + 1,
                describe_status(&s)
            ))
        })?;
    }
    Ok(volume)
}

async fn unpublish_removes_target(cx: &mut CaseContext) -> CaseResult {
    cx.node_caps()?;
    cx.require_provisioning()?;
    let commands = &cx.config().path_commands;
    if commands.create_mount.is_some() && commands.check.is_none() {
        // As csi-sanity: a path made elsewhere cannot be looked at here.
        return Err(Verdict::Skip(
            "CreateTargetPathCmd was set, but CheckPathCmd was not. Please update your testing configuration to enable CheckPathCmd.".into(),
        ));
    }
    let volume = provision_and_publish(cx, &cx.unique("sanity-node-unpublish-volume"), 1).await?;
    let target = cx.target_path();
    let kind = cx
        .path_kind(std::path::Path::new(&target))
        .await
        .map_err(Verdict::Fail)?;
    ensure(kind != PathKind::NotFound, || {
        format!("the target path {target} does not exist after NodePublishVolume")
    })?;
    cx.node_unpublish(&volume.volume_id, &target)
        .await
        .map_err(|s| {
            Verdict::Fail(format!(
                "NodeUnpublishVolume failed: {}",
                describe_status(&s)
            ))
        })?;
    let kind = cx
        .path_kind(std::path::Path::new(&target))
        .await
        .map_err(Verdict::Fail)?;
    ensure(kind == PathKind::NotFound, || {
        format!(
            "NodeUnpublishVolume left the target path {target} (the spec says the plugin must remove it)"
        )
    })
}

fn require_stage(cx: &CaseContext) -> CaseResult {
    cx.require_node(NodeCap::StageUnstageVolume, "NodeStageVolume not supported")
}

fn stage_request(cx: &CaseContext, volume_id: &str) -> v1::NodeStageVolumeRequest {
    v1::NodeStageVolumeRequest {
        volume_id: volume_id.to_owned(),
        staging_target_path: cx.staging_path(),
        volume_capability: Some(cx.writer()),
        publish_context: [("device".to_owned(), "/dev/mock".to_owned())].into(),
        secrets: cx.config().secrets.node_stage_volume_secret.clone(),
        ..Default::default()
    }
}

async fn stage_no_volume_id(cx: &mut CaseContext) -> CaseResult {
    require_stage(cx)?;
    let request = stage_request(cx, "");
    expect_code(
        cx.node_stage(request).await,
        Code::InvalidArgument,
        "NodeStageVolume without a volume id",
    )
}

async fn stage_no_path(cx: &mut CaseContext) -> CaseResult {
    require_stage(cx)?;
    let mut request = stage_request(cx, &cx.unknown_volume_id());
    request.staging_target_path.clear();
    expect_code(
        cx.node_stage(request).await,
        Code::InvalidArgument,
        "NodeStageVolume without a staging path",
    )
}

async fn stage_no_capability(cx: &mut CaseContext) -> CaseResult {
    require_stage(cx)?;
    cx.require_provisioning()?;
    let mut create = cx.create_request(&cx.unique("sanity-node-stage-nocaps"));
    create.capacity_range = None;
    let volume = cx.must_create_volume(create).await?;
    let mut request = stage_request(cx, &volume.volume_id);
    request.volume_capability = None;
    expect_code(
        cx.node_stage(request).await,
        Code::InvalidArgument,
        "NodeStageVolume without a volume capability",
    )
}

async fn unstage_no_volume_id(cx: &mut CaseContext) -> CaseResult {
    require_stage(cx)?;
    let path = cx.staging_path();
    expect_code(
        cx.node_unstage("", &path).await,
        Code::InvalidArgument,
        "NodeUnstageVolume without a volume id",
    )
}

async fn unstage_no_path(cx: &mut CaseContext) -> CaseResult {
    require_stage(cx)?;
    let id = cx.unknown_volume_id();
    expect_code(
        cx.node_unstage(&id, "").await,
        Code::InvalidArgument,
        "NodeUnstageVolume without a staging path",
    )
}

fn require_stats(cx: &CaseContext) -> CaseResult {
    cx.require_node(NodeCap::GetVolumeStats, "NodeGetVolumeStats not supported")
}

async fn stats(
    cx: &CaseContext,
    volume_id: String,
    volume_path: &str,
) -> Result<v1::NodeGetVolumeStatsResponse, tonic::Status> {
    let request = v1::NodeGetVolumeStatsRequest {
        volume_id,
        volume_path: volume_path.to_owned(),
        staging_target_path: String::new(),
    };
    cx.node()
        .node_get_volume_stats(request)
        .await
        .map(|r| r.into_inner())
}

async fn stats_no_volume_id(cx: &mut CaseContext) -> CaseResult {
    require_stats(cx)?;
    expect_code(
        stats(cx, String::new(), "some/path").await,
        Code::InvalidArgument,
        "NodeGetVolumeStats without a volume id",
    )
}

async fn stats_no_path(cx: &mut CaseContext) -> CaseResult {
    require_stats(cx)?;
    expect_code(
        stats(cx, cx.unknown_volume_id(), "").await,
        Code::InvalidArgument,
        "NodeGetVolumeStats without a volume path",
    )
}

async fn stats_unknown_volume(cx: &mut CaseContext) -> CaseResult {
    require_stats(cx)?;
    expect_code(
        stats(cx, cx.unknown_volume_id(), "some/path").await,
        Code::NotFound,
        "NodeGetVolumeStats of an unknown volume",
    )
}

async fn stats_wrong_path(cx: &mut CaseContext) -> CaseResult {
    require_stats(cx)?;
    cx.require_provisioning()?;
    let volume = provision_and_publish(cx, &cx.unique("sanity-node-get-volume-stats"), 1).await?;
    expect_code(
        stats(cx, volume.volume_id.clone(), "some/path").await,
        Code::NotFound,
        "NodeGetVolumeStats of a published volume at a path where it is not",
    )
}

fn require_node_expansion(cx: &CaseContext) -> CaseResult {
    cx.require_node(NodeCap::ExpandVolume, "NodeExpandVolume not supported")
}

async fn expand(
    cx: &CaseContext,
    request: v1::NodeExpandVolumeRequest,
) -> Result<(), tonic::Status> {
    cx.node().node_expand_volume(request).await.map(|_| ())
}

async fn expand_no_volume_id(cx: &mut CaseContext) -> CaseResult {
    require_node_expansion(cx)?;
    let request = v1::NodeExpandVolumeRequest {
        volume_path: cx.mount_dir().display().to_string(),
        volume_capability: Some(cx.writer()),
        ..Default::default()
    };
    expect_code(
        expand(cx, request).await,
        Code::InvalidArgument,
        "NodeExpandVolume without a volume id",
    )
}

async fn expand_no_path(cx: &mut CaseContext) -> CaseResult {
    require_node_expansion(cx)?;
    cx.require_provisioning()?;
    let volume = cx
        .must_create_volume(cx.create_request(&cx.unique("sanity-node-expand-volume-valid-id")))
        .await?;
    let request = v1::NodeExpandVolumeRequest {
        volume_id: volume.volume_id,
        volume_capability: Some(cx.writer()),
        ..Default::default()
    };
    expect_code(
        expand(cx, request).await,
        Code::InvalidArgument,
        "NodeExpandVolume without a volume path",
    )
}

async fn expand_unknown_volume(cx: &mut CaseContext) -> CaseResult {
    require_node_expansion(cx)?;
    let request = v1::NodeExpandVolumeRequest {
        volume_id: cx.unknown_volume_id(),
        volume_path: "some/path".into(),
        ..Default::default()
    };
    expect_code(
        expand(cx, request).await,
        Code::NotFound,
        "NodeExpandVolume of an unknown volume",
    )
}

async fn expand_after_publish(cx: &mut CaseContext) -> CaseResult {
    require_node_expansion(cx)?;
    cx.require_provisioning()?;
    let name = cx.unique("sanity-node-expand-volume");
    let wanted = cx.config().expand_size();
    let volume = provision_and_publish(cx, &name, 1).await?;
    if cx.has_controller(ControllerCap::ExpandVolume) {
        let response = expect_ok(
            cx.controller()
                .controller_expand_volume(v1::ControllerExpandVolumeRequest {
                    volume_id: volume.volume_id.clone(),
                    capacity_range: Some(CapacityRange {
                        required_bytes: wanted,
                        limit_bytes: 0,
                    }),
                    secrets: cx.config().secrets.controller_expand_volume_secret.clone(),
                    volume_capability: None,
                })
                .await,
            "ControllerExpandVolume",
        )?;
        ensure(response.capacity_bytes == wanted, || {
            format!(
                "ControllerExpandVolume to {wanted} answered capacity {}",
                response.capacity_bytes
            )
        })?;
    }
    let request = v1::NodeExpandVolumeRequest {
        volume_id: volume.volume_id,
        volume_path: cx.target_path(),
        capacity_range: Some(CapacityRange {
            required_bytes: wanted,
            limit_bytes: 0,
        }),
        secrets: cx.config().secrets.node_expand_volume_secret.clone(),
        ..Default::default()
    };
    expand(cx, request).await.map_err(|s| {
        Verdict::Fail(format!(
            "NodeExpandVolume after NodePublishVolume failed: {}",
            describe_status(&s)
        ))
    })
}

/// csi-sanity's node lifecycle, each node call repeated `count` times, then torn down
/// explicitly (unpublish, unstage, controller unpublish, delete) `count` times too.
async fn lifecycle(cx: &mut CaseContext, count: u32) -> CaseResult {
    cx.node_caps()?;
    cx.require_provisioning()?;
    let volume =
        provision_and_publish(cx, &cx.unique(&format!("sanity-node-full-{count}")), count).await?;
    let target = cx.target_path();
    if cx.has_node(NodeCap::GetVolumeStats) {
        let response = stats(cx, volume.volume_id.clone(), &target)
            .await
            .map_err(|s| {
                Verdict::Fail(format!(
                    "NodeGetVolumeStats failed: {}",
                    describe_status(&s)
                ))
            })?;
        ensure(!response.usage.is_empty(), || {
            "NodeGetVolumeStats returned no usage".into()
        })?;
    }
    for i in 0..count {
        cx.node_unpublish(&volume.volume_id, &target)
            .await
            .map_err(|s| {
                Verdict::Fail(format!(
                    "NodeUnpublishVolume #{} failed: {}",
                    i + 1,
                    describe_status(&s)
                ))
            })?;
    }
    if cx.has_node(NodeCap::StageUnstageVolume) {
        let path = cx.staging_path();
        for i in 0..count {
            cx.node_unstage(&volume.volume_id, &path)
                .await
                .map_err(|s| {
                    Verdict::Fail(format!(
                        "NodeUnstageVolume #{} failed: {}",
                        i + 1,
                        describe_status(&s)
                    ))
                })?;
        }
    }
    if cx.has_controller(ControllerCap::PublishUnpublishVolume) {
        let node_id = node_info(cx).await?.node_id;
        cx.controller_unpublish(&volume.volume_id, &node_id)
            .await
            .map_err(|s| {
                Verdict::Fail(format!(
                    "ControllerUnpublishVolume failed: {}",
                    describe_status(&s)
                ))
            })?;
    }
    cx.delete_volume(&volume.volume_id)
        .await
        .map_err(|s| Verdict::Fail(format!("DeleteVolume failed: {}", describe_status(&s))))
}

async fn lifecycle_once(cx: &mut CaseContext) -> CaseResult {
    lifecycle(cx, 1).await
}

async fn lifecycle_repeated(cx: &mut CaseContext) -> CaseResult {
    let count = cx.config().idempotent_count;
    require(count > 0, "the idempotency count is zero")?;
    lifecycle(cx, count).await
}
