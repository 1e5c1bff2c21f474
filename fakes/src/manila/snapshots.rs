//! Share snapshots: create (async, copying the share's bytes), show, list, update, delete.

use chrono::Utc;
use serde_json::{Value, json};

use super::input::query_number;
use super::model::{Failure, MessageAction, Snapshot, SnapshotOutcome};
use super::{CopyTarget, Ctx, ManilaState, action_name, pending_outcome};
use crate::faults::Operation;
use crate::lifecycle::{Lifecycle, Pending, api_time, new_id};
use crate::reply::{Reply, bad_request, fault, not_found};

fn snapshot_not_found(id: &str) -> Reply {
    not_found(format!("Snapshot {id} could not be found."))
}

fn view(ctx: &Ctx<'_>, s: &Snapshot) -> Value {
    let mut v = json!({
        "id": s.id,
        "share_id": s.share_id,
        "name": s.name,
        "description": s.description,
        "status": s.status,
        "size": s.size,
        "share_size": s.share_size,
        "share_proto": s.share_proto,
        "created_at": api_time(&s.created_at),
        "updated_at": s.updated_at.as_ref().map(api_time),
        "links": ctx.links("snapshots", &s.id),
    });
    if ctx.at_least(17) {
        v["user_id"] = json!(ctx.config.account.user_id);
        v["project_id"] = json!(ctx.config.account.project_id);
    }
    if ctx.at_least(73) {
        v["metadata"] = json!({});
    }
    if ctx.admin && ctx.at_least(12) {
        v["provider_location"] = json!(format!("fake-snapshot-{}", s.id));
    }
    v
}

/// `POST /snapshots`.
pub(crate) fn create(state: &mut ManilaState, ctx: &mut Ctx<'_>) -> Reply {
    let body = match ctx.body_object("snapshot") {
        Ok(b) => b,
        Err(r) => return r,
    };
    let text = |k: &str| body.get(k).and_then(Value::as_str).map(str::to_owned);
    let Some(share_id) = text("share_id") else {
        return fault(422, "Must specify 'share_id'");
    };
    let name = text("name").or_else(|| text("display_name"));
    let description = text("description").or_else(|| text("display_description"));
    let Some(share) = state.shares.get(&share_id) else {
        return not_found(format!("Share {share_id} could not be found."));
    };
    if !share.snapshot_support {
        return fault(
            422,
            format!(
                "Snapshots cannot be created for share '{share_id}' since it does not have that capability."
            ),
        );
    }
    if share.status != "available" {
        return bad_request(format!(
            "Invalid share: Source share status must be available, but it is '{}'.",
            share.status
        ));
    }
    let (size, proto) = (share.size, share.share_proto.clone());
    let quotas = &ctx.config.manila.quotas;
    let used = state.snapshot_gigabytes();
    if state.snapshots.len() as u64 >= quotas.snapshots {
        return fault(
            413,
            format!(
                "Maximum number of snapshots allowed ({}) exceeded.",
                quotas.snapshots
            ),
        );
    }
    if used.saturating_add(size) > quotas.snapshot_gigabytes {
        return fault(
            413,
            format!(
                "Requested snapshot exceeds allowed project/user or share type gigabytes quota. (requested {size}G, {used}G of {}G already consumed)",
                quotas.snapshot_gigabytes
            ),
        );
    }
    let keys: Vec<String> = name.iter().cloned().chain([share_id.clone()]).collect();
    let injected = match ctx.fault(Operation::SnapshotCreate, &keys) {
        Ok(f) => f,
        Err(r) => return r,
    };
    let id = new_id();
    let copy = state.backend.snapshot_copy(&id, &share_id);
    let plan = pending_outcome(
        ctx,
        ctx.config.manila.delays.snapshot_create_ms,
        injected,
        SnapshotOutcome::Available,
        |detail_id, message| {
            SnapshotOutcome::Failed(Failure {
                status: "error".into(),
                action: MessageAction::Create,
                detail_id,
                message,
            })
        },
    );
    // The share's bytes are copied once the router released the state lock; the snapshot
    // stays `creating` with nothing pending until then.
    let target = CopyTarget::Snapshot {
        id: id.clone(),
        plan,
    };
    state.copies.push((copy, target));
    let snapshot = Snapshot {
        id: id.clone(),
        seq: state.next_seq(),
        share_id,
        name,
        description,
        size,
        share_size: size,
        share_proto: proto,
        status: "creating".into(),
        created_at: Utc::now(),
        updated_at: None,
        pending: None,
    };
    let body = json!({"snapshot": view(ctx, &snapshot)});
    state.snapshots.insert(id, snapshot);
    Reply::json(202, body)
}

/// `GET /snapshots/{id}`.
pub(crate) fn show(state: &mut ManilaState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    let keys = state
        .snapshots
        .get(id)
        .map(Snapshot::keys)
        .unwrap_or_default();
    if let Err(r) = ctx.fault(Operation::SnapshotGet, &keys) {
        return r;
    }
    match state.snapshots.get(id) {
        Some(s) => Reply::json(200, json!({"snapshot": view(ctx, s)})),
        None => snapshot_not_found(id),
    }
}

/// The query parameters `GET /snapshots[/detail]` honours; others are refused (400).
const LIST_PARAMS: [&str; 8] = [
    "name",
    "share_id",
    "status",
    "limit",
    "offset",
    "sort_dir",
    "all_tenants",
    "project_id",
];

