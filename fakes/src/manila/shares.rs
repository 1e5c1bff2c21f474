//! Shares: create (plain or from a snapshot), show, list, update, delete, extend/shrink,
//! metadata and export locations.

use chrono::Utc;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

use super::Ctx;
use super::model::{ExportLocation, Failure, MessageAction, Share, ShareOutcome};
use crate::config::MAX_SHARE_SIZE_GIB;
use crate::faults::Operation;
use crate::lifecycle::{AsyncFault, Plan, due_after, plan};
use crate::lifecycle::{api_time, new_id};
use crate::reply::Reply;
use crate::reply::{bad_request, fault, not_found};
use crate::state::CloudState;

/// The protocols this cloud's `enabled_share_protocols` names (a CSI deployment's NFS and
/// CephFS); Manila refuses every other one, known or not, with a 400 naming it.
const PROTOCOLS: [&str; 2] = ["NFS", "CEPHFS"];

/// Statuses in which a share may be deleted.
const DELETABLE: [&str; 3] = ["available", "error", "inactive"];

/// The 404 for an unknown share.
pub(crate) fn share_not_found(id: &str) -> Reply {
    not_found(format!("Share {id} could not be found."))
}

/// How an async operation with `delay_ms` and an injected `fault` ends.
pub(crate) fn pending_outcome<T>(
    ctx: &Ctx<'_>,
    delay_ms: u64,
    fault: AsyncFault,
    success: T,
    failure: impl FnOnce(String, Option<String>) -> T,
) -> Plan<T> {
    match due_after(ctx.now, delay_ms) {
        // A delay beyond what the clock can hold (set in process, unchecked): never due,
        // whatever the fault.
        None => (None, None),
        due => plan(due, fault, success, failure),
    }
}

fn view(state: &CloudState, ctx: &Ctx<'_>, s: &Share) -> Value {
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
        "project_id": state.config.account.project_id,
        "snapshot_id": s.snapshot_id,
        "share_network_id": s.share_network_id,
        "metadata": s.metadata,
        "is_public": s.is_public,
        "share_type": s.share_type_id,
        "volume_type": s.share_type_name,
        "links": ctx.links(state, "shares", &s.id),
    });
    let exports = super::export_locations::visible(ctx, s);
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
    add(16, "user_id", json!(state.config.account.user_id));
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

/// The `scheduler_hints` of a share create (2.65): `same_host` and `different_host`, each a
/// comma list of existing share ids; the metadata key each is kept under, with its value.
fn scheduler_hints(
    state: &CloudState,
    value: Option<&Value>,
) -> Result<Vec<(String, &'static str)>, Reply> {
    let map = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(map)) => map,
        Some(other) => {
            return Err(bad_request(format!(
                "Invalid input received: scheduler_hints must be an object, not {other}."
            )));
        }
    };
    let mut hints = Vec::new();
    for (name, value) in map {
        let key = match name.as_str() {
            "same_host" => "__affinity_same_host",
            "different_host" => "__affinity_different_host",
            _ => {
                return Err(bad_request(format!(
                    "Invalid input received: unknown scheduler hint {name:?} (same_host or different_host)."
                )));
            }
        };
        let Some(list) = value.as_str() else {
            return Err(bad_request(format!(
                "Invalid input received: scheduler hint {name} must be a string."
            )));
        };
        for id in list.split(',').map(str::trim) {
            if !state.shares.contains_key(id) {
                return Err(not_found(format!("Share {id} could not be found.")));
            }
        }
        hints.push((list.to_string(), key));
    }
    Ok(hints)
}

