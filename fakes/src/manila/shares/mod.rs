//! Shares: show, update, delete, extend/shrink here; create ([`mod@create`]) and list
//! ([`mod@list`]) in modules of their own.

mod create;
mod list;

use chrono::Utc;
use serde_json::{Value, json};

use super::input::{optional_string, parse_size};
use super::model::{Failure, MessageAction, Share, ShareOutcome};
use super::{Ctx, ManilaState, export_locations, pending_outcome, share_not_found};
use crate::config::MAX_SHARE_SIZE_GIB;
use crate::faults::Operation;
use crate::lifecycle::{Lifecycle, api_time};
use crate::reply::{Reply, bad_request, fault};
pub(crate) use create::create;
pub(crate) use list::list;

/// Statuses in which a share may be deleted.
const DELETABLE: [&str; 3] = ["available", "error", "inactive"];

/// A share as Manila shows it at the request's microversion (admin-only fields for admins).
pub(crate) fn view(ctx: &Ctx<'_>, s: &Share) -> Value {
    let status = if s.status == "creating_from_snapshot" && !ctx.at_least(54) {
        "creating"
    } else {
        s.status.as_str()
    };
    let mut v = json!({
        "id": s.id,
        "name": s.name,
        "description": s.description,
        "size": s.size,
        "status": status,
        "share_proto": s.share_proto,
        "availability_zone": s.availability_zone,
        "created_at": api_time(&s.created_at),
        "project_id": ctx.config.account.project_id,
        "snapshot_id": s.snapshot_id,
        "share_network_id": s.share_network_id,
        "metadata": s.metadata,
        "is_public": s.is_public,
        "share_type": s.share_type_id,
        "volume_type": s.share_type_name,
        "links": ctx.links("shares", &s.id),
    });
    let exports = export_locations::visible(ctx, s);
    if !ctx.at_least(9) {
        v["export_location"] = json!(exports.first().map(|e| e.path.clone()));
        v["export_locations"] = exports.iter().map(|e| json!(e.path)).collect();
    }
    let mut add = |minor: u32, key: &str, value: Value| {
        if ctx.at_least(minor) {
            v[key] = value;
        }
    };
    add(2, "snapshot_support", json!(s.snapshot_support));
    add(5, "task_state", Value::Null);
    add(6, "share_type_name", json!(s.share_type_name));
    add(10, "access_rules_status", json!(s.access_rules_status()));
    add(11, "replication_type", Value::Null);
    add(11, "has_replicas", json!(false));
    add(16, "user_id", json!(ctx.config.account.user_id));
    add(
        24,
        "create_share_from_snapshot_support",
        json!(s.create_share_from_snapshot_support),
    );
    add(27, "revert_to_snapshot_support", json!(false));
    add(31, "share_group_id", json!(s.share_group_id));
    add(31, "source_share_group_snapshot_member_id", Value::Null);
    add(32, "mount_snapshot_support", json!(false));
    let progress = if s.status.starts_with("creating") {
        "0%"
    } else {
        "100%"
    };
    add(54, "progress", json!(progress));
    add(69, "is_soft_deleted", json!(false));
    add(69, "scheduled_to_be_deleted_at", Value::Null);
    add(84, "mount_point_name", Value::Null);
    if let Some(updated) = &s.updated_at {
        v["updated_at"] = json!(api_time(updated));
    } else {
        v["updated_at"] = Value::Null;
    }
    if ctx.admin {
        v["host"] = json!("fakehost@fakebackend#pool0");
        v["share_server_id"] = Value::Null;
    }
    v
}

/// `GET /shares/{id}`.
pub(crate) fn show(state: &mut ManilaState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    let keys = state.shares.get(id).map(Share::keys).unwrap_or_default();
    if let Err(r) = ctx.fault(Operation::ShareGet, &keys) {
        return r;
    }
    match state.shares.get(id) {
        Some(s) => Reply::json(200, json!({"share": view(ctx, s)})),
        None => share_not_found(id),
    }
}

