//! The admin actions on shares: `force_delete` and `reset_status` (`os-` prefixed below
//! 2.7), to clean up shares a fault left stuck.

use chrono::Utc;
use serde_json::Value;

use super::model::ShareOutcome;
use super::{Ctx, ManilaState, share_not_found};
use crate::lifecycle::Pending;
use crate::reply::{Reply, bad_request, fault};

/// Statuses `reset_status` accepts.
const SETTABLE: [&str; 10] = [
    "available",
    "error",
    "creating",
    "deleting",
    "error_deleting",
    "extending",
    "extending_error",
    "shrinking",
    "shrinking_error",
    "inactive",
];

/// The admin `force_delete` action: gone regardless of status (snapshots must still go first).
pub(crate) fn force_delete(state: &mut ManilaState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    if !ctx.admin {
        return fault(
            403,
            "Policy doesn't allow share:force_delete to be performed.",
        );
    }
    if state.snapshots.values().any(|s| s.share_id == id) {
        return fault(403, "Invalid share: Share still has dependent snapshots.");
    }
    let Some(share) = state.shares.get_mut(id) else {
        return share_not_found(id);
    };
    share.status = "deleting".into();
    share.pending = Some(Pending {
        due: ctx.now,
        outcome: ShareOutcome::Gone,
    });
    Reply::empty(202)
}

/// The admin `reset_status` action: sets the status and cancels the pending transition.
pub(crate) fn reset_status(
    state: &mut ManilaState,
    ctx: &mut Ctx<'_>,
    id: &str,
    args: &Value,
) -> Reply {
    if !ctx.admin {
        return fault(
            403,
            "Policy doesn't allow share:reset_status to be performed.",
        );
    }
    let status = args
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !SETTABLE.contains(&status) {
        return bad_request(format!("Invalid status provided: {status:?}."));
    }
    let Some(share) = state.shares.get_mut(id) else {
        return share_not_found(id);
    };
    share.status = status.to_owned();
    share.pending = None;
    share.updated_at = Some(Utc::now());
    Reply::empty(202)
}