pub(crate) fn string_map(
    value: Option<&Value>,
    what: &str,
) -> Result<BTreeMap<String, String>, Reply> {
    let mut out = BTreeMap::new();
    match value {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (k, v) in map {
                if k.is_empty() || k.len() > 255 {
                    return Err(bad_request(format!(
                        "Invalid {what} key {k:?}: keys must be 1 to 255 characters long."
                    )));
                }
                let Some(v) = v.as_str() else {
                    return Err(bad_request(format!(
                        "Invalid {what}: value of {k:?} is not a string."
                    )));
                };
                if v.len() > 1023 {
                    return Err(bad_request(format!(
                        "Invalid {what}: value of {k:?} is longer than 1023 characters."
                    )));
                }
                out.insert(k.clone(), v.to_owned());
            }
        }
        Some(_) => {
            return Err(bad_request(format!(
                "Invalid {what}: it must be an object of strings."
            )));
        }
    }
    Ok(out)
}

fn optional_string(body: &Map<String, Value>, key: &str) -> Result<Option<String>, Reply> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(bad_request(format!(
            "Invalid input for {key}: {other} is not a string."
        ))),
    }
}

/// A positive integer size (numbers or numeric strings, as Manila accepts), at most
/// [`MAX_SHARE_SIZE_GIB`].
pub(crate) fn parse_size(value: Option<&Value>) -> Option<u64> {
    match value? {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
    .filter(|n| (1..=MAX_SHARE_SIZE_GIB).contains(n))
}

/// The total size of `sizes`, saturating (quota arithmetic never overflows).
pub(crate) fn total(sizes: impl Iterator<Item = u64>) -> u64 {
    sizes.fold(0, u64::saturating_add)
}

/// `POST /shares`.
pub(crate) fn create(state: &mut CloudState, ctx: &mut Ctx<'_>) -> Reply {
    let body = match ctx.body_object("share") {
        Ok(b) => b,
        Err(r) => return r,
    };
    match create_checked(state, ctx, &body) {
        Ok(reply) | Err(reply) => reply,
    }
}

fn create_checked(
    state: &mut CloudState,
    ctx: &mut Ctx<'_>,
    body: &Map<String, Value>,
) -> Result<Reply, Reply> {
    let name = optional_string(body, "name")?;
    let description = optional_string(body, "description")?;
    let size = parse_size(body.get("size")).ok_or_else(|| {
        bad_request(format!(
            "Invalid input received: Share size '{}' must be an integer and greater than 0 (at most {MAX_SHARE_SIZE_GIB}).",
            body.get("size").map_or("None".into(), Value::to_string)
        ))
    })?;
    let proto = optional_string(body, "share_proto")?.unwrap_or_default();
    let proto_upper = proto.to_uppercase();
    if !PROTOCOLS.contains(&proto_upper.as_str()) {
        return Err(bad_request(format!(
            "Invalid share protocol provided: {proto}. It is either disabled or unsupported. Available protocols: {}.",
            PROTOCOLS.join(", ")
        )));
    }
    let snapshot_id = optional_string(body, "snapshot_id")?;
    let source = match &snapshot_id {
        None => None,
        Some(id) => {
            let snap = state
                .snapshots
                .get(id)
                .ok_or_else(|| not_found(format!("Snapshot {id} could not be found.")))?;
            if snap.status != "available" {
                return Err(bad_request(format!(
                    "Invalid snapshot: Snapshot {id} is not in 'available' state (it is '{}').",
                    snap.status
                )));
            }
            if size < snap.size {
                return Err(bad_request(format!(
                    "Share size ({size}) must be equal to or greater than snapshot size ({}).",
                    snap.size
                )));
            }
            let parent = state.shares.get(&snap.share_id);
            Some((
                snap.share_id.clone(),
                parent.map(|p| p.share_type_id.clone()),
                parent.map(|p| p.availability_zone.clone()),
            ))
        }
    };
    let type_ref = optional_string(body, "share_type")?
        .or_else(|| optional_string(body, "volume_type").ok().flatten());
    let share_type = match (&type_ref, &source) {
        (Some(t), _) => state.share_type(t).cloned().ok_or_else(|| {
            if uuid::Uuid::parse_str(t).is_ok() {
                not_found(format!("Share type {t} could not be found."))
            } else {
                not_found(format!("Share type with name {t} could not be found."))
            }
        })?,
        (None, Some((_, Some(parent_type), _))) => state
            .share_type(parent_type)
            .cloned()
            .ok_or_else(|| not_found(format!("Share type {parent_type} could not be found.")))?,
        _ => state.default_share_type().cloned().ok_or_else(|| {
            bad_request("Invalid share type: no share type was given and no default share type is configured.")
        })?,
    };
    if let (Some((_, Some(parent_type), _)), Some(_)) = (&source, &type_ref)
        && parent_type != &share_type.id
    {
        return Err(bad_request(format!(
            "Invalid input received: Share type {} of the new share must be the same as the type {parent_type} of snapshot {}'s parent share.",
            share_type.id,
            snapshot_id.as_deref().unwrap_or_default()
        )));
    }
    if source.is_some() && !share_type.create_share_from_snapshot_support {
        return Err(bad_request(format!(
            "A new share may not be created from snapshot {} because the share type {} does not support it.",
            snapshot_id.as_deref().unwrap_or_default(),
            share_type.name
        )));
    }
    // A share group (2.31): it must exist, be `available` and allow the share's type; the
    // share lands in the group's zone and on its share network.
    let share_group_id = if ctx.at_least(31) {
        optional_string(body, "share_group_id")?
    } else {
        None
    };
    let group = match &share_group_id {
        None => None,
        Some(id) => {
            let group = super::share_groups::group_for_share(state, id)
                .ok_or_else(|| not_found(format!("Share group {id} could not be found.")))?;
            if group.status != "available" {
                return Err(bad_request(format!(
                    "Invalid share group: Share group status must be available, not {}.",
                    group.status
                )));
            }
            if !group.share_type_ids.contains(&share_type.id) {
                return Err(bad_request(format!(
                    "Invalid input received: The specified share type ({}) is not supported by the specified share group.",
                    share_type.name
                )));
            }
            Some(group)
        }
    };
    let requested_zone = optional_string(body, "availability_zone")?;
    let requested_zone = match (
        requested_zone,
        group.as_ref().and_then(|g| g.availability_zone.clone()),
    ) {
        (Some(z), Some(gz)) if z != gz => {
            return Err(bad_request(format!(
                "Invalid input received: Share cannot have AZ ('{z}') different than share group's one ('{gz}')."
            )));
        }
        (z, gz) => z.or(gz),
    };
    let zones = &state.config.manila.availability_zones;
    if let (Some(z), Some((_, _, Some(parent_zone)))) = (&requested_zone, &source)
        && z != parent_zone
    {
        return Err(bad_request(format!(
            "Invalid input received: The specified availability zone {z} must be the same as the parent share's ({parent_zone}) when use_scheduler_creating_share_from_snapshot is False."
        )));
    }
    let zone = match requested_zone {
        Some(z) if zones.contains(&z) => z,
        Some(z) => {
            return Err(not_found(format!(
                "Availability zone {z} could not be found."
            )));
        }
        None => source
            .as_ref()
            .and_then(|(_, _, z)| z.clone())
            .or_else(|| zones.first().cloned())
            .unwrap_or_else(|| "nova".into()),
    };
    check_type_limits(&share_type, size, &zone)?;
    let network = optional_string(body, "share_network_id")?;
    let group_network = group.as_ref().and_then(|g| g.share_network_id.clone());
    if let (Some(n), Some(gn)) = (&network, &group_network)
        && n != gn
    {
        return Err(bad_request(format!(
            "Invalid input received: The specified share network ({n}) must match the share group's ({gn})."
        )));
    }
    let network = network.or(group_network);
    match (&network, share_type.dhss) {
        (Some(id), _) if !state.share_networks.iter().any(|n| &n.id == id) => {
            return Err(not_found(format!("Share network {id} could not be found.")));
        }
        (None, true) => {
            return Err(bad_request(format!(
                "Share network must be set when the driver_handles_share_servers extra spec of share type {} is True.",
                share_type.name
            )));
        }
        _ => {}
    }
    // Manila accepts a share network with a DHSS=False type and the share then fails in the
    // share manager (user message 003, UNEXPECTED_NETWORK).
    let unexpected_network = network.is_some() && !share_type.dhss;
    let mut metadata = string_map(body.get("metadata"), "metadata")?;
    // Scheduler hints (2.65): each a comma list of existing share ids; Manila keeps them in
    // the share's metadata under `__affinity_same_host` / `__affinity_different_host`.
    // Below 2.65 the field is not part of the API and is ignored, as Manila ignores it.
    if ctx.at_least(65) {
        for (hint, key) in scheduler_hints(state, body.get("scheduler_hints"))? {
            metadata.insert(key.into(), hint);
        }
    }
    // Manila's CephFS driver names the share's file system in the metadata when it is not
    // the cluster's default one (clients must mount that file system).
    if proto_upper == "CEPHFS"
        && let Some(fs) = &state.config.manila.cephfs_filesystem_name
    {
        metadata.insert("__mount_options".into(), format!("fs={fs}"));
    }
    let is_public = body
        .get("is_public")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let quotas = &state.config.manila.quotas;
    let used = total(state.shares.values().map(|s| s.size));
    if state.shares.len() as u64 >= quotas.shares {
        return Err(fault(
            413,
            format!(
                "Maximum number of shares allowed ({}) exceeded.",
                quotas.shares
            ),
        ));
    }
    if used.saturating_add(size) > quotas.gigabytes {
        return Err(fault(
            413,
            format!(
                "Requested share exceeds allowed project/user or share type gigabytes quota. (requested {size}G, {used}G of {}G already consumed)",
                quotas.gigabytes
            ),
        ));
    }
    let keys: Vec<String> = name.iter().cloned().collect();
    let mut injected = ctx.fault(state, Operation::ShareCreate, &keys)?;
    if unexpected_network && !matches!(injected, AsyncFault::Stuck(_)) {
        injected = AsyncFault::Error {
            detail_id: "003".into(),
            message: None,
        };
    }

    let id = new_id();
    // An empty share's directory is made here; a share from a snapshot gets the snapshot's
    // bytes by a copy the router runs once the state lock is released.
    let (dir, copy) = match snapshot_id.as_deref() {
        None => (
            state
                .backend
                .create_share(&id, None)
                .map_err(|e| fault(500, format!("The backend could not create the share: {e}")))?,
            None,
        ),
        Some(snap) => (
            state.backend.share_dir(&id),
            Some(state.backend.restore_copy(&id, snap)),
        ),
    };
    let export_locations = state
        .config
        .manila
        .export_locations
        .iter()
        .map(|e| ExportLocation {
            id: new_id(),
            path: match e.address {
                std::net::IpAddr::V6(a) => format!("[{a}]:{}", dir.display()),
                std::net::IpAddr::V4(a) => format!("{a}:{}", dir.display()),
            },
            preferred: e.preferred,
            is_admin_only: e.admin_only,
        })
        .collect();
    let initial = if source.is_some() {
        "creating_from_snapshot"
    } else {
        "creating"
    };
    let (pending, stuck_status) = pending_outcome(
        ctx,
        state.config.manila.delays.share_create_ms,
        injected,
        ShareOutcome::Available { size },
        |detail_id, message| {
            ShareOutcome::Failed(Failure {
                status: "error".into(),
                action: MessageAction::Create,
                detail_id,
                message,
            })
        },
    );
    // While its data is copied the share stays in its initial status with nothing pending.
    let (pending, stuck_status) = match copy {
        None => (pending, stuck_status),
        Some(copy) => {
            state.copies.push(crate::state::PendingCopy {
                copy,
                target: crate::state::CopyTarget::Share {
                    id: id.clone(),
                    pending,
                    stuck: stuck_status,
                },
            });
            (None, None)
        }
    };
    let share = Share {
        id: id.clone(),
        seq: state.next_seq(),
        name,
        description,
        size,
        share_proto: proto_upper,
        share_type_id: share_type.id.clone(),
        share_type_name: share_type.name.clone(),
        availability_zone: zone,
        share_network_id: network,
        share_group_id,
        snapshot_id,
        metadata,
        is_public,
        status: stuck_status.unwrap_or_else(|| initial.into()),
        snapshot_support: share_type.snapshot_support,
        create_share_from_snapshot_support: share_type.create_share_from_snapshot_support,
        instance_id: new_id(),
        created_at: Utc::now(),
        updated_at: None,
        pending,
        export_locations,
        access_rules: Vec::new(),
    };
    let body = json!({"share": view(state, ctx, &share)});
    state.shares.insert(id, share);
    Ok(Reply::json(200, body))
}

/// The type's `provisioning:min_share_size` / `provisioning:max_share_size` and
/// `availability_zones` extra specs, as Manila's API enforces them.
fn check_type_limits(
    share_type: &super::model::ShareType,
    size: u64,
    zone: &str,
) -> Result<(), Reply> {
    let spec = |key: &str| share_type.extra_specs.get(key).map(|v| v.trim().to_owned());
    if let Some(min) = spec("provisioning:min_share_size")
        && let Ok(min) = min.parse::<u64>()
        && size < min
    {
        return Err(bad_request(format!(
            "Invalid input received: Share size {size} is smaller than the minimum share size {min} of share type {}.",
            share_type.name
        )));
    }
    if let Some(max) = spec("provisioning:max_share_size")
        && let Ok(max) = max.parse::<u64>()
        && size > max
    {
        return Err(bad_request(format!(
            "Invalid input received: Share size {size} is larger than the maximum share size {max} of share type {}.",
            share_type.name
        )));
    }
    if let Some(zones) = spec("availability_zones")
        && !zones.split(',').map(str::trim).any(|z| z == zone)
    {
        return Err(bad_request(format!(
            "Share type {} is not supported within the availability zone chosen {zone}.",
            share_type.id
        )));
    }
    Ok(())
}

/// `GET /shares/{id}`.
pub(crate) fn show(state: &mut CloudState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    let keys = state.shares.get(id).map(Share::keys).unwrap_or_default();
    if let Err(r) = ctx.fault(state, Operation::ShareGet, &keys) {
        return r;
    }
    match state.shares.get(id) {
        Some(s) => Reply::json(200, json!({"share": view(state, ctx, s)})),
        None => share_not_found(id),
    }
}

/// The query parameters `GET /shares[/detail]` honours; any other one is refused (400)
/// rather than silently ignored.
const LIST_PARAMS: [&str; 23] = [
    "name",
    "name~",
    "description",
    "description~",
    "status",
    "share_type_id",
    "share_type",
    "snapshot_id",
    "share_network_id",
    "share_group_id",
    "is_soft_deleted",
    "metadata",
    "export_location_id",
    "export_location_path",
    "availability_zone",
    "project_id",
    "all_tenants",
    "is_public",
    "with_count",
    "limit",
    "offset",
    "sort_key",
    "sort_dir",
];

/// The `metadata` filter: JSON or the Python dict repr clients send (`{'k': 'v'}`).
fn metadata_filter(text: &str) -> Result<BTreeMap<String, String>, Reply> {
    let parsed = serde_json::from_str::<Value>(text)
        .or_else(|_| serde_json::from_str::<Value>(&text.replace('\'', "\"")));
    match parsed {
        Ok(value @ Value::Object(_)) => string_map(Some(&value), "metadata filter"),
        _ => Err(bad_request(format!(
            "Invalid metadata filter {text:?}: it must be a dictionary of strings."
        ))),
    }
}

fn query_number(ctx: &Ctx<'_>, key: &str) -> Result<Option<usize>, Reply> {
    match ctx.query(key) {
        None => Ok(None),
        Some(v) => v.parse().map(Some).map_err(|_| {
            bad_request(format!(
                "Invalid {key} {v:?}: it must be a non-negative integer."
            ))
        }),
    }
}

/// `GET /shares` and `GET /shares/detail` with Manila's common filters.
pub(crate) fn list(state: &mut CloudState, ctx: &mut Ctx<'_>, detail: bool) -> Reply {
    match list_checked(state, ctx, detail) {
        Ok(reply) | Err(reply) => reply,
    }
}

fn list_checked(state: &mut CloudState, ctx: &mut Ctx<'_>, detail: bool) -> Result<Reply, Reply> {
    ctx.fault(state, Operation::ShareList, &[])?;
    if let Some((key, _)) = ctx
        .query
        .iter()
        .find(|(k, _)| !LIST_PARAMS.contains(&k.as_str()))
    {
        return Err(bad_request(format!(
            "Invalid filter {key:?}: the shares list does not support it."
        )));
    }
    let metadata = ctx.query("metadata").map(metadata_filter).transpose()?;
    let offset = query_number(ctx, "offset")?.unwrap_or(0);
    let limit = query_number(ctx, "limit")?.unwrap_or(usize::MAX);
    let descending = match ctx.query("sort_dir") {
        None | Some("desc") => true,
        Some("asc") => false,
        Some(other) => {
            return Err(bad_request(format!(
                "Invalid sort_dir {other:?}: it must be asc or desc."
            )));
        }
    };
    let sort_key = ctx.query("sort_key").unwrap_or("created_at");
    if ![
        "created_at",
        "updated_at",
        "id",
        "name",
        "display_name",
        "size",
        "status",
        "share_proto",
        "availability_zone",
        "share_type_id",
    ]
    .contains(&sort_key)
    {
        return Err(bad_request(format!(
            "Invalid sort_key {sort_key:?}: the shares list cannot be sorted by it."
        )));
    }
    let flag = |key: &str| -> Result<Option<bool>, Reply> {
        match ctx.query(key) {
            None => Ok(None),
            Some(v) if ["true", "1", "yes", "on"].contains(&v.to_lowercase().as_str()) => {
                Ok(Some(true))
            }
            Some(v) if ["false", "0", "no", "off"].contains(&v.to_lowercase().as_str()) => {
                Ok(Some(false))
            }
            Some(v) => Err(bad_request(format!(
                "Invalid {key} {v:?}: it must be a boolean."
            ))),
        }
    };
    let soft_deleted = flag("is_soft_deleted")?.unwrap_or(false);
    let with_count = flag("with_count")?.unwrap_or(false) && ctx.at_least(42);
    flag("all_tenants")?;
    flag("is_public")?;
    let project = state.config.account.project_id.clone();
    let text_has = |value: &Option<String>, key: &str| {
        ctx.query(key)
            .is_none_or(|n| value.as_deref().is_some_and(|v| v.contains(n)))
    };
    let mut shares: Vec<&Share> = state
        .shares
        .values()
        .filter(|s| {
            ctx.query("name")
                .is_none_or(|n| s.name.as_deref() == Some(n))
        })
        .filter(|s| text_has(&s.name, "name~"))
        .filter(|s| {
            ctx.query("description")
                .is_none_or(|n| s.description.as_deref() == Some(n))
        })
        .filter(|s| text_has(&s.description, "description~"))
        .filter(|s| ctx.query("status").is_none_or(|st| s.status == st))
        // Nothing here is ever soft-deleted (the recycle bin, 2.69): asking for it finds none.
        .filter(|_| !soft_deleted)
        // Every share belongs to the one project; `is_public=true` adds other projects'
        // public shares, of which there are none.
        .filter(|_| ctx.query("project_id").is_none_or(|p| p == project))
        .filter(|s| {
            ctx.query("share_type_id")
                .or(ctx.query("share_type"))
                .is_none_or(|t| s.share_type_id == t || s.share_type_name == t)
        })
        .filter(|s| {
            ctx.query("snapshot_id")
                .is_none_or(|x| s.snapshot_id.as_deref() == Some(x))
        })
        .filter(|s| {
            ctx.query("share_network_id")
                .is_none_or(|x| s.share_network_id.as_deref() == Some(x))
        })
        .filter(|s| {
            ctx.query("share_group_id")
                .is_none_or(|x| s.share_group_id.as_deref() == Some(x))
        })
        .filter(|s| {
            ctx.query("availability_zone")
                .is_none_or(|z| s.availability_zone == z)
        })
        .filter(|s| {
            metadata
                .as_ref()
                .is_none_or(|m| m.iter().all(|(k, v)| s.metadata.get(k) == Some(v)))
        })
        .filter(|s| {
            ctx.query("export_location_id")
                .is_none_or(|x| s.export_locations.iter().any(|e| e.id == x))
        })
        .filter(|s| {
            ctx.query("export_location_path")
                .is_none_or(|x| s.export_locations.iter().any(|e| e.path == x))
        })
        .collect();
    // Creation order first (the seq breaks ties), then the requested key.
    shares.sort_by_key(|s| s.seq);
    match sort_key {
        "updated_at" => shares.sort_by_key(|s| s.updated_at.unwrap_or(s.created_at)),
        "id" => shares.sort_by(|a, b| a.id.cmp(&b.id)),
        "name" | "display_name" => shares.sort_by(|a, b| a.name.cmp(&b.name)),
        "size" => shares.sort_by_key(|s| s.size),
        "status" => shares.sort_by(|a, b| a.status.cmp(&b.status)),
        "share_proto" => shares.sort_by(|a, b| a.share_proto.cmp(&b.share_proto)),
        "availability_zone" => {
            shares.sort_by(|a, b| a.availability_zone.cmp(&b.availability_zone));
        }
        "share_type_id" => shares.sort_by(|a, b| a.share_type_id.cmp(&b.share_type_id)),
        _ => {}
    }
    if descending {
        shares.reverse();
    }
    let count = shares.len();
    let items: Vec<Value> = shares
        .into_iter()
        .skip(offset)
        .take(limit)
        .map(|s| {
            if detail {
                view(state, ctx, s)
            } else {
                json!({"id": s.id, "name": s.name, "links": ctx.links(state, "shares", &s.id)})
            }
        })
        .collect();
    let mut body = json!({"shares": items});
    if with_count {
        body["count"] = json!(count);
    }
    Ok(Reply::json(200, body))
}

/// `PUT /shares/{id}`: `display_name`, `display_description` and `is_public`, the keys
/// Manila's update takes; any other key (`name`, `description`, …) is ignored, as Manila
/// ignores it.
pub(crate) fn update(state: &mut CloudState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
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
    Reply::json(200, json!({"share": view(state, ctx, &share)}))
}

/// `DELETE /shares/{id}`: `deleting`, then gone.
pub(crate) fn delete(state: &mut CloudState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
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
    let injected = match ctx.fault(state, Operation::ShareDelete, &keys) {
        Ok(f) => f,
        Err(r) => return r,
    };
    let (pending, stuck) = pending_outcome(
        ctx,
        state.config.manila.delays.share_delete_ms,
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
        share.status = stuck.unwrap_or_else(|| "deleting".into());
        share.pending = pending;
        share.updated_at = Some(Utc::now());
    }
    Reply::empty(202)
}

/// The `extend` / `shrink` actions.
pub(crate) fn resize(
    state: &mut CloudState,
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
        let quotas = &state.config.manila.quotas;
        let used = total(state.shares.values().map(|s| s.size));
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
    let injected = match ctx.fault(state, op, &keys) {
        Ok(f) => f,
        Err(r) => return r,
    };
    let (pending, stuck) = pending_outcome(
        ctx,
        state.config.manila.delays.share_resize_ms,
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
        share.status = stuck.unwrap_or_else(|| if grow { "extending" } else { "shrinking" }.into());
        share.pending = pending;
        share.updated_at = Some(Utc::now());
    }
    Reply::empty(202)
}
