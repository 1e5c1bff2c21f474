//! Volumes: create (blank, from a snapshot, from a volume), list, show, delete, extend.

use std::collections::BTreeMap;

use chrono::Utc;
use serde_json::{Value, json};

use super::Ctx;
use super::disk;
use super::model::{BlockCopyTarget, BlockFailure, Volume, VolumeOutcome};
use crate::backend::Copy;
use crate::faults::Operation;
use crate::lifecycle::AsyncFault;
use crate::lifecycle::Pending;
use crate::lifecycle::{api_time, new_id};
use crate::lifecycle::{due_after, plan};
use crate::reply::Reply;
use crate::reply::fault;
use crate::state::{CloudState, CopyTarget, PendingCopy};

pub(crate) fn view(state: &CloudState, ctx: &Ctx<'_>, v: &Volume) -> Value {
    let attachments: Vec<Value> = v
        .attachments
        .iter()
        .map(|a| {
            json!({
                "id": v.id, "attachment_id": a.id, "volume_id": v.id, "server_id": a.server_id,
                "host_name": a.host_name, "device": a.device,
                "attached_at": api_time(&a.attached_at),
            })
        })
        .collect();
    let mut body = json!({
        "id": v.id, "name": v.name, "description": v.description, "size": v.size,
        "status": v.status, "availability_zone": v.availability_zone,
        "volume_type": v.type_name, "snapshot_id": v.snapshot_id,
        "source_volid": v.source_volid, "metadata": v.metadata,
        "multiattach": v.multiattach, "bootable": "false", "encrypted": false,
        "attachments": attachments,
        "created_at": api_time(&v.created_at),
        "updated_at": v.updated_at.as_ref().map(api_time),
        "user_id": state.config.account.user_id,
        "replication_status": null, "consistencygroup_id": null, "migration_status": null,
        "links": ctx.links(state, "volumes", &v.id),
    });
    let Some(map) = body.as_object_mut() else {
        return body;
    };
    if ctx.at_least(13) {
        map.insert("group_id".into(), Value::Null);
    }
    if ctx.at_least(48) {
        map.insert("shared_targets".into(), json!(false));
        map.insert(
            "service_uuid".into(),
            json!("6c5b4a39-2816-4f1e-8d7c-fake00cinder"),
        );
    }
    if ctx.at_least(63) {
        map.insert("volume_type_id".into(), json!(v.type_id));
    }
    if ctx.at_least(65) {
        map.insert("consumes_quota".into(), json!(true));
    }
    if ctx.admin {
        map.insert(
            "os-vol-tenant-attr:tenant_id".into(),
            json!(state.config.account.project_id),
        );
    }
    body
}

fn not_found(id: &str) -> Reply {
    fault(404, format!("Volume {id} could not be found."))
}

pub(crate) fn list(state: &mut CloudState, ctx: &mut Ctx<'_>, detail: bool) -> Reply {
    if let Err(r) = ctx.fault(state, Operation::VolumeList, &[]) {
        return r;
    }
    let mut volumes: Vec<&Volume> = state
        .block
        .volumes
        .values()
        .filter(|v| {
            ctx.query("name")
                .is_none_or(|n| v.name.as_deref() == Some(n))
        })
        .filter(|v| ctx.query("status").is_none_or(|s| v.status == s))
        .collect();
    volumes.sort_by_key(|v| v.seq);
    // Pages: `marker` (the last id seen) and `limit`; a full page links to the next.
    if let Some(marker) = ctx.query("marker") {
        let Some(at) = volumes.iter().position(|v| v.id == marker) else {
            return fault(
                400,
                format!("Invalid input received: marker [{marker}] not found"),
            );
        };
        volumes.drain(..=at);
    }
    let limit = match ctx.query("limit").map(str::parse::<usize>) {
        None => None,
        Some(Ok(n)) => Some(n),
        Some(Err(_)) => return fault(400, "Invalid input received: limit must be an integer"),
    };
    let more = limit.is_some_and(|n| volumes.len() > n);
    if let Some(n) = limit {
        volumes.truncate(n);
    }
    let items: Vec<Value> = volumes
        .iter()
        .map(|v| {
            if detail {
                view(state, ctx, v)
            } else {
                json!({"id": v.id, "name": v.name, "links": ctx.links(state, "volumes", &v.id)})
            }
        })
        .collect();
    let mut body = json!({"volumes": items});
    if more && let (Some(last), Some(n)) = (volumes.last(), limit) {
        let collection = if detail { "volumes/detail" } else { "volumes" };
        let url = crate::catalog::cinder_url(&state.base_url, &state.config.account.project_id);
        body["volumes_links"] = json!([{
            "rel": "next",
            "href": format!("{url}/{collection}?limit={n}&marker={}", last.id),
        }]);
    }
    Reply::json(200, body)
}

