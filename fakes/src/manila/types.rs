//! Share types: list, default, show, extra specs; `403` when the seed forbids listing.

use serde_json::{Value, json};

use super::model::ShareType;
use super::{Ctx, ManilaState};
use crate::faults::Operation;
use crate::reply::{Reply, bad_request, fault, not_found};

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

/// The extra specs Manila shows every user ("tenant-visible"); the others only an
/// administrator sees.
const TENANT_VISIBLE: [&str; 7] = [
    "driver_handles_share_servers",
    "snapshot_support",
    "create_share_from_snapshot_support",
    "revert_to_snapshot_support",
    "mount_snapshot_support",
    "replication_type",
    "availability_zones",
];

/// The extra specs `ctx`'s user may see.
fn visible_extra_specs(ctx: &Ctx<'_>, t: &ShareType) -> serde_json::Map<String, Value> {
    let mut specs = extra_specs(t);
    if !ctx.admin {
        specs.retain(|key, _| TENANT_VISIBLE.contains(&key.as_str()));
    }
    specs
}

fn view(state: &ManilaState, ctx: &Ctx<'_>, t: &ShareType) -> Value {
    let access_key = if ctx.at_least(7) {
        "share_type_access:is_public"
    } else {
        "os-share-type-access:is_public"
    };
    let mut v = json!({
        "id": t.id,
        "name": t.name,
        "extra_specs": visible_extra_specs(ctx, t),
        "required_extra_specs": {"driver_handles_share_servers": capitalised(t.dhss)},
        access_key: true,
    });
    if ctx.at_least(41) {
        v["description"] = json!(t.description);
    }
    if ctx.at_least(46) {
        v["is_default"] = json!(state.default_share_type.as_deref() == Some(t.name.as_str()));
    }
    v
}

fn guard(ctx: &mut Ctx<'_>, action: &str) -> Result<(), Reply> {
    if ctx.config.manila.types_forbidden {
        return Err(fault(
            403,
            format!("Policy doesn't allow share_type:{action} to be performed."),
        ));
    }
    ctx.fault(Operation::ShareTypes, &[]).map(|_| ())
}

/// `GET /types` (answers both `share_types` and the legacy `volume_types`).
pub(crate) fn list(state: &mut ManilaState, ctx: &mut Ctx<'_>) -> Reply {
    if let Err(r) = guard(ctx, "index") {
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
pub(crate) fn default(state: &mut ManilaState, ctx: &mut Ctx<'_>) -> Reply {
    if let Err(r) = guard(ctx, "default") {
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

/// The share type with this id: Manila's `GET /types/{id}` looks up ids only (a name is
/// not found).
fn by_id<'s>(state: &'s ManilaState, id: &str) -> Option<&'s ShareType> {
    state.share_types.iter().find(|t| t.id == id)
}

/// `GET /types/{id}`.
pub(crate) fn show(state: &mut ManilaState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    if let Err(r) = guard(ctx, "show") {
        return r;
    }
    match by_id(state, id) {
        Some(t) => {
            let v = view(state, ctx, t);
            Reply::json(200, json!({"share_type": v, "volume_type": v}))
        }
        None => not_found(format!("Share type {id} could not be found.")),
    }
}

/// `GET /types/{id}/extra_specs` (admin only).
pub(crate) fn extra_specs_of(state: &mut ManilaState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    if let Err(r) = guard(ctx, "show") {
        return r;
    }
    if !ctx.admin {
        return fault(
            403,
            "Policy doesn't allow share_types_extra_spec:index to be performed.",
        );
    }
    match by_id(state, id) {
        Some(t) => Reply::json(200, json!({"extra_specs": extra_specs(t)})),
        None => not_found(format!("Share type {id} could not be found.")),
    }
}

fn spec_bool(value: Option<&Value>) -> Result<Option<bool>, String> {
    match value {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("true") => Ok(Some(true)),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("false") => Ok(Some(false)),
        Some(other) => Err(format!("{other} is not a boolean")),
    }
}

/// `POST /types` (admin): `{"share_type": {"name", "extra_specs": {...}, "description"}}`.
pub(crate) fn create(state: &mut ManilaState, ctx: &mut Ctx<'_>) -> Reply {
    if !ctx.admin {
        return fault(
            403,
            "Policy doesn't allow share_type:create to be performed.",
        );
    }
    let body = match ctx
        .body_object("share_type")
        .or_else(|_| ctx.body_object("volume_type"))
    {
        Ok(b) => b,
        Err(r) => return r,
    };
    let Some(name) = body
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
    else {
        return bad_request("Share type name is not valid.");
    };
    let specs = body
        .get("extra_specs")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let dhss = match spec_bool(specs.get("driver_handles_share_servers")) {
        Ok(Some(b)) => b,
        Ok(None) => {
            return bad_request(
                "Invalid share type: required extra specs driver_handles_share_servers is missing.",
            );
        }
        Err(e) => {
            return bad_request(format!(
                "Invalid extra spec driver_handles_share_servers: {e}."
            ));
        }
    };
    let mut seed = crate::config::ShareTypeSeed::named(name);
    seed.driver_handles_share_servers = dhss;
    seed.description = body
        .get("description")
        .and_then(Value::as_str)
        .map(str::to_owned);
    for (key, slot) in [
        ("snapshot_support", &mut seed.snapshot_support),
        (
            "create_share_from_snapshot_support",
            &mut seed.create_share_from_snapshot_support,
        ),
    ] {
        match spec_bool(specs.get(key)) {
            Ok(Some(b)) => *slot = b,
            Ok(None) => *slot = false,
            Err(e) => return bad_request(format!("Invalid extra spec {key}: {e}.")),
        }
    }
    for (k, v) in &specs {
        if ![
            "driver_handles_share_servers",
            "snapshot_support",
            "create_share_from_snapshot_support",
        ]
        .contains(&k.as_str())
        {
            seed.extra_specs.insert(
                k.clone(),
                v.as_str().map_or_else(|| v.to_string(), str::to_owned),
            );
        }
    }
    if state.share_types.iter().any(|t| t.name == name) {
        return fault(409, format!("Share Type {name} already exists."));
    }
    match state.add_share_type(&seed) {
        Ok(id) => match state.share_type(&id) {
            Some(t) => {
                let v = view(state, ctx, t);
                Reply::json(200, json!({"share_type": v, "volume_type": v}))
            }
            None => not_found(format!("Share type {id} could not be found.")),
        },
        Err(e) => bad_request(e.to_string()),
    }
}

/// `DELETE /types/{id}` (admin): refused while shares use the type.
pub(crate) fn delete(state: &mut ManilaState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    if !ctx.admin {
        return fault(
            403,
            "Policy doesn't allow share_type:delete to be performed.",
        );
    }
    let Some(t) = state.share_types.iter().find(|t| t.id == id) else {
        return not_found(format!("Share type {id} could not be found."));
    };
    if state.shares.values().any(|s| s.share_type_id == t.id) {
        return bad_request(format!(
            "Invalid share type: Share Type {id} deletion is not allowed with shares present with the type."
        ));
    }
    match state.remove_share_type(id) {
        Ok(()) => Reply::empty(202),
        Err(e) => not_found(e.to_string()),
    }
}