/// `GET /snapshots[/detail]?name=&share_id=&status=&limit=&offset=&sort_dir=`.
pub(crate) fn list(state: &mut ManilaState, ctx: &mut Ctx<'_>, detail: bool) -> Reply {
    if let Err(r) = ctx.fault(Operation::SnapshotList, &[]) {
        return r;
    }
    if let Some((key, _)) = ctx
        .query
        .iter()
        .find(|(k, _)| !LIST_PARAMS.contains(&k.as_str()))
    {
        return bad_request(format!(
            "Invalid filter {key:?}: the snapshots list does not support it."
        ));
    }
    let number = |key: &str| query_number(ctx.query(key), key);
    let (offset, limit) = match (number("offset"), number("limit")) {
        (Ok(o), Ok(l)) => (o.unwrap_or(0), l.unwrap_or(usize::MAX)),
        (Err(r), _) | (_, Err(r)) => return r,
    };
    let ascending = match ctx.query("sort_dir") {
        None | Some("desc") => false,
        Some("asc") => true,
        Some(other) => {
            return bad_request(format!(
                "Invalid sort_dir {other:?}: it must be asc or desc."
            ));
        }
    };
    let project = ctx.config.account.project_id.clone();
    let mut snaps: Vec<&Snapshot> = state
        .snapshots
        .values()
        .filter(|s| {
            ctx.query("name")
                .is_none_or(|n| s.name.as_deref() == Some(n))
        })
        .filter(|s| ctx.query("share_id").is_none_or(|x| s.share_id == x))
        .filter(|s| ctx.query("status").is_none_or(|x| s.status == x))
        .filter(|_| ctx.query("project_id").is_none_or(|p| p == project))
        .collect();
    snaps.sort_by_key(|s| std::cmp::Reverse(s.seq));
    if ascending {
        snaps.reverse();
    }
    let items: Vec<Value> = snaps
        .into_iter()
        .skip(offset)
        .take(limit)
        .map(|s| {
            if detail {
                view(ctx, s)
            } else {
                json!({"id": s.id, "name": s.name, "links": ctx.links("snapshots", &s.id)})
            }
        })
        .collect();
    Reply::json(200, json!({"snapshots": items}))
}

/// `PUT /snapshots/{id}`: name and description.
pub(crate) fn update(state: &mut ManilaState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    let body = match ctx.body_object("snapshot") {
        Ok(b) => b,
        Err(r) => return r,
    };
    let Some(snap) = state.snapshots.get_mut(id) else {
        return snapshot_not_found(id);
    };
    for (keys, slot) in [
        (["name", "display_name"], &mut snap.name),
        (
            ["description", "display_description"],
            &mut snap.description,
        ),
    ] {
        if let Some(v) = keys
            .iter()
            .find_map(|k| body.get(*k).and_then(Value::as_str))
        {
            *slot = Some(v.to_owned());
        }
    }
    snap.updated_at = Some(Utc::now());
    let snap = snap.clone();
    Reply::json(200, json!({"snapshot": view(ctx, &snap)}))
}

/// `DELETE /snapshots/{id}`: `deleting`, then gone.
pub(crate) fn delete(state: &mut ManilaState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    let Some(snap) = state.snapshots.get(id) else {
        return snapshot_not_found(id);
    };
    if !["available", "error"].contains(&snap.status.as_str()) {
        return fault(
            403,
            format!(
                "Invalid snapshot: Snapshot status must be one of ('available', 'error'), but it is '{}'.",
                snap.status
            ),
        );
    }
    let keys = snap.keys();
    let injected = match ctx.fault(Operation::SnapshotDelete, &keys) {
        Ok(f) => f,
        Err(r) => return r,
    };
    let plan = pending_outcome(
        ctx,
        ctx.config.manila.delays.snapshot_delete_ms,
        injected,
        SnapshotOutcome::Gone,
        |detail_id, message| {
            SnapshotOutcome::Failed(Failure {
                status: "error_deleting".into(),
                action: MessageAction::Delete,
                detail_id,
                message,
            })
        },
    );
    if let Some(snap) = state.snapshots.get_mut(id) {
        snap.start("deleting", plan);
    }
    Reply::empty(202)
}

/// `POST /snapshots/{id}/action`: the admin `force_delete` and `reset_status` actions.
pub(crate) fn action(state: &mut ManilaState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    let (name, args, key) = match action_name(ctx) {
        Ok(parts) => parts,
        Err(reply) => return reply,
    };
    if !ctx.admin {
        return fault(
            403,
            format!("Policy doesn't allow share_snapshot:{name} to be performed."),
        );
    }
    let Some(snap) = state.snapshots.get_mut(id) else {
        return snapshot_not_found(id);
    };
    match name.as_str() {
        "force_delete" => {
            snap.status = "deleting".into();
            snap.pending = Some(Pending {
                due: ctx.now,
                outcome: SnapshotOutcome::Gone,
            });
        }
        "reset_status" => {
            let status = args
                .get("status")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if ![
                "available",
                "error",
                "creating",
                "deleting",
                "error_deleting",
            ]
            .contains(&status)
            {
                return bad_request(format!("Invalid status provided: {status:?}."));
            }
            snap.status = status.to_owned();
            snap.pending = None;
        }
        _ => return bad_request(format!("There is no such action: {key}")),
    }
    snap.updated_at = Some(Utc::now());
    Reply::empty(202)
}
