//! ListSnapshots, DeleteSnapshot and CreateSnapshot cases.

use csi_proto::v1;
use tonic::Code;

use super::volumes::MAX_NAME_LENGTH;
use crate::sanity::case::{Case, case};
use crate::sanity::context::{CaseContext, verify_snapshot};
use crate::sanity::session::ControllerCap;
use crate::sanity::verdict::{
    CaseResult, Verdict, describe_status, ensure, expect_code, expect_ok,
};

const LIST: &str = "ListSnapshots [Controller Server]";
const DELETE: &str = "DeleteSnapshot [Controller Server]";
const CREATE: &str = "CreateSnapshot [Controller Server]";

/// The snapshot cases.
pub fn cases() -> Vec<Case> {
    vec![
        case!(
            LIST,
            "",
            "should return appropriate values (no optional values added)",
            list_all
        ),
        case!(
            LIST,
            "",
            "should return snapshots that match the specified snapshot id",
            list_by_id
        ),
        case!(
            LIST,
            "",
            "should return empty when the specified snapshot id does not exist",
            list_unknown_id
        ),
        case!(
            LIST,
            "",
            "should return snapshots that match the specified source volume id",
            list_by_source
        ),
        case!(
            LIST,
            "",
            "should return empty when the specified source volume id does not exist",
            list_unknown_source
        ),
        case!(
            LIST,
            "",
            "check the presence of new snapshots in the snapshot list",
            list_tracks_changes
        ),
        case!(
            LIST,
            "",
            "should return next token when a limited number of entries are requested",
            list_pagination
        ),
        case!(
            DELETE,
            "",
            "should fail when no snapshot id is provided",
            delete_no_id
        ),
        case!(
            DELETE,
            "",
            "should succeed when an invalid snapshot id is used",
            delete_unknown_id
        ),
        case!(
            DELETE,
            "",
            "should return appropriate values (no optional values added)",
            delete_created
        ),
        case!(
            CREATE,
            "",
            "should fail when no name is provided",
            create_no_name
        ),
        case!(
            CREATE,
            "",
            "should fail when no source volume id is provided",
            create_no_source
        ),
        case!(
            CREATE,
            "",
            "should succeed when requesting to create a snapshot with already existing name and same source volume ID",
            create_twice
        ),
        case!(
            CREATE,
            "",
            "should fail when requesting to create a snapshot with already existing name and different source volume ID",
            create_same_name_other_source
        ),
        case!(
            CREATE,
            "",
            "should succeed when creating snapshot with maximum-length name",
            create_max_length_name
        ),
    ]
}

fn require_list(cx: &CaseContext) -> CaseResult {
    cx.require_controller(ControllerCap::ListSnapshots, "ListSnapshots not supported")
}

fn require_snapshots(cx: &CaseContext) -> CaseResult {
    cx.require_controller(
        ControllerCap::CreateDeleteSnapshot,
        "CreateSnapshot/DeleteSnapshot not supported",
    )
}

async fn list(
    cx: &CaseContext,
    mut request: v1::ListSnapshotsRequest,
) -> CaseResult<Vec<v1::Snapshot>> {
    request.secrets = cx.config().secrets.list_snapshots_secret.clone();
    let response = expect_ok(
        cx.controller().list_snapshots(request).await,
        "ListSnapshots",
    )?;
    Ok(response
        .entries
        .into_iter()
        .map(|e| e.snapshot.unwrap_or_default())
        .collect())
}

async fn list_all(cx: &mut CaseContext) -> CaseResult {
    require_list(cx)?;
    for snapshot in list(cx, v1::ListSnapshotsRequest::default()).await? {
        verify_snapshot(&snapshot, "ListSnapshots entry")?;
    }
    Ok(())
}

/// Three snapshots of three new volumes; the middle one is the target.
async fn three_snapshots(cx: &mut CaseContext, tag: &str) -> CaseResult<v1::Snapshot> {
    let mut target = None;
    for role in ["unrelated-1", "target", "unrelated-2"] {
        let (_, snapshot) = cx
            .snapshot_of_new_volume(
                &cx.unique(&format!("listSnapshots-volume-{role}-{tag}")),
                &cx.unique(&format!("listSnapshots-snapshot-{role}-{tag}")),
            )
            .await?;
        if role == "target" {
            target = Some(snapshot);
        }
    }
    target.ok_or_else(|| Verdict::Fail("no target snapshot".into()))
}

