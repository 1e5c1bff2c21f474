//! Cinder's other resources: snapshots, volume types, zones, quotas and limits, user
//! messages, and the attachments Nova made (read-only, 3.27).

use std::collections::BTreeMap;

use chrono::Utc;
use serde_json::{Map, Value, json};

use super::model::{BlockFailure, SnapshotOutcome, VolumeSnapshot, VolumeType};
use super::{BlockState, CopyTarget, Ctx, disk};
use crate::backend::Copy;
use crate::faults::Operation;
use crate::lifecycle::{Lifecycle, api_time, due_after, new_id, plan};
use crate::reply::{Reply, fault};

fn snapshot_view(ctx: &Ctx<'_>, s: &VolumeSnapshot) -> Value {
    let mut body = json!({
        "id": s.id, "name": s.name, "description": s.description, "volume_id": s.volume_id,
        "size": s.size, "status": s.status, "metadata": s.metadata,
        "created_at": api_time(&s.created_at),
        "updated_at": s.updated_at.as_ref().map(api_time),
        "links": ctx.links("snapshots", &s.id),
    });
    if ctx.at_least(65)
        && let Some(map) = body.as_object_mut()
    {
        map.insert("consumes_quota".into(), json!(true));
    }
    body
}

fn snapshot_missing(id: &str) -> Reply {
    fault(404, format!("Snapshot {id} could not be found."))
}

pub(crate) fn list_snapshots(state: &mut BlockState, ctx: &mut Ctx<'_>, detail: bool) -> Reply {
    if let Err(r) = ctx.fault(Operation::VolumeSnapshotList, &[]) {
        return r;
    }
    let mut snaps: Vec<&VolumeSnapshot> = state
        .snapshots
        .values()
        .filter(|s| {
            ctx.query("name")
                .is_none_or(|n| s.name.as_deref() == Some(n))
        })
        .filter(|s| ctx.query("volume_id").is_none_or(|v| s.volume_id == v))
        .filter(|s| ctx.query("status").is_none_or(|v| s.status == v))
        .collect();
    snaps.sort_by_key(|s| s.seq);
    let items: Vec<Value> = snaps
        .iter()
        .map(|s| {
            let full = snapshot_view(ctx, s);
            if detail {
                full
            } else {
                json!({"id": s.id, "name": s.name, "volume_id": s.volume_id, "status": s.status,
                       "size": s.size, "links": full["links"]})
            }
        })
        .collect();
    Reply::json(200, json!({"snapshots": items}))
}

pub(crate) fn show_snapshot(state: &mut BlockState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    if let Err(r) = ctx.fault(Operation::VolumeSnapshotGet, &[id.to_owned()]) {
        return r;
    }
    match state.snapshots.get(id) {
        Some(s) => Reply::json(200, json!({"snapshot": snapshot_view(ctx, s)})),
        None => snapshot_missing(id),
    }
}

/// What a snapshot create asks for.
struct SnapshotRequest {
    volume_id: String,
    name: Option<String>,
    description: Option<String>,
    /// Snapshot an `in-use` volume too.
    force: bool,
    metadata: BTreeMap<String, String>,
}

impl SnapshotRequest {
    /// The body's fields (`volume_id` required; other fields of the wrong type ignored).
    fn parse(body: &Map<String, Value>) -> Result<Self, Reply> {
        let Some(volume_id) = body
            .get("volume_id")
            .and_then(Value::as_str)
            .map(str::to_owned)
        else {
            return Err(fault(
                400,
                "Invalid input received: 'volume_id' must be specified",
            ));
        };
        let name = body.get("name").and_then(Value::as_str).map(str::to_owned);
        let description = body
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let force = match body.get("force") {
            Some(Value::Bool(b)) => *b,
            Some(Value::String(s)) => s.eq_ignore_ascii_case("true"),
            _ => false,
        };
        let metadata = body
            .get("metadata")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        Ok(Self {
            volume_id,
            name,
            description,
            force,
            metadata,
        })
    }
}