pub(crate) fn show(state: &mut CloudState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    if let Err(r) = ctx.fault(state, Operation::VolumeGet, &[id.to_owned()]) {
        return r;
    }
    match state.block.volumes.get(id) {
        Some(v) => Reply::json(200, json!({"volume": view(state, ctx, v)})),
        None => not_found(id),
    }
}

fn text(map: &serde_json::Map<String, Value>, key: &str) -> Result<Option<String>, Reply> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(fault(
            400,
            format!("Invalid input for field/attribute {key}. Value: {other}."),
        )),
    }
}

/// GiB of volumes and snapshots in use.
fn gigabytes_used(state: &CloudState) -> u64 {
    state.block.volumes.values().map(|v| v.size).sum::<u64>()
        + state.block.snapshots.values().map(|s| s.size).sum::<u64>()
}

fn over_limit(message: String) -> Reply {
    fault(413, message)
}

/// The scheduler hint keys the fake checks and keeps.
const VOLUME_HINTS: [&str; 2] = ["same_host", "different_host"];

/// `OS-SCH-HNT:scheduler_hints` beside `volume` in a create body, as Cinder's schema takes
/// it: an object (or null) whose `same_host`/`different_host` are a volume id or a list of
/// distinct ids; other hints are accepted and not kept. Unlike Cinder's API, which checks
/// the format only and leaves the rest to its scheduler, an id naming no volume is refused
/// here too, so that a test sees the mistake at once.
fn scheduler_hints(
    state: &CloudState,
    ctx: &Ctx<'_>,
) -> Result<BTreeMap<String, Vec<String>>, Reply> {
    const KEY: &str = "OS-SCH-HNT:scheduler_hints";
    let body: Value =
        serde_json::from_slice(&ctx.req.body).map_err(|_| fault(400, "Malformed request body"))?;
    let hints = match body.get(KEY) {
        None | Some(Value::Null) => return Ok(BTreeMap::new()),
        Some(Value::Object(hints)) => hints,
        Some(other) => {
            return Err(fault(
                400,
                format!(
                    "Invalid input for field/attribute {KEY}. Value: {other}. {other} is not of type 'object', 'null'"
                ),
            ));
        }
    };
    let mut kept = BTreeMap::new();
    for key in VOLUME_HINTS {
        let invalid = |value: &Value| {
            fault(
                400,
                format!(
                    "Invalid input for field/attribute {key}. Value: {value}. {value} is not valid under any of the given schemas"
                ),
            )
        };
        let ids: Vec<String> = match hints.get(key) {
            None => continue,
            Some(Value::String(id)) => vec![id.clone()],
            Some(Value::Array(items)) => {
                let mut ids = Vec::with_capacity(items.len());
                for item in items {
                    let Some(id) = item.as_str() else {
                        return Err(invalid(&hints[key]));
                    };
                    if ids.iter().any(|seen: &String| seen == id) {
                        return Err(invalid(&hints[key]));
                    }
                    ids.push(id.to_owned());
                }
                ids
            }
            Some(other) => return Err(invalid(other)),
        };
        if let Some(bad) = ids.iter().find(|id| !is_uuid(id)) {
            return Err(invalid(&Value::String(bad.clone())));
        }
        if let Some(missing) = ids.iter().find(|id| !state.block.volumes.contains_key(*id)) {
            return Err(fault(
                400,
                format!(
                    "Invalid input received: scheduler hint {key}: Volume {missing} could not be found."
                ),
            ));
        }
        kept.insert(key.to_owned(), ids);
    }
    Ok(kept)
}