async fn list_by_id(cx: &mut CaseContext) -> CaseResult {
    require_list(cx)?;
    cx.require_provisioning()?;
    let target = three_snapshots(cx, "s").await?;
    let found = list(
        cx,
        v1::ListSnapshotsRequest {
            snapshot_id: target.snapshot_id.clone(),
            ..Default::default()
        },
    )
    .await?;
    ensure(found.len() == 1, || {
        format!(
            "ListSnapshots by id returned {} entries, expected 1",
            found.len()
        )
    })?;
    verify_snapshot(&found[0], "ListSnapshots by id")?;
    ensure(found[0].snapshot_id == target.snapshot_id, || {
        format!(
            "ListSnapshots by id {} returned {}",
            target.snapshot_id, found[0].snapshot_id
        )
    })
}

async fn list_unknown_id(cx: &mut CaseContext) -> CaseResult {
    require_list(cx)?;
    let found = list(
        cx,
        v1::ListSnapshotsRequest {
            snapshot_id: "none-exist-id".into(),
            ..Default::default()
        },
    )
    .await?;
    ensure(found.is_empty(), || {
        format!(
            "ListSnapshots of an unknown id returned {} entries",
            found.len()
        )
    })
}

async fn list_by_source(cx: &mut CaseContext) -> CaseResult {
    require_list(cx)?;
    cx.require_provisioning()?;
    let target = three_snapshots(cx, "v").await?;
    let found = list(
        cx,
        v1::ListSnapshotsRequest {
            source_volume_id: target.source_volume_id.clone(),
            ..Default::default()
        },
    )
    .await?;
    ensure(found.len() == 1, || {
        format!(
            "ListSnapshots by source volume returned {} entries, expected 1",
            found.len()
        )
    })?;
    verify_snapshot(&found[0], "ListSnapshots by source volume")?;
    ensure(found[0].source_volume_id == target.source_volume_id, || {
        format!(
            "ListSnapshots by source volume {} returned a snapshot of {}",
            target.source_volume_id, found[0].source_volume_id
        )
    })
}

async fn list_unknown_source(cx: &mut CaseContext) -> CaseResult {
    require_list(cx)?;
    let found = list(
        cx,
        v1::ListSnapshotsRequest {
            source_volume_id: cx.unknown_volume_id(),
            ..Default::default()
        },
    )
    .await?;
    ensure(found.is_empty(), || {
        format!(
            "ListSnapshots of an unknown source volume returned {} entries",
            found.len()
        )
    })
}

async fn list_tracks_changes(cx: &mut CaseContext) -> CaseResult {
    require_list(cx)?;
    cx.require_provisioning()?;
    let before = list(cx, v1::ListSnapshotsRequest::default()).await?.len();
    let (_, snapshot) = cx
        .snapshot_of_new_volume(
            &cx.unique("listSnapshots-volume-3"),
            &cx.unique("listSnapshots-snapshot-3"),
        )
        .await?;
    let during = list(cx, v1::ListSnapshotsRequest::default()).await?.len();
    ensure(during == before + 1, || {
        format!("ListSnapshots: {before} snapshots before the create, {during} after")
    })?;
    cx.delete_snapshot(&snapshot.snapshot_id)
        .await
        .map_err(|s| Verdict::Fail(format!("DeleteSnapshot failed: {}", describe_status(&s))))?;
    let after = list(cx, v1::ListSnapshotsRequest::default()).await?.len();
    ensure(after == before, || {
        format!("ListSnapshots: {before} snapshots before, {after} after deleting the new one")
    })
}

async fn list_pagination(cx: &mut CaseContext) -> CaseResult {
    require_list(cx)?;
    cx.require_provisioning()?;
    const MIN_SNAPSHOTS: usize = 5;
    const PAGE: usize = 2;
    let existing = list(cx, v1::ListSnapshotsRequest::default()).await?.len();
    for i in existing..MIN_SNAPSHOTS {
        cx.snapshot_of_new_volume(
            &cx.unique(&format!("volume{i}")),
            &cx.unique(&format!("snapshot{i}")),
        )
        .await?;
    }
    let total = existing.max(MIN_SNAPSHOTS);
    let mut request = v1::ListSnapshotsRequest {
        max_entries: PAGE as i32,
        secrets: cx.config().secrets.list_snapshots_secret.clone(),
        ..Default::default()
    };
    let first = expect_ok(
        cx.controller().list_snapshots(request.clone()).await,
        "ListSnapshots",
    )?;
    ensure(first.entries.len() == PAGE, || {
        format!(
            "ListSnapshots with max_entries {PAGE} returned {} entries",
            first.entries.len()
        )
    })?;
    request.max_entries = 0;
    request.starting_token = first.next_token;
    let rest = expect_ok(
        cx.controller().list_snapshots(request).await,
        "ListSnapshots",
    )?;
    ensure(rest.entries.len() == total - PAGE, || {
        format!(
            "ListSnapshots from the next token returned {} entries, expected the remaining {}",
            rest.entries.len(),
            total - PAGE
        )
    })
}