/// `PUT /shares/{id}`: `display_name`, `display_description` and `is_public`, the keys
/// Manila's update takes; any other key (`name`, `description`, …) is ignored, as Manila
/// ignores it.
pub(crate) fn update(state: &mut ManilaState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    let body = match ctx.body_object("share") {
        Ok(b) => b,
        Err(r) => return r,
    };
    let (name, description) = match (
        optional_string(&body, "display_name"),
        optional_string(&body, "display_description"),
    ) {
        (Ok(n), Ok(d)) => (n, d),
        (Err(r), _) | (_, Err(r)) => return r,
    };
    let is_public = match body.get("is_public") {
        None => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(Value::String(v))
            if ["true", "1", "yes", "on", "y", "t"].contains(&v.to_lowercase().as_str()) =>
        {
            Some(true)
        }
        Some(Value::String(v))
            if ["false", "0", "no", "off", "n", "f"].contains(&v.to_lowercase().as_str()) =>
        {
            Some(false)
        }
        Some(other) => {
            return bad_request(format!(
                "Invalid value {other} for is_public: it must be a boolean."
            ));
        }
    };
    let Some(share) = state.shares.get_mut(id) else {
        return share_not_found(id);
    };
    if body.contains_key("display_name") {
        share.name = name;
    }
    if body.contains_key("display_description") {
        share.description = description;
    }
    if let Some(p) = is_public {
        share.is_public = p;
    }
    share.updated_at = Some(Utc::now());
    let share = share.clone();
    Reply::json(200, json!({"share": view(ctx, &share)}))
}

/// `DELETE /shares/{id}`: `deleting`, then gone.
pub(crate) fn delete(state: &mut ManilaState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    let Some(share) = state.shares.get(id) else {
        return share_not_found(id);
    };
    let keys = share.keys();
    if !DELETABLE.contains(&share.status.as_str()) {
        return fault(
            403,
            format!(
                "Invalid share: Share status must be one of ('available', 'error', 'inactive'), but it is '{}'.",
                share.status
            ),
        );
    }
    let dependents = state
        .snapshots
        .values()
        .filter(|s| s.share_id == id)
        .count();
    if dependents > 0 {
        return fault(
            403,
            format!("Invalid share: Share still has {dependents} dependent snapshots."),
        );
    }
    let injected = match ctx.fault(Operation::ShareDelete, &keys) {
        Ok(f) => f,
        Err(r) => return r,
    };
    let plan = pending_outcome(
        ctx,
        ctx.config.manila.delays.share_delete_ms,
        injected,
        ShareOutcome::Gone,
        |detail_id, message| {
            ShareOutcome::Failed(Failure {
                status: "error_deleting".into(),
                action: MessageAction::Delete,
                detail_id,
                message,
            })
        },
    );
    if let Some(share) = state.shares.get_mut(id) {
        share.start("deleting", plan);
    }
    Reply::empty(202)
}

/// The `extend` / `shrink` actions.
pub(crate) fn resize(
    state: &mut ManilaState,
    ctx: &mut Ctx<'_>,
    id: &str,
    args: &Value,
    grow: bool,
) -> Reply {
    let verb = if grow { "extend" } else { "shrink" };
    let Some(share) = state.shares.get(id) else {
        return share_not_found(id);
    };
    let Some(new_size) = parse_size(args.get("new_size")) else {
        return bad_request(format!(
            "New share size must be specified as a positive integer (at most {MAX_SHARE_SIZE_GIB}), got {}.",
            args.get("new_size")
                .map_or("nothing".into(), Value::to_string)
        ));
    };
    if share.status != "available" {
        return bad_request(format!(
            "Invalid share: Share {id} status must be 'available' to {verb}, but it is '{}'.",
            share.status
        ));
    }
    let size = share.size;
    if grow && new_size <= size {
        return bad_request(format!(
            "Invalid input received: New size for extend must be greater than current size. (current: {size}, extended: {new_size})."
        ));
    }
    if !grow && new_size >= size {
        return bad_request(format!(
            "Invalid input received: New size for shrink must be less than current size. (current: {size}, new: {new_size})."
        ));
    }
    if grow {
        let quotas = &ctx.config.manila.quotas;
        let used = state.share_gigabytes();
        if used.saturating_sub(size).saturating_add(new_size) > quotas.gigabytes {
            return fault(
                403,
                format!(
                    "Requested share exceeds allowed project/user or share type gigabytes quota. (requested {}G, {used}G of {}G already consumed)",
                    new_size - size,
                    quotas.gigabytes
                ),
            );
        }
    }
    let keys = share.keys();
    let op = if grow {
        Operation::ShareExtend
    } else {
        Operation::ShareShrink
    };
    let injected = match ctx.fault(op, &keys) {
        Ok(f) => f,
        Err(r) => return r,
    };
    let plan = pending_outcome(
        ctx,
        ctx.config.manila.delays.share_resize_ms,
        injected,
        ShareOutcome::Available { size: new_size },
        |detail_id, message| {
            ShareOutcome::Failed(Failure {
                status: if grow {
                    "extending_error"
                } else {
                    "shrinking_error"
                }
                .into(),
                action: if grow {
                    MessageAction::Extend
                } else {
                    MessageAction::Shrink
                },
                detail_id,
                message,
            })
        },
    );
    if let Some(share) = state.shares.get_mut(id) {
        share.start(if grow { "extending" } else { "shrinking" }, plan);
    }
    Reply::empty(202)
}
