//! GroupController Service cases (volume group snapshots), as csi-sanity groups them: the
//! capabilities, then the argument and not-found checks of the group snapshot RPCs. All
//! are skipped when the plugin does not advertise GROUP_CONTROLLER_SERVICE, the group
//! snapshot ones also without CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT.

use csi_proto::v1::group_controller_service_capability::{self, rpc};
use csi_proto::v1::{self, plugin_capability::service};
use tonic::Code;

use crate::sanity::case::{Case, case};
use crate::sanity::context::CaseContext;
use crate::sanity::verdict::{CaseResult, Verdict, describe_status, expect_code};

const SERVER: &str = "GroupController Service [GroupController Server]";
const SNAPSHOTS: &str = "GroupController Service [GroupController VolumeGroupSnapshots]";

/// The GroupController cases.
pub fn cases() -> Vec<Case> {
    vec![
        case!(
            SERVER,
            "GroupControllerGetCapabilities",
            "should return appropriate capabilities",
            capabilities
        ),
        case!(
            SNAPSHOTS,
            "CreateVolumeGroupSnapshot",
            "should fail when no name is provided",
            create_no_name
        ),
        case!(
            SNAPSHOTS,
            "GetVolumeGroupSnapshot",
            "should fail when no volume id is provided",
            get_no_id
        ),
        case!(
            SNAPSHOTS,
            "GetVolumeGroupSnapshot",
            "should fail when an invalid volume id is used",
            get_unknown_id
        ),
        case!(
            SNAPSHOTS,
            "DeleteVolumeGroupSnapshot",
            "should fail when no volume id is provided",
            delete_no_id
        ),
        case!(
            SNAPSHOTS,
            "DeleteVolumeGroupSnapshot",
            "should succeed when an invalid volume id is used",
            delete_unknown_id
        ),
    ]
}

/// csi-sanity asks the (node) endpoint's plugin capabilities.
fn require_service(cx: &CaseContext) -> CaseResult {
    if cx
        .session()
        .has_plugin_service(service::Type::GroupControllerService)
    {
        Ok(())
    } else {
        Err(Verdict::Skip(
            "GroupControllerService not supported: the plugin does not advertise GROUP_CONTROLLER_SERVICE".into(),
        ))
    }
}

async fn get_capabilities(
    cx: &CaseContext,
) -> CaseResult<Vec<v1::GroupControllerServiceCapability>> {
    cx.group_controller()
        .group_controller_get_capabilities(v1::GroupControllerGetCapabilitiesRequest {})
        .await
        .map(|r| r.into_inner().capabilities)
        .map_err(|s| {
            Verdict::Fail(format!(
                "GroupControllerGetCapabilities failed: {}",
                describe_status(&s)
            ))
        })
}