async fn delete_no_id(cx: &mut CaseContext) -> CaseResult {
    require_snapshots(cx)?;
    expect_code(
        cx.delete_snapshot("").await,
        Code::InvalidArgument,
        "DeleteSnapshot without a snapshot id",
    )
}

async fn delete_unknown_id(cx: &mut CaseContext) -> CaseResult {
    require_snapshots(cx)?;
    cx.delete_snapshot("reallyfakesnapshotid")
        .await
        .map_err(|s| {
            Verdict::Fail(format!(
                "DeleteSnapshot of an unknown id must succeed, got {}",
                describe_status(&s)
            ))
        })
}

async fn delete_created(cx: &mut CaseContext) -> CaseResult {
    require_snapshots(cx)?;
    cx.require_provisioning()?;
    let (_, snapshot) = cx
        .snapshot_of_new_volume(
            &cx.unique("DeleteSnapshot-volume-1"),
            &cx.unique("DeleteSnapshot-snapshot-1"),
        )
        .await?;
    cx.delete_snapshot(&snapshot.snapshot_id)
        .await
        .map_err(|s| {
            Verdict::Fail(format!(
                "DeleteSnapshot {} failed: {}",
                snapshot.snapshot_id,
                describe_status(&s)
            ))
        })
}

async fn create_no_name(cx: &mut CaseContext) -> CaseResult {
    require_snapshots(cx)?;
    let request = cx.snapshot_request("", "testId");
    expect_code(
        cx.create_snapshot(request).await,
        Code::InvalidArgument,
        "CreateSnapshot without a name",
    )
}

async fn create_no_source(cx: &mut CaseContext) -> CaseResult {
    require_snapshots(cx)?;
    let request = cx.snapshot_request("name", "");
    expect_code(
        cx.create_snapshot(request).await,
        Code::InvalidArgument,
        "CreateSnapshot without a source volume id",
    )
}

async fn create_twice(cx: &mut CaseContext) -> CaseResult {
    require_snapshots(cx)?;
    cx.require_provisioning()?;
    let volume = cx
        .must_create_volume(cx.create_request_exact(&cx.unique("CreateSnapshot-volume-1")))
        .await?;
    let request = cx.snapshot_request(&cx.unique("CreateSnapshot-snapshot-1"), &volume.volume_id);
    let first = cx.must_create_snapshot(request.clone()).await?;
    let second = cx.must_create_snapshot(request).await?;
    ensure(first.snapshot_id == second.snapshot_id, || {
        format!(
            "the same name and source gave two snapshots: {} then {}",
            first.snapshot_id, second.snapshot_id
        )
    })
}

async fn create_same_name_other_source(cx: &mut CaseContext) -> CaseResult {
    require_snapshots(cx)?;
    cx.require_provisioning()?;
    let name = cx.unique("CreateSnapshot-snapshot-2");
    cx.snapshot_of_new_volume(&cx.unique("CreateSnapshot-volume-2"), &name)
        .await?;
    let other = cx
        .must_create_volume(cx.create_request_exact(&cx.unique("CreateSnapshot-volume-3")))
        .await?;
    expect_code(
        cx.create_snapshot(cx.snapshot_request(&name, &other.volume_id))
            .await,
        Code::AlreadyExists,
        "CreateSnapshot with an existing name and another source volume",
    )
}

async fn create_max_length_name(cx: &mut CaseContext) -> CaseResult {
    require_snapshots(cx)?;
    cx.require_provisioning()?;
    let volume = cx
        .must_create_volume(
            cx.create_request_exact(&cx.unique("CreateSnapshot-volume-maxlen-name")),
        )
        .await?;
    let name = cx.unique_with_length("CreateSnapshot-snapshot-maxlen", MAX_NAME_LENGTH);
    let request = cx.snapshot_request(&name, &volume.volume_id);
    cx.must_create_snapshot(request.clone()).await?;
    cx.must_create_snapshot(request).await?;
    Ok(())
}