pub(crate) fn create_snapshot(state: &mut BlockState, ctx: &mut Ctx<'_>) -> Reply {
    let body = match ctx.body_object("snapshot") {
        Ok(b) => b,
        Err(r) => return r,
    };
    let SnapshotRequest {
        volume_id,
        name,
        description,
        force,
        metadata,
    } = match SnapshotRequest::parse(&body) {
        Ok(r) => r,
        Err(r) => return r,
    };
    let Some(volume) = state.volumes.get(&volume_id) else {
        return fault(404, format!("Volume {volume_id} could not be found."));
    };
    let ok = volume.status == "available" || (force && volume.status == "in-use");
    if !ok {
        return fault(
            400,
            format!(
                "Invalid volume: Volume {volume_id} status must be available (or in-use with force), but current status is: {}",
                volume.status
            ),
        );
    }
    let size = volume.size;
    let quotas = &ctx.config.cinder.quotas;
    if state.snapshots.len() as u64 >= quotas.snapshots {
        return fault(
            413,
            format!(
                "SnapshotLimitExceeded: Maximum number of snapshots allowed ({}) exceeded",
                quotas.snapshots
            ),
        );
    }
    if state.gigabytes_used() + size > quotas.gigabytes {
        return fault(
            413,
            format!(
                "VolumeSizeExceedsAvailableQuota: Requested volume or snapshot exceeds allowed gigabytes quota. Requested {size}G, quota is {}G.",
                quotas.gigabytes
            ),
        );
    }
    let keys: Vec<String> = name.iter().cloned().collect();
    let injected = match ctx.fault(Operation::VolumeSnapshotCreate, &keys) {
        Ok(f) => f,
        Err(r) => return r,
    };
    let due = due_after(ctx.now, ctx.config.cinder.delays.snapshot_create_ms);
    let (pending, stuck) = plan(
        due,
        injected,
        SnapshotOutcome::Available,
        |detail_id, message| {
            SnapshotOutcome::Failed(BlockFailure {
                status: "error".into(),
                action: "004",
                detail_id,
                message,
            })
        },
    );
    let id = new_id();
    let seq = state.next_seq();
    let snap = VolumeSnapshot {
        id: id.clone(),
        seq,
        name,
        description,
        volume_id: volume_id.clone(),
        size,
        status: "creating".into(),
        metadata,
        created_at: Utc::now(),
        updated_at: None,
        pending: None,
    };
    let reply = Reply::json(202, json!({"snapshot": snapshot_view(ctx, &snap)}));
    let root = state.root().to_path_buf();
    let copy = Copy {
        from: disk::volume_file(&root, &volume_id),
        to: disk::snapshot_file(&root, &id),
    };
    let target = CopyTarget::Snapshot {
        id: id.clone(),
        plan: (pending, stuck),
    };
    state.copies.push((copy, target));
    state.snapshots.insert(id, snap);
    reply
}

pub(crate) fn delete_snapshot(state: &mut BlockState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    let Some(keys) = state.snapshots.get(id).map(VolumeSnapshot::keys) else {
        return snapshot_missing(id);
    };
    let injected = match ctx.fault(Operation::VolumeSnapshotDelete, &keys) {
        Ok(f) => f,
        Err(r) => return r,
    };
    let due = due_after(ctx.now, ctx.config.cinder.delays.snapshot_delete_ms);
    let Some(s) = state.snapshots.get_mut(id) else {
        return snapshot_missing(id);
    };
    if !["available", "error", "error_deleting"].contains(&s.status.as_str()) {
        return fault(
            400,
            format!(
                "Invalid snapshot: Snapshot {id} status must be available or error, but is {}",
                s.status
            ),
        );
    }
    s.start(
        "deleting",
        plan(
            due,
            injected,
            SnapshotOutcome::Gone,
            |detail_id, message| {
                SnapshotOutcome::Failed(BlockFailure {
                    status: "error_deleting".into(),
                    action: "005",
                    detail_id,
                    message,
                })
            },
        ),
    );
    Reply::empty(202)
}