async fn require_group_snapshots(cx: &CaseContext) -> CaseResult {
    require_service(cx)?;
    let wanted = rpc::Type::CreateDeleteGetVolumeGroupSnapshot as i32;
    let advertised = get_capabilities(cx).await?.iter().any(|c| {
        matches!(&c.r#type, Some(group_controller_service_capability::Type::Rpc(r)) if r.r#type == wanted)
    });
    if advertised {
        Ok(())
    } else {
        Err(Verdict::Skip(
            "VolumeGroupSnapshots not supported: the group controller does not advertise CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT".into(),
        ))
    }
}

async fn capabilities(cx: &mut CaseContext) -> CaseResult {
    require_service(cx)?;
    for capability in get_capabilities(cx).await? {
        let Some(group_controller_service_capability::Type::Rpc(rpc)) = capability.r#type else {
            return Err(Verdict::Fail(
                "GroupControllerGetCapabilities returned a capability without an rpc".into(),
            ));
        };
        match rpc::Type::try_from(rpc.r#type) {
            Ok(rpc::Type::CreateDeleteGetVolumeGroupSnapshot) => {}
            _ => {
                return Err(Verdict::Fail(format!(
                    "Unknown capability: {}",
                    rpc::Type::try_from(rpc.r#type)
                        .map(|t| t.as_str_name().to_owned())
                        .unwrap_or_else(|_| rpc.r#type.to_string())
                )));
            }
        }
    }
    Ok(())
}

async fn create_no_name(cx: &mut CaseContext) -> CaseResult {
    require_group_snapshots(cx).await?;
    let request = v1::CreateVolumeGroupSnapshotRequest {
        secrets: cx.config().secrets.create_snapshot_secret.clone(),
        ..Default::default()
    };
    let result = cx
        .group_controller()
        .create_volume_group_snapshot(request)
        .await;
    // A group snapshot made against the spec is deleted again (nothing is left).
    if let Ok(response) = &result
        && let Some(group) = &response.get_ref().group_snapshot
        && !group.group_snapshot_id.is_empty()
    {
        let delete = v1::DeleteVolumeGroupSnapshotRequest {
            group_snapshot_id: group.group_snapshot_id.clone(),
            snapshot_ids: group
                .snapshots
                .iter()
                .map(|s| s.snapshot_id.clone())
                .collect(),
            secrets: cx.config().secrets.delete_snapshot_secret.clone(),
        };
        if let Err(status) = cx
            .group_controller()
            .delete_volume_group_snapshot(delete)
            .await
        {
            return Err(Verdict::Fail(format!(
                "CreateVolumeGroupSnapshot without a name succeeded (expected InvalidArgument), and deleting group snapshot {} failed: {}",
                group.group_snapshot_id,
                describe_status(&status)
            )));
        }
    }
    expect_code(
        result,
        Code::InvalidArgument,
        "CreateVolumeGroupSnapshot without a name",
    )
}

async fn get_no_id(cx: &mut CaseContext) -> CaseResult {
    require_group_snapshots(cx).await?;
    let request = v1::GetVolumeGroupSnapshotRequest {
        secrets: cx.config().secrets.list_snapshots_secret.clone(),
        ..Default::default()
    };
    expect_code(
        cx.group_controller()
            .get_volume_group_snapshot(request)
            .await,
        Code::InvalidArgument,
        "GetVolumeGroupSnapshot without a group snapshot id",
    )
}

async fn get_unknown_id(cx: &mut CaseContext) -> CaseResult {
    require_group_snapshots(cx).await?;
    let request = v1::GetVolumeGroupSnapshotRequest {
        group_snapshot_id: cx.unknown_volume_id(),
        secrets: cx.config().secrets.list_snapshots_secret.clone(),
        ..Default::default()
    };
    expect_code(
        cx.group_controller()
            .get_volume_group_snapshot(request)
            .await,
        Code::NotFound,
        "GetVolumeGroupSnapshot of a group snapshot that does not exist",
    )
}

async fn delete_no_id(cx: &mut CaseContext) -> CaseResult {
    require_group_snapshots(cx).await?;
    let request = v1::DeleteVolumeGroupSnapshotRequest {
        secrets: cx.config().secrets.delete_snapshot_secret.clone(),
        ..Default::default()
    };
    expect_code(
        cx.group_controller()
            .delete_volume_group_snapshot(request)
            .await,
        Code::InvalidArgument,
        "DeleteVolumeGroupSnapshot without a group snapshot id",
    )
}

async fn delete_unknown_id(cx: &mut CaseContext) -> CaseResult {
    require_group_snapshots(cx).await?;
    let request = v1::DeleteVolumeGroupSnapshotRequest {
        group_snapshot_id: cx.unknown_volume_id(),
        secrets: cx.config().secrets.delete_snapshot_secret.clone(),
        ..Default::default()
    };
    cx.group_controller()
        .delete_volume_group_snapshot(request)
        .await
        .map(|_| ())
        .map_err(|s| {
            Verdict::Fail(format!(
                "DeleteVolumeGroupSnapshot of a group snapshot that does not exist must succeed, got {}",
                describe_status(&s)
            ))
        })
}