/// Whether `text` is a UUID (8-4-4-4-12 hex digits, dashes optional as Cinder's format
/// check allows).
fn is_uuid(text: &str) -> bool {
    let hex: String = text.chars().filter(|c| *c != '-').collect();
    hex.len() == 32
        && hex.chars().all(|c| c.is_ascii_hexdigit())
        && (text.len() == 32 || text.split('-').map(str::len).eq([8, 4, 4, 4, 12]))
}

pub(crate) fn create(state: &mut CloudState, ctx: &mut Ctx<'_>) -> Reply {
    let body = match ctx.body_object("volume") {
        Ok(b) => b,
        Err(r) => return r,
    };
    let fields = (|| {
        Ok::<_, Reply>((
            text(&body, "name")?,
            text(&body, "description")?,
            text(&body, "volume_type")?,
            text(&body, "availability_zone")?,
            text(&body, "snapshot_id")?,
            text(&body, "source_volid")?,
        ))
    })();
    let (name, description, type_name, zone, snapshot_id, source_volid) = match fields {
        Ok(f) => f,
        Err(r) => return r,
    };
    let scheduler_hints = match scheduler_hints(state, ctx) {
        Ok(h) => h,
        Err(r) => return r,
    };
    let mut metadata = BTreeMap::new();
    match body.get("metadata") {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for (k, v) in m {
                let Some(v) = v.as_str() else {
                    return fault(400, format!("Invalid metadata value for key {k}"));
                };
                metadata.insert(k.clone(), v.to_owned());
            }
        }
        Some(_) => return fault(400, "Invalid input for field/attribute metadata."),
    }
    // The source: a snapshot or a volume, whose size is the default and the minimum.
    let (source_file, source_size, source_type) = if let Some(snap) = &snapshot_id {
        let Some(s) = state.block.snapshots.get(snap) else {
            return fault(404, format!("Snapshot {snap} could not be found."));
        };
        if s.status != "available" {
            return fault(
                400,
                format!(
                    "Invalid snapshot: Originating snapshot status must be one of 'available' values (snapshot {snap} is {})",
                    s.status
                ),
            );
        }
        let vol_type = state
            .block
            .volumes
            .get(&s.volume_id)
            .map(|v| v.type_id.clone());
        (
            Some(disk::snapshot_file(state.block.root(), snap)),
            s.size,
            vol_type,
        )
    } else if let Some(src) = &source_volid {
        let Some(v) = state.block.volumes.get(src) else {
            return not_found(src);
        };
        if v.status != "available" && v.status != "in-use" {
            return fault(
                400,
                format!(
                    "Invalid volume: Volume {src} status must be available or in-use, but current status is: {}",
                    v.status
                ),
            );
        }
        (
            Some(disk::volume_file(state.block.root(), src)),
            v.size,
            Some(v.type_id.clone()),
        )
    } else {
        (None, 0, None)
    };
    let size = match body.get("size") {
        None | Some(Value::Null) if source_file.is_some() => source_size,
        Some(v) => match v
            .as_u64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        {
            Some(n) if n >= 1 => n,
            _ => {
                return fault(
                    400,
                    format!(
                        "Invalid input received: Volume size '{v}' must be an integer and greater than 0"
                    ),
                );
            }
        },
        None => return fault(400, "Invalid input received: Volume size must be given"),
    };
    if size < source_size {
        return fault(
            400,
            format!(
                "Invalid input received: Volume size '{size}'GB cannot be smaller than the source size {source_size}GB."
            ),
        );
    }
    let vtype = match type_name.as_deref().or(source_type.as_deref()) {
        Some(t) => state.block.volume_type(t),
        None => state
            .config
            .cinder
            .default_volume_type
            .as_deref()
            .and_then(|d| state.block.volume_type(d)),
    };
    let Some(vtype) = vtype.cloned() else {
        return fault(
            404,
            format!(
                "Volume type {} could not be found.",
                type_name.unwrap_or_default()
            ),
        );
    };
    if vtype.multiattach() && !ctx.at_least(50) {
        return fault(
            400,
            "Multiattach volume types are supported from microversion 3.50.",
        );
    }
    let zones = &state.config.cinder.availability_zones;
    let zone = match zone {
        Some(z) if !zones.contains(&z) => {
            return fault(
                400,
                format!("Invalid input received: Availability zone '{z}' is invalid."),
            );
        }
        Some(z) => z,
        None => zones.first().cloned().unwrap_or_else(|| "nova".into()),
    };
    let quotas = &state.config.cinder.quotas;
    if state.block.volumes.len() as u64 >= quotas.volumes {
        return over_limit(format!(
            "VolumeLimitExceeded: Maximum number of volumes allowed ({}) exceeded for quota 'volumes'.",
            quotas.volumes
        ));
    }
    if gigabytes_used(state) + size > quotas.gigabytes {
        return over_limit(format!(
            "VolumeSizeExceedsAvailableQuota: Requested volume or snapshot exceeds allowed gigabytes quota. Requested {size}G, quota is {}G.",
            quotas.gigabytes
        ));
    }
    let keys: Vec<String> = name.iter().cloned().collect();
    let injected = match ctx.fault(state, Operation::VolumeCreate, &keys) {
        Ok(f) => f,
        Err(r) => return r,
    };
    let id = new_id();
    let file = disk::volume_file(state.block.root(), &id);
    if source_file.is_none()
        && let Err(e) = disk::allocate(&file, size)
    {
        return fault(500, format!("The backend could not make the volume: {e}"));
    }
    let due = due_after(ctx.now, state.config.cinder.delays.volume_create_ms);
    let (pending, stuck) = plan(
        due,
        injected,
        VolumeOutcome::Settle {
            status: "available".into(),
            size,
        },
        |detail_id, message| {
            VolumeOutcome::Failed(BlockFailure {
                status: "error".into(),
                action: "001",
                detail_id,
                message,
            })
        },
    );
    let seq = state.block.next_seq();
    let volume = Volume {
        id: id.clone(),
        seq,
        name,
        description,
        size,
        type_id: vtype.id.clone(),
        type_name: vtype.name.clone(),
        availability_zone: zone,
        snapshot_id,
        source_volid,
        metadata,
        scheduler_hints,
        multiattach: vtype.multiattach(),
        status: "creating".into(),
        created_at: Utc::now(),
        updated_at: None,
        pending: None,
        attachments: Vec::new(),
    };
    let reply = Reply::json(202, json!({"volume": view(state, ctx, &volume)}));
    let mut volume = volume;
    match source_file {
        Some(from) => state.copies.push(PendingCopy {
            copy: Copy { from, to: file },
            target: CopyTarget::Block(BlockCopyTarget::Volume {
                id: id.clone(),
                pending,
                stuck,
            }),
        }),
        None => {
            volume.pending = pending;
            if let Some(s) = stuck {
                volume.status = s;
            }
        }
    }
    state.block.volumes.insert(id, volume);
    reply
}

