//! ExpandVolume [Controller Server] cases.

use csi_proto::v1::{self, CapacityRange};
use tonic::Code;

use crate::sanity::case::{Case, case};
use crate::sanity::context::CaseContext;
use crate::sanity::session::ControllerCap;
use crate::sanity::verdict::{CaseResult, ensure, expect_code, expect_ok};

const GROUP: &str = "ExpandVolume [Controller Server]";

/// The controller expansion cases.
pub fn cases() -> Vec<Case> {
    vec![
        case!(
            GROUP,
            "",
            "should fail if no volume id is given",
            no_volume_id
        ),
        case!(
            GROUP,
            "",
            "should fail if no capacity range is given",
            no_capacity_range
        ),
        case!(GROUP, "", "should work", expands),
    ]
}

fn require_expansion(cx: &CaseContext) -> CaseResult {
    cx.require_controller(
        ControllerCap::ExpandVolume,
        "ControllerExpandVolume not supported",
    )
}

fn expand_request(cx: &CaseContext, volume_id: &str) -> v1::ControllerExpandVolumeRequest {
    v1::ControllerExpandVolumeRequest {
        volume_id: volume_id.to_owned(),
        capacity_range: Some(CapacityRange {
            required_bytes: cx.config().expand_size(),
            limit_bytes: 0,
        }),
        secrets: cx.config().secrets.controller_expand_volume_secret.clone(),
        volume_capability: Some(cx.writer()),
    }
}

async fn no_volume_id(cx: &mut CaseContext) -> CaseResult {
    require_expansion(cx)?;
    let mut request = expand_request(cx, "");
    request.volume_capability = None;
    expect_code(
        cx.controller().controller_expand_volume(request).await,
        Code::InvalidArgument,
        "ControllerExpandVolume without a volume id",
    )
}

async fn no_capacity_range(cx: &mut CaseContext) -> CaseResult {
    require_expansion(cx)?;
    // As csi-sanity: the volume id is missing too, so either check may answer.
    let mut request = expand_request(cx, "");
    request.capacity_range = None;
    request.volume_capability = None;
    expect_code(
        cx.controller().controller_expand_volume(request).await,
        Code::InvalidArgument,
        "ControllerExpandVolume without a capacity range",
    )
}

async fn expands(cx: &mut CaseContext) -> CaseResult {
    require_expansion(cx)?;
    cx.require_provisioning()?;
    let volume = cx
        .must_create_volume(cx.create_request(&cx.unique("sanity-expand-volume")))
        .await?;
    let response = expect_ok(
        cx.controller()
            .controller_expand_volume(expand_request(cx, &volume.volume_id))
            .await,
        "ControllerExpandVolume",
    )?;
    let wanted = cx.config().expand_size();
    ensure(response.capacity_bytes == wanted, || {
        format!(
            "ControllerExpandVolume to {wanted} bytes answered capacity {}",
            response.capacity_bytes
        )
    })
}