fn type_view(t: &VolumeType, default: bool) -> Value {
    json!({
        "id": t.id, "name": t.name, "description": t.description, "is_public": true,
        "os-volume-type-access:is_public": true, "qos_specs_id": null,
        "extra_specs": t.extra_specs, "is_default": default,
    })
}

fn is_default(ctx: &Ctx<'_>, t: &VolumeType) -> bool {
    ctx.config.cinder.default_volume_type.as_deref() == Some(t.name.as_str())
}

pub(crate) fn list_types(state: &mut BlockState, ctx: &mut Ctx<'_>) -> Reply {
    if let Err(r) = ctx.fault(Operation::VolumeTypes, &[]) {
        return r;
    }
    let types: Vec<Value> = state
        .types
        .iter()
        .map(|t| type_view(t, is_default(ctx, t)))
        .collect();
    Reply::json(200, json!({"volume_types": types}))
}

pub(crate) fn show_type(state: &mut BlockState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    if let Err(r) = ctx.fault(Operation::VolumeTypes, &[id.to_owned()]) {
        return r;
    }
    match state.volume_type(id) {
        Some(t) => Reply::json(
            200,
            json!({"volume_type": type_view(t, is_default(ctx, t))}),
        ),
        None => fault(404, format!("Volume type {id} could not be found.")),
    }
}

pub(crate) fn default_type(state: &mut BlockState, ctx: &mut Ctx<'_>) -> Reply {
    let name = ctx
        .config
        .cinder
        .default_volume_type
        .clone()
        .unwrap_or_default();
    show_type(state, ctx, &name)
}

pub(crate) fn extra_specs(state: &mut BlockState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    if let Err(r) = ctx.fault(Operation::VolumeTypes, &[id.to_owned()]) {
        return r;
    }
    match state.volume_type(id) {
        Some(t) => Reply::json(200, json!({"extra_specs": t.extra_specs})),
        None => fault(404, format!("Volume type {id} could not be found.")),
    }
}

pub(crate) fn zones(ctx: &mut Ctx<'_>) -> Reply {
    if let Err(r) = ctx.fault(Operation::VolumeAvailabilityZones, &[]) {
        return r;
    }
    let zones: Vec<Value> = ctx
        .config
        .cinder
        .availability_zones
        .iter()
        .map(|z| json!({"zoneName": z, "zoneState": {"available": true}}))
        .collect();
    Reply::json(200, json!({"availabilityZoneInfo": zones}))
}

fn usage(state: &BlockState) -> (u64, u64, u64) {
    (
        state.volumes.len() as u64,
        state.gigabytes_used(),
        state.snapshots.len() as u64,
    )
}

pub(crate) fn quotas(state: &mut BlockState, ctx: &mut Ctx<'_>) -> Reply {
    if let Err(r) = ctx.fault(Operation::VolumeQuotas, &[]) {
        return r;
    }
    let q = ctx.config.cinder.quotas.clone();
    let (volumes, gigabytes, snapshots) = usage(state);
    let project = ctx.config.account.project_id.clone();
    let body = if ctx
        .query("usage")
        .is_some_and(|u| u.eq_ignore_ascii_case("true"))
    {
        let item = |limit: u64, used: u64| json!({"limit": limit, "in_use": used, "reserved": 0, "allocated": 0});
        json!({"id": project, "volumes": item(q.volumes, volumes),
               "gigabytes": item(q.gigabytes, gigabytes), "snapshots": item(q.snapshots, snapshots),
               "backups": item(10, 0), "backup_gigabytes": item(1000, 0), "groups": item(10, 0),
               "per_volume_gigabytes": item(u64::MAX >> 1, 0)})
    } else {
        json!({"id": project, "volumes": q.volumes, "gigabytes": q.gigabytes,
               "snapshots": q.snapshots, "backups": 10, "backup_gigabytes": 1000, "groups": 10,
               "per_volume_gigabytes": -1})
    };
    Reply::json(200, json!({"quota_set": body}))
}

