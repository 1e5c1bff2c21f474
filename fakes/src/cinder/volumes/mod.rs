//! Volumes: show, list and delete here; create (blank, from a snapshot, from a volume) in
//! [`mod@create`], the actions (extend, reset status, force delete) in [`actions`].

mod actions;
mod create;

use serde_json::{Value, json};

use super::model::{BlockFailure, Volume, VolumeOutcome};
use super::{BlockState, Ctx};
use crate::faults::Operation;
use crate::lifecycle::{Lifecycle, api_time, due_after, plan};
use crate::reply::{Reply, fault};
pub(crate) use actions::action;
pub(crate) use create::create;

/// A volume as Cinder shows it at the request's microversion.
pub(crate) fn view(ctx: &Ctx<'_>, v: &Volume) -> Value {
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
        "user_id": ctx.config.account.user_id,
        "replication_status": null, "consistencygroup_id": null, "migration_status": null,
        "links": ctx.links("volumes", &v.id),
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
            json!(ctx.config.account.project_id),
        );
    }
    body
}

/// The 404 for an unknown volume.
pub(crate) fn not_found(id: &str) -> Reply {
    fault(404, format!("Volume {id} could not be found."))
}

pub(crate) fn list(state: &mut BlockState, ctx: &mut Ctx<'_>, detail: bool) -> Reply {
    if let Err(r) = ctx.fault(Operation::VolumeList, &[]) {
        return r;
    }
    let mut volumes: Vec<&Volume> = state
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
                view(ctx, v)
            } else {
                json!({"id": v.id, "name": v.name, "links": ctx.links("volumes", &v.id)})
            }
        })
        .collect();
    let mut body = json!({"volumes": items});
    if more && let (Some(last), Some(n)) = (volumes.last(), limit) {
        let collection = if detail { "volumes/detail" } else { "volumes" };
        let url = crate::catalog::cinder_url(ctx.base_url, ctx.project_id());
        body["volumes_links"] = json!([{
            "rel": "next",
            "href": format!("{url}/{collection}?limit={n}&marker={}", last.id),
        }]);
    }
    Reply::json(200, body)
}

pub(crate) fn show(state: &mut BlockState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    if let Err(r) = ctx.fault(Operation::VolumeGet, &[id.to_owned()]) {
        return r;
    }
    match state.volumes.get(id) {
        Some(v) => Reply::json(200, json!({"volume": view(ctx, v)})),
        None => not_found(id),
    }
}

pub(crate) fn delete(state: &mut BlockState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    let Some(keys) = state.volumes.get(id).map(Volume::keys) else {
        return not_found(id);
    };
    let injected = match ctx.fault(Operation::VolumeDelete, &keys) {
        Ok(f) => f,
        Err(r) => return r,
    };
    let dependents = state
        .snapshots
        .values()
        .filter(|s| s.volume_id == id)
        .count();
    let due = due_after(ctx.now, ctx.config.cinder.delays.volume_delete_ms);
    let Some(v) = state.volumes.get_mut(id) else {
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
    v.start(
        "deleting",
        plan(due, injected, VolumeOutcome::Gone, |detail_id, message| {
            VolumeOutcome::Failed(BlockFailure {
                status: "error_deleting".into(),
                action: "011",
                detail_id,
                message,
            })
        }),
    );
    Reply::empty(202)
}
