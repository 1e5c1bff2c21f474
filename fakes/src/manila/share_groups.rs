//! Share groups (microversion 2.31; experimental, behind `X-OpenStack-Manila-API-Experimental:
//! True`, until 2.55) and share group types.
//!
//! Groups and group types are kept as their seeds ([`ManilaState::share_groups`], seeded from
//! the configuration's `share_groups`/`share_group_types`, plus those created through the
//! API), so that a reset goes back to the seeded ones.
//! A new group is answered `creating` and is `available` from the next read on (Manila
//! creates it in the share manager; no backend work is simulated). A share joins a group with
//! `share_group_id` on `POST /shares` (see `shares.rs`); a group with shares cannot be deleted.

use chrono::Utc;
use serde_json::{Map, Value, json};

use super::{Ctx, ManilaState};
use crate::config::{ShareGroupSeed, ShareGroupTypeSeed};
use crate::lifecycle::{api_time, new_id};
use crate::reply::{Reply, bad_request, fault, not_found};

/// The microversion from which share groups exist.
const MIN_MINOR: u32 = 31;
/// The microversion from which they are no longer experimental.
const STABLE_MINOR: u32 = 55;
/// The header experimental APIs need.
const EXPERIMENTAL_HEADER: &str = "X-OpenStack-Manila-API-Experimental";

/// Whether the request may use the share group API: at 2.31–2.54 only with the
/// experimental header, as Manila's experimental APIs.
pub(crate) fn api_enabled(ctx: &Ctx<'_>) -> bool {
    if !ctx.at_least(MIN_MINOR) {
        return false;
    }
    ctx.at_least(STABLE_MINOR)
        || ctx
            .req
            .headers
            .get(EXPERIMENTAL_HEADER)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// Gives every seeded group type and group an id (and a creation time) the first time
/// they are looked at, in place, so that they keep them.
fn settle(state: &mut ManilaState) {
    for t in &mut state.share_group_types {
        if t.id.is_none() {
            t.id = Some(new_id());
        }
    }
    let now = api_time(&Utc::now());
    for g in &mut state.share_groups {
        if g.id.is_none() {
            g.id = Some(new_id());
        }
        if g.created_at.is_none() {
            g.created_at = Some(now.clone());
        }
    }
}

fn group_type<'a>(state: &'a ManilaState, name_or_id: &str) -> Option<&'a ShareGroupTypeSeed> {
    let types = &state.share_group_types;
    types
        .iter()
        .find(|t| t.id.as_deref() == Some(name_or_id))
        .or_else(|| types.iter().find(|t| t.name == name_or_id))
}

/// The ids of share types named (by name or id) in `refs`; unknown ones are left out.
fn type_ids(state: &ManilaState, refs: &[String]) -> Vec<String> {
    refs.iter()
        .filter_map(|r| state.share_type(r).map(|t| t.id.clone()))
        .collect()
}

/// A share group as `POST /shares` needs it: status, share type ids, zone, network.
#[derive(Debug, Clone)]
pub(crate) struct GroupForShare {
    pub status: String,
    pub share_type_ids: Vec<String>,
    pub availability_zone: Option<String>,
    pub share_network_id: Option<String>,
}

/// The group `id` as a new share sees it; `None` when there is no such group.
pub(crate) fn group_for_share(state: &mut ManilaState, id: &str) -> Option<GroupForShare> {
    settle(state);
    let group = state
        .share_groups
        .iter()
        .find(|g| g.id.as_deref() == Some(id))?
        .clone();
    Some(GroupForShare {
        status: group.status.clone(),
        share_type_ids: group_share_type_ids(state, &group),
        availability_zone: group.availability_zone.clone(),
        share_network_id: group.share_network_id.clone(),
    })
}

fn group_share_type_ids(state: &ManilaState, group: &ShareGroupSeed) -> Vec<String> {
    if group.share_types.is_empty() {
        group_type(state, &group.share_group_type)
            .map(|t| type_ids(state, &t.share_types))
            .unwrap_or_default()
    } else {
        type_ids(state, &group.share_types)
    }
}

fn type_view(state: &ManilaState, ctx: &Ctx<'_>, t: &ShareGroupTypeSeed) -> Value {
    let mut v = json!({
        "id": t.id,
        "name": t.name,
        "share_types": type_ids(state, &t.share_types),
        "is_public": true,
        "group_specs": {},
    });
    if ctx.at_least(46) {
        v["is_default"] = json!(t.is_default);
    }
    v
}