pub(crate) fn delete(state: &mut CloudState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    let Some(keys) = state.block.volumes.get(id).map(Volume::keys) else {
        return not_found(id);
    };
    let injected = match ctx.fault(state, Operation::VolumeDelete, &keys) {
        Ok(f) => f,
        Err(r) => return r,
    };
    let dependents = state
        .block
        .snapshots
        .values()
        .filter(|s| s.volume_id == id)
        .count();
    let due = due_after(ctx.now, state.config.cinder.delays.volume_delete_ms);
    let Some(v) = state.block.volumes.get_mut(id) else {
        return not_found(id);
    };
    const DELETABLE: [&str; 5] = [
        "available",
        "error",
        "error_restoring",
        "error_extending",
        "error_managing",
    ];
    if !DELETABLE.contains(&v.status.as_str()) || !v.attachments.is_empty() {
        return fault(
            400,
            format!(
                "Invalid volume: Volume status must be available or error or error_restoring or error_extending or error_managing and must not be migrating, attached, belong to a group, have snapshots or be disassociated from snapshots after volume transfer (volume {id} is {}).",
                v.status
            ),
        );
    }
    if dependents > 0 {
        return fault(
            400,
            format!("Invalid volume: Volume {id} still has {dependents} dependent snapshots."),
        );
    }
    v.status = "deleting".into();
    v.updated_at = Some(Utc::now());
    v.pending = match injected {
        AsyncFault::None => due.map(|due| Pending {
            due,
            outcome: VolumeOutcome::Gone,
        }),
        AsyncFault::Stuck(status) => {
            if let Some(s) = status {
                v.status = s;
            }
            None
        }
        AsyncFault::Error { detail_id, message } => due.map(|due| Pending {
            due,
            outcome: VolumeOutcome::Failed(BlockFailure {
                status: "error_deleting".into(),
                action: "011",
                detail_id,
                message,
            }),
        }),
    };
    Reply::empty(202)
}

