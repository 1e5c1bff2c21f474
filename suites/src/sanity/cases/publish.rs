//! Controller Service cases about ControllerPublish/UnpublishVolume and the controller
//! volume lifecycle.

use csi_proto::v1::{self, Topology, TopologyRequirement};
use tonic::Code;

use super::volumes::GROUP;
use crate::sanity::case::{Case, case};
use crate::sanity::context::CaseContext;
use crate::sanity::session::ControllerCap;
use crate::sanity::verdict::{
    CaseResult, Verdict, describe_status, ensure, expect_code, expect_ok, require,
};

/// The publish cases.
pub fn cases() -> Vec<Case> {
    vec![
        case!(
            GROUP,
            "ControllerPublishVolume",
            "should fail when no volume id is provided",
            publish_no_volume_id
        ),
        case!(
            GROUP,
            "ControllerPublishVolume",
            "should fail when no node id is provided",
            publish_no_node_id
        ),
        case!(
            GROUP,
            "ControllerPublishVolume",
            "should fail when no volume capability is provided",
            publish_no_capability
        ),
        case!(
            GROUP,
            "ControllerPublishVolume",
            "should fail when publishing more volumes than the node max attach limit",
            publish_over_attach_limit
        ),
        case!(
            GROUP,
            "ControllerPublishVolume",
            "should fail when the volume does not exist",
            publish_unknown_volume
        ),
        case!(
            GROUP,
            "ControllerPublishVolume",
            "should fail when the node does not exist",
            publish_unknown_node
        ),
        case!(
            GROUP,
            "ControllerPublishVolume",
            "should fail when the volume is already published but is incompatible",
            publish_incompatible
        ),
        case!(GROUP, "volume lifecycle", "should work", lifecycle_once),
        case!(
            GROUP,
            "volume lifecycle",
            "should be idempotent",
            lifecycle_repeated
        ),
        case!(
            GROUP,
            "ControllerUnpublishVolume",
            "should fail when no volume id is provided",
            unpublish_no_volume_id
        ),
    ]
}

fn require_publish(cx: &CaseContext) -> CaseResult {
    cx.require_controller(
        ControllerCap::PublishUnpublishVolume,
        "ControllerPublishVolume not supported",
    )
}