fn group_view(state: &ManilaState, ctx: &Ctx<'_>, g: &ShareGroupSeed, detail: bool) -> Value {
    let id = g.id.clone().unwrap_or_default();
    if !detail {
        return json!({"id": id, "name": g.name, "links": ctx.links("share-groups", &id)});
    }
    let type_id = group_type(state, &g.share_group_type)
        .and_then(|t| t.id.clone())
        .unwrap_or_else(|| g.share_group_type.clone());
    json!({
        "id": id,
        "name": g.name,
        "description": g.description,
        "status": g.status,
        "share_group_type_id": type_id,
        "share_types": group_share_type_ids(state, g),
        "availability_zone": g.availability_zone,
        "share_network_id": g.share_network_id,
        "share_server_id": Value::Null,
        "source_share_group_snapshot_id": Value::Null,
        "consistent_snapshot_support": Value::Null,
        "host": Value::Null,
        "project_id": ctx.config.account.project_id,
        "created_at": g.created_at,
        "links": ctx.links("share-groups", &id),
    })
}

fn group_not_found(id: &str) -> Reply {
    not_found(format!("Share group {id} could not be found."))
}

/// `GET /share-group-types`.
pub(crate) fn list_types(state: &mut ManilaState, ctx: &Ctx<'_>) -> Reply {
    settle(state);
    let types: Vec<Value> = state
        .share_group_types
        .iter()
        .map(|t| type_view(state, ctx, t))
        .collect();
    Reply::json(200, json!({"share_group_types": types}))
}

/// `GET /share-group-types/{id}`.
pub(crate) fn show_type(state: &mut ManilaState, ctx: &Ctx<'_>, id: &str) -> Reply {
    settle(state);
    match group_type(state, id) {
        Some(t) => Reply::json(200, json!({"share_group_type": type_view(state, ctx, t)})),
        None => not_found(format!("Share group type {id} could not be found.")),
    }
}

/// `GET /share-groups[/detail]`.
pub(crate) fn list(state: &mut ManilaState, ctx: &Ctx<'_>, detail: bool) -> Reply {
    settle(state);
    let groups: Vec<Value> = state
        .share_groups
        .iter()
        .filter(|g| {
            ctx.query("name")
                .is_none_or(|n| g.name.as_deref() == Some(n))
        })
        .filter(|g| ctx.query("status").is_none_or(|s| g.status == s))
        .map(|g| group_view(state, ctx, g, detail))
        .collect();
    Reply::json(200, json!({"share_groups": groups}))
}

/// `GET /share-groups/{id}`.
pub(crate) fn show(state: &mut ManilaState, ctx: &Ctx<'_>, id: &str) -> Reply {
    settle(state);
    match state
        .share_groups
        .iter()
        .find(|g| g.id.as_deref() == Some(id))
    {
        Some(g) => Reply::json(200, json!({"share_group": group_view(state, ctx, g, true)})),
        None => group_not_found(id),
    }
}

fn string_field(body: &Map<String, Value>, key: &str) -> Result<Option<String>, Reply> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(bad_request(format!(
            "Invalid input received: {key} must be a string, not {other}."
        ))),
    }
}

/// `POST /share-groups`: the group type (given, else the default one), its share types
/// (given ones must all belong to the group type), zone and network are checked as Manila
/// checks them.
pub(crate) fn create(state: &mut ManilaState, ctx: &Ctx<'_>) -> Reply {
    settle(state);
    let body = match ctx.body_object("share_group") {
        Ok(b) => b,
        Err(r) => return r,
    };
    match create_checked(state, ctx, &body) {
        Ok(reply) | Err(reply) => reply,
    }
}

fn create_checked(
    state: &mut ManilaState,
    ctx: &Ctx<'_>,
    body: &Map<String, Value>,
) -> Result<Reply, Reply> {
    check_fields(body)?;
    let name = string_field(body, "name")?;
    let description = string_field(body, "description")?;
    let group_type = group_type_of(state, body)?;
    let share_types = share_types_of(state, body, &group_type)?;
    let zone = string_field(body, "availability_zone")?;
    if let Some(z) = &zone
        && !ctx.config.manila.availability_zones.contains(z)
    {
        return Err(not_found(format!(
            "Availability zone {z} could not be found."
        )));
    }
    let network = uuid_field(body, "share_network_id")?;
    if let Some(n) = &network
        && !state.share_networks.iter().any(|s| &s.id == n)
    {
        return Err(not_found(format!("Share network {n} could not be found.")));
    }
    let group = ShareGroupSeed {
        id: Some(new_id()),
        name,
        description,
        share_group_type: group_type.id.clone().unwrap_or(group_type.name.clone()),
        share_types,
        status: "available".into(),
        availability_zone: zone,
        share_network_id: network,
        created_at: Some(api_time(&Utc::now())),
    };
    let mut view = group_view(state, ctx, &group, true);
    view["status"] = json!("creating");
    state.share_groups.push(group);
    Ok(Reply::json(202, json!({"share_group": view})))
}