/// `POST /volumes/{id}/action`: `os-extend`.
pub(crate) fn action(state: &mut CloudState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
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
fn reset_status(state: &mut CloudState, ctx: &mut Ctx<'_>, id: &str, args: &Value) -> Reply {
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
    let Some(v) = state.block.volumes.get_mut(id) else {
        return not_found(id);
    };
    v.status = status.to_owned();
    v.pending = None;
    v.updated_at = Some(Utc::now());
    Reply::empty(202)
}

/// `os-force_delete` (administrators): deletes whatever the status, detaching it first.
fn force_delete(state: &mut CloudState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    if !ctx.admin {
        return fault(
            403,
            "Policy doesn't allow volume_extension:volume_admin_actions:force_delete to be performed.",
        );
    }
    let due = due_after(ctx.now, state.config.cinder.delays.volume_delete_ms);
    let Some(v) = state.block.volumes.get_mut(id) else {
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
        state.block.loops.detach(id, &server);
    }
    Reply::empty(202)
}

fn extend(state: &mut CloudState, ctx: &mut Ctx<'_>, id: &str, args: &Value) -> Reply {
    let Some(keys) = state.block.volumes.get(id).map(Volume::keys) else {
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
    let injected = match ctx.fault(state, Operation::VolumeExtend, &keys) {
        Ok(f) => f,
        Err(r) => return r,
    };
    let used = gigabytes_used(state);
    let quota = state.config.cinder.quotas.gigabytes;
    let due = due_after(ctx.now, state.config.cinder.delays.volume_extend_ms);
    let root = state.block.root().to_path_buf();
    let Some(v) = state.block.volumes.get_mut(id) else {
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
    v.status = "extending".into();
    v.updated_at = Some(Utc::now());
    v.pending = match injected {
        AsyncFault::Error { detail_id, message } => due.map(|due| Pending {
            due,
            outcome: VolumeOutcome::Failed(BlockFailure {
                status: "error_extending".into(),
                action: "007",
                detail_id,
                message,
            }),
        }),
        AsyncFault::Stuck(status) => {
            if let Some(s) = status {
                v.status = s;
            }
            None
        }
        AsyncFault::None => {
            if let Err(e) = disk::allocate(&disk::volume_file(&root, id), new_size) {
                v.status = settled;
                return fault(500, format!("The backend could not extend the volume: {e}"));
            }
            due.map(|due| Pending {
                due,
                outcome: VolumeOutcome::Settle {
                    status: settled,
                    size: new_size,
                },
            })
        }
    };
    if let Err(e) = state.block.loops.refresh(id) {
        tracing::warn!(volume = %id, error = %e, "cannot refresh the loop devices' capacity");
    }
    Reply::empty(202)
}
