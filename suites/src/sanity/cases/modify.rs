//! ModifyVolume [Controller Server] cases (volume attribute classes).

use std::collections::HashMap;

use csi_proto::v1;
use tonic::Code;

use crate::sanity::case::{Case, case};
use crate::sanity::context::CaseContext;
use crate::sanity::session::ControllerCap;
use crate::sanity::verdict::{CaseResult, expect_code, expect_ok};

const GROUP: &str = "ModifyVolume [Controller Server]";

/// The modification cases.
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
            "should fail if volume does not exist",
            unknown_volume
        ),
        case!(
            GROUP,
            "",
            "should fail if specified mutable parameters are not supported by the volume",
            unsupported_parameters
        ),
        case!(
            GROUP,
            "",
            "should modify a volume created without a volume attribute class",
            modify_plain
        ),
        case!(
            GROUP,
            "",
            "should modify a volume created with a volume attribute class",
            modify_with_class
        ),
        case!(
            GROUP,
            "",
            "should fail to modify a volume created with a volume attribute class if new mutable parameters are not supported by volume",
            unsupported_parameters_with_class
        ),
    ]
}

fn require_modify(cx: &CaseContext) -> CaseResult {
    cx.require_controller(
        ControllerCap::ModifyVolume,
        "ControllerModifyVolume not supported",
    )
}

fn modify_request(
    cx: &CaseContext,
    volume_id: &str,
    parameters: HashMap<String, String>,
) -> v1::ControllerModifyVolumeRequest {
    v1::ControllerModifyVolumeRequest {
        volume_id: volume_id.to_owned(),
        secrets: cx.config().secrets.controller_modify_volume_secret.clone(),
        mutable_parameters: parameters,
    }
}

fn fake_parameters() -> HashMap<String, String> {
    [("XXX_FakeKey".to_owned(), "XXX_FakeValue".to_owned())].into()
}

async fn new_volume(cx: &mut CaseContext, with_class: bool) -> CaseResult<v1::Volume> {
    let mut request = cx.create_request_exact(&cx.unique("sanity-modify-volume"));
    if with_class {
        request.mutable_parameters = cx.config().test_volume_mutable_parameters.clone();
    }
    cx.must_create_volume(request).await
}

async fn no_volume_id(cx: &mut CaseContext) -> CaseResult {
    require_modify(cx)?;
    let request = modify_request(cx, "", cx.config().test_volume_mutable_parameters.clone());
    expect_code(
        cx.controller().controller_modify_volume(request).await,
        Code::InvalidArgument,
        "ControllerModifyVolume without a volume id",
    )
}

async fn unknown_volume(cx: &mut CaseContext) -> CaseResult {
    require_modify(cx)?;
    let request = modify_request(
        cx,
        "non-existing-volume-id",
        cx.config().test_volume_mutable_parameters.clone(),
    );
    expect_code(
        cx.controller().controller_modify_volume(request).await,
        Code::NotFound,
        "ControllerModifyVolume of a volume that does not exist",
    )
}

async fn reject_fake(cx: &mut CaseContext, with_class: bool) -> CaseResult {
    require_modify(cx)?;
    cx.require_provisioning()?;
    let volume = new_volume(cx, with_class).await?;
    let request = modify_request(cx, &volume.volume_id, fake_parameters());
    expect_code(
        cx.controller().controller_modify_volume(request).await,
        Code::InvalidArgument,
        "ControllerModifyVolume with unsupported mutable parameters",
    )
}

async fn unsupported_parameters(cx: &mut CaseContext) -> CaseResult {
    reject_fake(cx, false).await
}

async fn unsupported_parameters_with_class(cx: &mut CaseContext) -> CaseResult {
    reject_fake(cx, true).await
}

async fn modify(cx: &mut CaseContext, with_class: bool) -> CaseResult {
    require_modify(cx)?;
    cx.require_provisioning()?;
    let volume = new_volume(cx, with_class).await?;
    let request = modify_request(
        cx,
        &volume.volume_id,
        cx.config().test_volume_mutable_parameters.clone(),
    );
    expect_ok(
        cx.controller().controller_modify_volume(request).await,
        "ControllerModifyVolume",
    )?;
    Ok(())
}

async fn modify_plain(cx: &mut CaseContext) -> CaseResult {
    modify(cx, false).await
}

async fn modify_with_class(cx: &mut CaseContext) -> CaseResult {
    modify(cx, true).await
}