/// Only the fields Manila knows, and no group snapshot (not faked).
fn check_fields(body: &Map<String, Value>) -> Result<(), Reply> {
    const FIELDS: [&str; 7] = [
        "name",
        "description",
        "share_types",
        "share_group_type_id",
        "source_share_group_snapshot_id",
        "share_network_id",
        "availability_zone",
    ];
    let invalid: Vec<&String> = body
        .keys()
        .filter(|k| !FIELDS.contains(&k.as_str()))
        .collect();
    if !invalid.is_empty() {
        return Err(bad_request(format!("The fields {invalid:?} are invalid.")));
    }
    if body.contains_key("source_share_group_snapshot_id") {
        return Err(bad_request(
            "Share group snapshots are not supported by this fake.",
        ));
    }
    Ok(())
}

/// A string field that must be a UUID when given.
fn uuid_field(body: &Map<String, Value>, key: &str) -> Result<Option<String>, Reply> {
    let value = string_field(body, key)?;
    match &value {
        Some(v) if uuid::Uuid::parse_str(v).is_err() => Err(bad_request(format!(
            "The '{key}' attribute must be a uuid."
        ))),
        _ => Ok(value),
    }
}

/// The group type given, else the default one.
fn group_type_of(
    state: &ManilaState,
    body: &Map<String, Value>,
) -> Result<ShareGroupTypeSeed, Reply> {
    Ok(match uuid_field(body, "share_group_type_id")? {
        Some(id) => group_type(state, &id)
            .cloned()
            .ok_or_else(|| not_found(format!("Share group type {id} could not be found.")))?,
        None => state
            .share_group_types
            .iter()
            .find(|t| t.is_default)
            .cloned()
            .ok_or_else(|| {
                bad_request(
                    "Must specify a share group type or configure a default share group type.",
                )
            })?,
    })
}

/// The share types given (ids), else the default type; all must belong to the group type.
fn share_types_of(
    state: &ManilaState,
    body: &Map<String, Value>,
    group_type: &ShareGroupTypeSeed,
) -> Result<Vec<String>, Reply> {
    // Share type ids (uuids); none given: the default share type, as Manila.
    let requested: Vec<String> = match body.get("share_types") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item.as_str() {
                Some(id) if uuid::Uuid::parse_str(id).is_ok() => Ok(id.to_owned()),
                _ => Err(bad_request(
                    "The 'share_types' attribute must be a list of uuids",
                )),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(bad_request(
                "The 'share_types' attribute must be a list of uuids",
            ));
        }
    };
    let requested = if requested.is_empty() {
        match state.default_share_type() {
            Some(t) => vec![t.id.clone()],
            None => {
                return Err(bad_request(
                    "Must specify at least one share type as a default share type has not been configured.",
                ));
            }
        }
    } else {
        requested
    };
    let allowed = type_ids(state, &group_type.share_types);
    let mut share_types = Vec::new();
    for id in requested {
        let t = state
            .share_type(&id)
            .ok_or_else(|| not_found(format!("Share type {id} could not be found.")))?;
        if !allowed.contains(&t.id) {
            return Err(bad_request(format!(
                "Invalid input received: The specified share type {id} is not supported by share group type {}.",
                group_type.id.as_deref().unwrap_or_default()
            )));
        }
        share_types.push(t.id.clone());
    }
    Ok(share_types)
}

/// `DELETE /share-groups/{id}`: refused (409) while the group holds shares, or while it is
/// neither `available` nor `error`.
pub(crate) fn delete(state: &mut ManilaState, _ctx: &Ctx<'_>, id: &str) -> Reply {
    settle(state);
    let groups = &state.share_groups;
    let Some(index) = groups.iter().position(|g| g.id.as_deref() == Some(id)) else {
        return group_not_found(id);
    };
    let members = state
        .shares
        .values()
        .filter(|s| s.share_group_id.as_deref() == Some(id))
        .count();
    if members > 0 {
        return fault(
            409,
            format!(
                "Invalid share group: Cannot delete a share group with shares ({members} shares in group {id})."
            ),
        );
    }
    let status = &groups[index].status;
    if status != "available" && status != "error" {
        return fault(
            409,
            format!(
                "Invalid share group: Share group status must be one of ('available', 'error'), not {status}."
            ),
        );
    }
    state.share_groups.remove(index);
    Reply::empty(202)
}
