//! Export locations (`GET /shares/{id}/export_locations[/{id}]`, ≥ 2.9): one per configured
//! loopback address, each naming the share's backend directory.

use serde_json::json;

use super::model::{ExportLocation, Share};
use super::{Ctx, ManilaState, share_not_found};
use crate::faults::Operation;
use crate::reply::{Reply, not_found};

/// Export locations exist once the share is created; admin-only ones only for admins.
pub(crate) fn visible<'a>(ctx: &Ctx<'_>, s: &'a Share) -> Vec<&'a ExportLocation> {
    if s.status.starts_with("creating") || s.status == "error" {
        return Vec::new();
    }
    s.export_locations
        .iter()
        .filter(|e| ctx.admin || !e.is_admin_only)
        .collect()
}

/// `GET /shares/{id}/export_locations[/{el}]`.
pub(crate) fn show(
    state: &mut ManilaState,
    ctx: &mut Ctx<'_>,
    id: &str,
    el: Option<&str>,
) -> Reply {
    let keys = state.shares.get(id).map(Share::keys).unwrap_or_default();
    if let Err(r) = ctx.fault(Operation::ExportLocations, &keys) {
        return r;
    }
    let Some(share) = state.shares.get(id) else {
        return share_not_found(id);
    };
    let render = |e: &ExportLocation| {
        let mut v = json!({"id": e.id, "path": e.path});
        if ctx.at_least(14) {
            v["preferred"] = json!(e.preferred);
        }
        if ctx.admin {
            v["share_instance_id"] = json!(share.instance_id);
            v["is_admin_only"] = json!(e.is_admin_only);
        }
        if ctx.at_least(87) {
            v["metadata"] = json!({});
        }
        v
    };
    let exports = visible(ctx, share);
    match el {
        None => Reply::json(
            200,
            json!({"export_locations": exports.into_iter().map(render).collect::<Vec<_>>()}),
        ),
        Some(el) => match exports.into_iter().find(|e| e.id == el) {
            Some(e) => Reply::json(200, json!({"export_location": render(e)})),
            None => not_found(format!("Export location {el} could not be found.")),
        },
    }
}
