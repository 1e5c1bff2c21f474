//! Share types: list, default, show, extra specs; `403` when the seed forbids listing.

use serde_json::{Value, json};

use super::model::ShareType;
use super::{Ctx, fault, not_found};
use crate::faults::Operation;
use crate::reply::Reply;
use crate::state::CloudState;

fn capitalised(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

/// All extra specs as Manila returns them (booleans as `"True"`/`"False"`).
fn extra_specs(t: &ShareType) -> serde_json::Map<String, Value> {
    let mut specs: serde_json::Map<String, Value> = t
        .extra_specs
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    specs.insert(
        "driver_handles_share_servers".into(),
        json!(capitalised(t.dhss)),
    );
    specs.insert(
        "snapshot_support".into(),
        json!(capitalised(t.snapshot_support)),
    );
    specs.insert(
        "create_share_from_snapshot_support".into(),
        json!(capitalised(t.create_share_from_snapshot_support)),
    );
    specs
}

fn view(state: &CloudState, ctx: &Ctx<'_>, t: &ShareType) -> Value {
    let access_key = if ctx.at_least(7) {
        "share_type_access:is_public"
    } else {
        "os-share-type-access:is_public"
    };
    let mut v = json!({
        "id": t.id,
        "name": t.name,
        "extra_specs": extra_specs(t),
        "required_extra_specs": {"driver_handles_share_servers": capitalised(t.dhss)},
        access_key: true,
    });
    if ctx.at_least(41) {
        v["description"] = json!(t.description);
    }
    if ctx.at_least(46) {
        v["is_default"] =
            json!(state.config.manila.default_share_type.as_deref() == Some(t.name.as_str()));
    }
    v
}

fn guard(state: &mut CloudState, ctx: &mut Ctx<'_>, action: &str) -> Result<(), Reply> {
    if state.config.manila.types_forbidden {
        return Err(fault(
            403,
            format!("Policy doesn't allow share_type:{action} to be performed."),
        ));
    }
    ctx.fault(state, Operation::ShareTypes, &[]).map(|_| ())
}

/// `GET /types` (answers both `share_types` and the legacy `volume_types`).
pub(crate) fn list(state: &mut CloudState, ctx: &mut Ctx<'_>) -> Reply {
    if let Err(r) = guard(state, ctx, "index") {
        return r;
    }
    let items: Vec<Value> = state
        .share_types
        .iter()
        .map(|t| view(state, ctx, t))
        .collect();
    Reply::json(200, json!({"share_types": items, "volume_types": items}))
}

/// `GET /types/default`.
pub(crate) fn default(state: &mut CloudState, ctx: &mut Ctx<'_>) -> Reply {
    if let Err(r) = guard(state, ctx, "default") {
        return r;
    }
    match state.default_share_type() {
        Some(t) => {
            let v = view(state, ctx, t);
            Reply::json(200, json!({"share_type": v, "volume_type": v}))
        }
        None => not_found("Default share type not found."),
    }
}

/// `GET /types/{id}` (an id or a name).
pub(crate) fn show(state: &mut CloudState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    if let Err(r) = guard(state, ctx, "show") {
        return r;
    }
    match state.share_type(id) {
        Some(t) => {
            let v = view(state, ctx, t);
            Reply::json(200, json!({"share_type": v, "volume_type": v}))
        }
        None => not_found(format!("Share type {id} could not be found.")),
    }
}

/// `GET /types/{id}/extra_specs`.
pub(crate) fn extra_specs_of(state: &mut CloudState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    if let Err(r) = guard(state, ctx, "show") {
        return r;
    }
    match state.share_type(id) {
        Some(t) => Reply::json(200, json!({"extra_specs": extra_specs(t)})),
        None => not_found(format!("Share type {id} could not be found.")),
    }
}