fn publish_request(
    cx: &CaseContext,
    volume_id: &str,
    node_id: &str,
) -> v1::ControllerPublishVolumeRequest {
    v1::ControllerPublishVolumeRequest {
        volume_id: volume_id.to_owned(),
        node_id: node_id.to_owned(),
        volume_capability: Some(cx.writer()),
        readonly: false,
        secrets: cx.config().secrets.controller_publish_volume_secret.clone(),
        ..Default::default()
    }
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

/// Topology requirement for a volume usable on the node (csi-sanity assumes a one-node
/// setup and honours the node's topology when it reports one).
pub fn node_requirement(info: &v1::NodeGetInfoResponse) -> Option<TopologyRequirement> {
    info.accessible_topology
        .as_ref()
        .map(|topology: &Topology| TopologyRequirement {
            requisite: vec![topology.clone()],
            preferred: Vec::new(),
        })
}

async fn publish_no_volume_id(cx: &mut CaseContext) -> CaseResult {
    require_publish(cx)?;
    let mut request = publish_request(cx, "", "");
    request.volume_capability = None;
    expect_code(
        cx.controller_publish(request).await,
        Code::InvalidArgument,
        "ControllerPublishVolume without a volume id",
    )
}

async fn publish_no_node_id(cx: &mut CaseContext) -> CaseResult {
    require_publish(cx)?;
    let mut request = publish_request(cx, &cx.unknown_volume_id(), "");
    request.volume_capability = None;
    expect_code(
        cx.controller_publish(request).await,
        Code::InvalidArgument,
        "ControllerPublishVolume without a node id",
    )
}

async fn publish_no_capability(cx: &mut CaseContext) -> CaseResult {
    require_publish(cx)?;
    let mut request = publish_request(cx, &cx.unknown_volume_id(), &cx.unknown_node_id());
    request.volume_capability = None;
    expect_code(
        cx.controller_publish(request).await,
        Code::InvalidArgument,
        "ControllerPublishVolume without a volume capability",
    )
}

async fn publish_over_attach_limit(cx: &mut CaseContext) -> CaseResult {
    require_publish(cx)?;
    require(
        cx.config().test_node_volume_attach_limit,
        "the node volume attach limit test is not enabled (--csi.testnodevolumeattachlimit)",
    )?;
    let info = node_info(cx).await?;
    require(
        info.max_volumes_per_node > 0,
        "the node reports no max_volumes_per_node",
    )?;
    for i in 0..info.max_volumes_per_node {
        let name = cx.unique(&format!("sanity-max-attach-limit-vol-{i}"));
        let volume = cx
            .must_create_volume(cx.create_request_exact(&name))
            .await?;
        expect_ok_publish(cx, publish_request(cx, &volume.volume_id, &info.node_id)).await?;
    }
    let extra = cx
        .must_create_volume(cx.create_request_exact(&cx.unique("sanity-max-attach-limit-vol+1")))
        .await?;
    let result = cx
        .controller_publish(publish_request(cx, &extra.volume_id, &info.node_id))
        .await;
    ensure(result.is_err(), || {
        format!(
            "publishing volume {} beyond max_volumes_per_node {} succeeded",
            info.max_volumes_per_node + 1,
            info.max_volumes_per_node
        )
    })
}

async fn expect_ok_publish(
    cx: &mut CaseContext,
    request: v1::ControllerPublishVolumeRequest,
) -> CaseResult<v1::ControllerPublishVolumeResponse> {
    let volume_id = request.volume_id.clone();
    cx.controller_publish(request).await.map_err(|s| {
        Verdict::Fail(format!(
            "ControllerPublishVolume {volume_id} failed: {}",
            describe_status(&s)
        ))
    })
}

async fn publish_unknown_volume(cx: &mut CaseContext) -> CaseResult {
    require_publish(cx)?;
    let request = publish_request(cx, &cx.unknown_volume_id(), &cx.unknown_node_id());
    expect_code(
        cx.controller_publish(request).await,
        Code::NotFound,
        "ControllerPublishVolume of a volume that does not exist",
    )
}

async fn publish_unknown_node(cx: &mut CaseContext) -> CaseResult {
    require_publish(cx)?;
    let volume = cx
        .must_create_volume(cx.create_request(&cx.unique("sanity-controller-wrong-node")))
        .await?;
    let request = publish_request(cx, &volume.volume_id, &cx.unknown_node_id());
    expect_code(
        cx.controller_publish(request).await,
        Code::NotFound,
        "ControllerPublishVolume to a node that does not exist",
    )
}

async fn publish_incompatible(cx: &mut CaseContext) -> CaseResult {
    require_publish(cx)?;
    cx.require_controller(
        ControllerCap::PublishReadonly,
        "ControllerPublishVolume.readonly not supported",
    )?;
    let volume = cx
        .must_create_volume(
            cx.create_request(&cx.unique("sanity-controller-published-incompatible")),
        )
        .await?;
    let info = node_info(cx).await?;
    let mut request = publish_request(cx, &volume.volume_id, &info.node_id);
    expect_ok_publish(cx, request.clone()).await?;
    request.readonly = true;
    expect_code(
        cx.controller_publish(request).await,
        Code::AlreadyExists,
        "ControllerPublishVolume again, read-only this time",
    )
}

/// Create, then ControllerPublish `count` times, ControllerUnpublish `count` times, delete.
async fn lifecycle(cx: &mut CaseContext, count: u32) -> CaseResult {
    require_publish(cx)?;
    let info = node_info(cx).await?;
    let mut request = cx.create_request(&cx.unique(&format!("sanity-controller-publish-{count}")));
    request.capacity_range = None;
    request.accessibility_requirements = node_requirement(&info);
    let volume = cx.must_create_volume(request).await?;
    for _ in 0..count {
        let mut publish = publish_request(cx, &volume.volume_id, &info.node_id);
        publish.volume_context = volume.volume_context.clone();
        expect_ok_publish(cx, publish).await?;
    }
    for i in 0..count {
        cx.controller_unpublish(&volume.volume_id, &info.node_id)
            .await
            .map_err(|s| {
                Verdict::Fail(format!(
                    "ControllerUnpublishVolume #{} failed: {}",
                    i + 1,
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

async fn unpublish_no_volume_id(cx: &mut CaseContext) -> CaseResult {
    require_publish(cx)?;
    expect_code(
        cx.controller_unpublish("", "").await,
        Code::InvalidArgument,
        "ControllerUnpublishVolume without a volume id",
    )
}
