//! `POST /volumes/{id}/action`: `os-extend`, and the administrators' `os-reset_status` and
//! `os-force_delete`.

use chrono::Utc;
use serde_json::Value;

use super::not_found;
use crate::cinder::disk;
use crate::cinder::model::{BlockFailure, Volume, VolumeOutcome};
use crate::cinder::{BlockState, Ctx};
use crate::faults::Operation;
use crate::lifecycle::{AsyncFault, Lifecycle, Pending, due_after, plan};
use crate::reply::{Reply, fault};

/// `POST /volumes/{id}/action`: `os-extend`.
pub(crate) fn action(state: &mut BlockState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    let body: Value = match serde_json::from_slice(&ctx.req.body) {
        Ok(b) => b,
        Err(_) => return fault(400, "Malformed request body"),
    };
    if let Some(args) = body.get("os-extend") {
        return extend(state, ctx, id, args);
    }
    if let Some(args) = body.get("os-reset_status") {
        return reset_status(state, ctx, id, args);
    }
    if body.get("os-force_delete").is_some() {
        return force_delete(state, ctx, id);
    }
    fault(400, "There is no such action")
}

/// `os-reset_status` (administrators): sets the status, ends any pending transition.
fn reset_status(state: &mut BlockState, ctx: &mut Ctx<'_>, id: &str, args: &Value) -> Reply {
    if !ctx.admin {
        return fault(
            403,
            "Policy doesn't allow volume_extension:volume_admin_actions:reset_status to be performed.",
        );
    }
    const STATUSES: [&str; 10] = [
        "available",
        "in-use",
        "error",
        "error_deleting",
        "error_extending",
        "creating",
        "deleting",
        "attaching",
        "detaching",
        "extending",
    ];
    let Some(status) = args["status"].as_str().filter(|s| STATUSES.contains(s)) else {
        return fault(
            400,
            format!("Invalid input received: invalid status {}", args["status"]),
        );
    };
    let Some(v) = state.volumes.get_mut(id) else {
        return not_found(id);
    };
    v.status = status.to_owned();
    v.pending = None;
    v.updated_at = Some(Utc::now());
    Reply::empty(202)
}

/// `os-force_delete` (administrators): deletes whatever the status, detaching it first.
fn force_delete(state: &mut BlockState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    if !ctx.admin {
        return fault(
            403,
            "Policy doesn't allow volume_extension:volume_admin_actions:force_delete to be performed.",
        );
    }
    let due = due_after(ctx.now, ctx.config.cinder.delays.volume_delete_ms);
    let Some(v) = state.volumes.get_mut(id) else {
        return not_found(id);
    };
    let servers: Vec<String> = v.attachments.drain(..).map(|a| a.server_id).collect();
    v.status = "deleting".into();
    v.updated_at = Some(Utc::now());
    v.pending = due.map(|due| Pending {
        due,
        outcome: VolumeOutcome::Gone,
    });
    for server in servers {
        state.loops.detach(id, &server);
    }
    Reply::empty(202)
}

fn extend(state: &mut BlockState, ctx: &mut Ctx<'_>, id: &str, args: &Value) -> Reply {
    let Some(keys) = state.volumes.get(id).map(Volume::keys) else {
        return not_found(id);
    };
    let raw = &args["new_size"];
    let Some(new_size) = raw
        .as_u64()
        .or_else(|| raw.as_str().and_then(|s| s.parse().ok()))
    else {
        return fault(
            400,
            format!("Invalid input for field/attribute new_size. Value: {raw}."),
        );
    };
    let injected = match ctx.fault(Operation::VolumeExtend, &keys) {
        Ok(f) => f,
        Err(r) => return r,
    };
    let used = state.gigabytes_used();
    let quota = ctx.config.cinder.quotas.gigabytes;
    let due = due_after(ctx.now, ctx.config.cinder.delays.volume_extend_ms);
    let root = state.root().to_path_buf();
    let Some(v) = state.volumes.get_mut(id) else {
        return not_found(id);
    };
    let in_use_ok = v.status == "in-use" && ctx.at_least(42);
    if v.status != "available" && !in_use_ok {
        return fault(
            400,
            format!(
                "Invalid volume: Volume {id} status must be 'available' or 'in-use' (from microversion 3.42), but current status is: {}",
                v.status
            ),
        );
    }
    if new_size <= v.size {
        return fault(
            400,
            format!(
                "Invalid input received: New size for extend must be greater than current size. (current: {}, extended: {new_size}).",
                v.size
            ),
        );
    }
    if used + (new_size - v.size) > quota {
        return fault(
            413,
            format!(
                "VolumeSizeExceedsAvailableQuota: Requested volume or snapshot exceeds allowed gigabytes quota. Requested {}G, quota is {quota}G.",
                new_size - v.size
            ),
        );
    }
    let settled = v.status.clone();
    // The file grows when the operation goes ahead; a failure answers 500 with the volume
    // as it was (but touched).
    if matches!(injected, AsyncFault::None)
        && let Err(e) = disk::allocate(&disk::volume_file(&root, id), new_size)
    {
        v.updated_at = Some(Utc::now());
        return fault(500, format!("The backend could not extend the volume: {e}"));
    }
    let settle = VolumeOutcome::Settle {
        status: settled,
        size: new_size,
    };
    v.start(
        "extending",
        plan(due, injected, settle, |detail_id, message| {
            VolumeOutcome::Failed(BlockFailure {
                status: "error_extending".into(),
                action: "007",
                detail_id,
                message,
            })
        }),
    );
    if let Err(e) = state.loops.refresh(id) {
        tracing::warn!(volume = %id, error = %e, "cannot refresh the loop devices' capacity");
    }
    Reply::empty(202)
}