pub(crate) fn limits(state: &mut BlockState, ctx: &mut Ctx<'_>) -> Reply {
    if let Err(r) = ctx.fault(Operation::VolumeQuotas, &[]) {
        return r;
    }
    let q = ctx.config.cinder.quotas.clone();
    let (volumes, gigabytes, snapshots) = usage(state);
    Reply::json(
        200,
        json!({"limits": {"rate": [], "absolute": {
            "maxTotalVolumes": q.volumes, "totalVolumesUsed": volumes,
            "maxTotalVolumeGigabytes": q.gigabytes, "totalGigabytesUsed": gigabytes,
            "maxTotalSnapshots": q.snapshots, "totalSnapshotsUsed": snapshots,
            "maxTotalBackups": 10, "totalBackupsUsed": 0,
            "maxTotalBackupGigabytes": 1000, "totalBackupGigabytesUsed": 0,
        }}}),
    )
}

fn message_view(m: &super::model::BlockMessage) -> Value {
    let guaranteed = m.created_at + chrono::Duration::days(30);
    json!({
        "id": m.id, "event_id": m.event_id, "user_message": m.user_message,
        "message_level": "ERROR", "resource_type": m.resource_type,
        "resource_uuid": m.resource_id, "request_id": m.request_id,
        "created_at": api_time(&m.created_at), "guaranteed_until": api_time(&guaranteed),
        "links": [],
    })
}

pub(crate) fn list_messages(state: &mut BlockState, ctx: &mut Ctx<'_>) -> Reply {
    if let Err(r) = ctx.fault(Operation::VolumeMessages, &[]) {
        return r;
    }
    let items: Vec<Value> = state
        .messages
        .iter()
        .filter(|m| {
            ctx.query("resource_uuid")
                .is_none_or(|r| m.resource_id == r)
        })
        .map(message_view)
        .collect();
    Reply::json(200, json!({"messages": items}))
}

pub(crate) fn show_message(state: &mut BlockState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    if let Err(r) = ctx.fault(Operation::VolumeMessages, &[id.to_owned()]) {
        return r;
    }
    match state.messages.iter().find(|m| m.id == id) {
        Some(m) => Reply::json(200, json!({"message": message_view(m)})),
        None => fault(404, format!("Message {id} could not be found.")),
    }
}

pub(crate) fn delete_message(state: &mut BlockState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    if let Err(r) = ctx.fault(Operation::VolumeMessages, &[id.to_owned()]) {
        return r;
    }
    let before = state.messages.len();
    state.messages.retain(|m| m.id != id);
    if state.messages.len() == before {
        return fault(404, format!("Message {id} could not be found."));
    }
    Reply::empty(204)
}

fn attachment_views(state: &BlockState, detail: bool) -> Vec<(String, Value)> {
    let mut volumes: Vec<_> = state.volumes.values().collect();
    volumes.sort_by_key(|v| v.seq);
    volumes
        .iter()
        .flat_map(|v| {
            v.attachments.iter().map(move |a| {
                let mut body = json!({
                    "id": a.id, "volume_id": v.id, "instance": a.server_id,
                    "status": if v.status == "attaching" { "attaching" } else { "attached" },
                });
                if detail && let Some(map) = body.as_object_mut() {
                    map.insert("attach_mode".into(), json!("rw"));
                    map.insert("attached_at".into(), json!(api_time(&a.attached_at)));
                    map.insert("detached_at".into(), Value::Null);
                    map.insert(
                        "connection_info".into(),
                        json!({"driver_volume_type": "fake_loop", "device": a.device}),
                    );
                }
                (a.id.clone(), body)
            })
        })
        .collect()
}

pub(crate) fn list_attachments(state: &mut BlockState, ctx: &mut Ctx<'_>, detail: bool) -> Reply {
    let _ = ctx;
    let items: Vec<Value> = attachment_views(state, detail)
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    Reply::json(200, json!({"attachments": items}))
}

pub(crate) fn show_attachment(state: &mut BlockState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    let _ = ctx;
    match attachment_views(state, true)
        .into_iter()
        .find(|(a, _)| a == id)
    {
        Some((_, v)) => Reply::json(200, json!({"attachment": v})),
        None => fault(404, format!("Attachment {id} could not be found.")),
    }
}
