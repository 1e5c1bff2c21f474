//! Nova v2.1 under `/compute`: the servers (one per node), and volume attachments
//! (`/servers/{id}/os-volume_attachments`), which make the volume's loop device and its
//! `virtio-…` link in the server's disk directory and move the volume in Cinder through
//! `attaching` → `in-use` and `detaching` → `available`. Microversions are read as Nova
//! reads them ([`crate::microversion::nova_requested`]) up to the release's maximum (or the
//! seed's `nova.max_microversion`); attachments take the shape of the version asked.

use std::collections::BTreeSet;

use chrono::Utc;
use serde_json::{Value, json};
use wiremock::Request;
use wiremock::http::Method;

use crate::catalog::nova_url;
use crate::cinder::model::{Attachment, Server, VolumeOutcome};
use crate::cinder::{BlockState, Ctx, disk};
use crate::faults::Operation;
use crate::lifecycle::{AsyncFault, Lifecycle, Plan, due_after, new_id, plan};
use crate::microversion::{NOVA_LEGACY_HEADER as LEGACY_HEADER, NOVA_MIN, nova_requested};
use crate::reply::{Reply, fault};
use crate::request::{self, Shared};

/// From this microversion an attachment shows `attachment_id` and `bdm_uuid`, not `id`.
const ATTACHMENT_IDS_FROM: (u32, u32) = (2, 89);
/// From this microversion (as the issue reports it; see the README) attach answers 202
/// without a body.
const BODILESS_ATTACH_FROM: (u32, u32) = (2, 101);

fn versions(config: &crate::config::CloudConfig, base_url: &str) -> Value {
    json!([{
        "id": "v2.1", "status": "CURRENT",
        "version": config.nova_max_microversion().to_string(), "min_version": NOVA_MIN.to_string(),
        "updated": "2013-07-23T11:33:21Z",
        "links": [{"rel": "self", "href": format!("{}/", nova_url(base_url))}],
    }])
}

/// Handles a request under [`crate::catalog::NOVA_PREFIX`]; `rest` is the path after it.
pub(crate) fn handle(
    state: &mut BlockState,
    shared: Shared<'_>,
    req: &Request,
    rest: &str,
) -> Reply {
    if !shared.config.cinder.present {
        return request::absent();
    }
    let trimmed = rest.trim_end_matches('/');
    if req.method == Method::GET && trimmed.is_empty() {
        return Reply::json(
            200,
            json!({"versions": versions(shared.config, shared.base_url)}),
        );
    }
    if req.method == Method::GET && trimmed == "/v2.1" {
        return Reply::json(
            200,
            json!({"version": versions(shared.config, shared.base_url)[0]}),
        );
    }
    let (segments, admin) = match shared.admit(req, trimmed, "/v2.1/") {
        Ok(admitted) => admitted,
        Err(reply) => return reply,
    };
    let version = match nova_requested(&req.headers, shared.config.nova_max_microversion()) {
        Ok(v) => (v.major, v.minor),
        Err(refusal) => return fault(refusal.status(), refusal.to_string()),
    };
    let mut ctx = Ctx::new(req, version, admin, shared);
    state.advance(ctx.now);
    let m = req.method.as_str();
    let mut reply = match segments.as_slice() {
        ["os-availability-zone"] if m == "GET" => zones(state, &mut ctx),
        ["servers"] if m == "GET" => list(state, &ctx, false),
        ["servers", "detail"] if m == "GET" => list(state, &ctx, true),
        ["servers", id] if m == "GET" => match state.server(id) {
            Some(s) => Reply::json(200, json!({"server": server_view(state, &ctx, s)})),
            None => server_missing(id),
        },
        ["servers", id, "os-volume_attachments"] if m == "GET" => {
            attachments(state, ctx.version, id, None)
        }
        ["servers", id, "os-volume_attachments"] if m == "POST" => attach(state, &mut ctx, id),
        ["servers", id, "os-volume_attachments", vol] if m == "GET" => {
            attachments(state, ctx.version, id, Some(vol))
        }
        ["servers", id, "os-volume_attachments", vol] if m == "DELETE" => {
            detach(state, &mut ctx, id, vol)
        }
        _ => fault(404, "The resource could not be found."),
    };
    reply.delay = ctx.latency;
    reply
        .header(
            "OpenStack-API-Version",
            format!("compute {}.{}", version.0, version.1),
        )
        .header(LEGACY_HEADER, format!("{}.{}", version.0, version.1))
        .header(
            "Vary",
            "OpenStack-API-Version, X-OpenStack-Nova-API-Version",
        )
}

/// The compute zones as Nova's non-detailed `GET /os-availability-zone` lists them: the
/// seed's `nova.availability_zones` and every server's zone, sorted, once each (`nova` when
/// there are none), available, without hosts.
fn zones(state: &BlockState, ctx: &mut Ctx<'_>) -> Reply {
    if let Err(r) = ctx.fault(Operation::ComputeAvailabilityZones, &[]) {
        return r;
    }
    let mut names: BTreeSet<&str> = ctx
        .config
        .nova
        .availability_zones
        .iter()
        .map(String::as_str)
        .chain(state.servers.values().map(|s| s.availability_zone.as_str()))
        .collect();
    if names.is_empty() {
        names.insert("nova");
    }
    let info: Vec<Value> = names
        .into_iter()
        .map(|z| json!({"zoneName": z, "zoneState": {"available": true}, "hosts": null}))
        .collect();
    Reply::json(200, json!({"availabilityZoneInfo": info}))
}

fn server_missing(id: &str) -> Reply {
    fault(404, format!("Instance {id} could not be found."))
}

fn server_view(state: &BlockState, ctx: &Ctx<'_>, s: &Server) -> Value {
    let attached: Vec<Value> = state
        .volumes
        .values()
        .filter(|v| v.attachments.iter().any(|a| a.server_id == s.id))
        .map(|v| json!({"id": v.id, "delete_on_termination": false}))
        .collect();
    json!({
        "id": s.id, "name": s.name, "status": "ACTIVE",
        "OS-EXT-AZ:availability_zone": s.availability_zone,
        "tenant_id": ctx.config.account.project_id,
        "user_id": ctx.config.account.user_id,
        "created": s.created_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        "os-extended-volumes:volumes_attached": attached,
        "links": [{"rel": "self", "href": format!("{}/servers/{}", nova_url(ctx.base_url), s.id)}],
    })
}

fn list(state: &BlockState, ctx: &Ctx<'_>, detail: bool) -> Reply {
    let servers: Vec<Value> = state
        .servers
        .values()
        .filter(|s| ctx.query("name").is_none_or(|n| s.name == n))
        .map(|s| {
            let full = server_view(state, ctx, s);
            if detail {
                full
            } else {
                json!({"id": s.id, "name": s.name, "links": full["links"]})
            }
        })
        .collect();
    Reply::json(200, json!({"servers": servers}))
}

fn attachment_view(
    ctx_version: (u32, u32),
    volume_id: &str,
    server_id: &str,
    a: &Attachment,
) -> Value {
    let mut body = json!({
        "id": volume_id, "volumeId": volume_id, "serverId": server_id, "device": a.device,
    });
    if let Some(map) = body.as_object_mut() {
        if ctx_version >= (2, 70) {
            map.insert("tag".into(), Value::Null);
        }
        if ctx_version >= (2, 79) {
            map.insert("delete_on_termination".into(), json!(false));
        }
        if ctx_version >= ATTACHMENT_IDS_FROM {
            map.remove("id");
            map.insert("attachment_id".into(), json!(a.id));
            map.insert("bdm_uuid".into(), json!(a.id));
        }
    }
    body
}

fn attachments(
    state: &BlockState,
    version: (u32, u32),
    server: &str,
    volume: Option<&str>,
) -> Reply {
    let Some(s) = state.server(server) else {
        return server_missing(server);
    };
    let mut found: Vec<Value> = Vec::new();
    let mut volumes: Vec<_> = state.volumes.values().collect();
    volumes.sort_by_key(|v| v.seq);
    for v in volumes {
        if volume.is_some_and(|want| want != v.id) {
            continue;
        }
        for a in v.attachments.iter().filter(|a| a.server_id == s.id) {
            found.push(attachment_view(version, &v.id, &s.id, a));
        }
    }
    match volume {
        None => Reply::json(200, json!({"volumeAttachments": found})),
        Some(vol) => match found.into_iter().next() {
            Some(a) => Reply::json(200, json!({"volumeAttachment": a})),
            None => fault(
                404,
                format!("Volume {vol} is not attached to instance {}.", s.id),
            ),
        },
    }
}

/// The first `/dev/vdX` (from `vdb`) not used on `server_id`.
fn next_device(state: &BlockState, server_id: &str) -> Option<String> {
    let used: Vec<&str> = state
        .volumes
        .values()
        .flat_map(|v| v.attachments.iter())
        .filter(|a| a.server_id == server_id)
        .map(|a| a.device.as_str())
        .collect();
    (b'b'..=b'z')
        .map(|c| format!("/dev/vd{}", c as char))
        .find(|d| !used.contains(&d.as_str()))
}

fn injected(ctx: &mut Ctx<'_>, op: Operation, keys: &[String]) -> Result<AsyncFault, Reply> {
    match ctx.fault(op, keys) {
        // An attachment that fails is Nova's error, not a volume state: answer it.
        Ok(AsyncFault::Error { message, .. }) => Err(fault(
            500,
            message.unwrap_or_else(|| format!("Injected fault on {op:?}.")),
        )),
        other => other,
    }
}

/// An attachment change settles the volume in its new status when due, unless a stuck fault
/// hangs it (an error fault was answered already, see [`injected`]).
fn settle_unless_stuck(
    due: Option<std::time::Instant>,
    fault: AsyncFault,
    settle: VolumeOutcome,
) -> Plan<VolumeOutcome> {
    let on_error = settle.clone();
    plan(due, fault, settle, |_, _| on_error)
}

fn attach(state: &mut BlockState, ctx: &mut Ctx<'_>, server: &str) -> Reply {
    let Some(s) = state.server(server).cloned() else {
        return server_missing(server);
    };
    let body = match ctx.body_object("volumeAttachment") {
        Ok(b) => b,
        Err(r) => return r,
    };
    let Some(volume_id) = body
        .get("volumeId")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        return fault(
            400,
            "Invalid input for field/attribute volumeAttachment. 'volumeId' is a required property",
        );
    };
    let keys = vec![volume_id.clone(), s.id.clone(), s.name.clone()];
    let outcome = match injected(ctx, Operation::VolumeAttach, &keys) {
        Ok(f) => f,
        Err(r) => return r,
    };
    let Some(v) = state.volumes.get(&volume_id) else {
        return fault(404, format!("Volume {volume_id} could not be found."));
    };
    if v.attachments.iter().any(|a| a.server_id == s.id) {
        return fault(
            400,
            format!(
                "Invalid volume: volume {volume_id} is already attached to instance {}.",
                s.id
            ),
        );
    }
    let shareable = v.multiattach && (v.status == "in-use" || v.status == "attaching");
    if v.status != "available" && !shareable {
        return fault(
            400,
            format!(
                "Invalid volume: volume {volume_id} status must be 'available' (or in-use and multiattach), but it is '{}' and multiattach is {}.",
                v.status, v.multiattach
            ),
        );
    }
    if v.multiattach && ctx.version < (2, 60) {
        return fault(
            400,
            "Multiattach volumes are only supported starting with compute API version 2.60.",
        );
    }
    let Some(device) = next_device(state, &s.id) else {
        return fault(400, "No free disk device names for prefix 'vd'");
    };
    let file = disk::volume_file(state.root(), &volume_id);
    if let Err(e) = state.loops.attach(&volume_id, &s.id, &file, &s.disk_dir) {
        return fault(500, format!("The host could not attach the volume: {e}"));
    }
    let due = due_after(ctx.now, ctx.config.cinder.delays.attach_ms);
    let attachment = Attachment {
        id: new_id(),
        server_id: s.id.clone(),
        host_name: s.name.clone(),
        device: device.clone(),
        attached_at: Utc::now(),
    };
    let view = attachment_view(ctx.version, &volume_id, &s.id, &attachment);
    let Some(v) = state.volumes.get_mut(&volume_id) else {
        return fault(404, format!("Volume {volume_id} could not be found."));
    };
    v.attachments.push(attachment);
    let settle = VolumeOutcome::Settle {
        status: "in-use".into(),
        size: v.size,
    };
    v.start("attaching", settle_unless_stuck(due, outcome, settle));
    if ctx.version >= BODILESS_ATTACH_FROM {
        return Reply::empty(202);
    }
    Reply::json(200, json!({"volumeAttachment": view}))
}

fn detach(state: &mut BlockState, ctx: &mut Ctx<'_>, server: &str, volume_id: &str) -> Reply {
    let Some(s) = state.server(server).cloned() else {
        return server_missing(server);
    };
    let keys = vec![volume_id.to_owned(), s.id.clone(), s.name.clone()];
    let outcome = match injected(ctx, Operation::VolumeDetach, &keys) {
        Ok(f) => f,
        Err(r) => return r,
    };
    let due = due_after(ctx.now, ctx.config.cinder.delays.attach_ms);
    let Some(v) = state.volumes.get_mut(volume_id) else {
        return fault(404, format!("Volume {volume_id} could not be found."));
    };
    let Some(index) = v.attachments.iter().position(|a| a.server_id == s.id) else {
        return fault(
            404,
            format!("Volume {volume_id} is not attached to instance {}.", s.id),
        );
    };
    v.attachments.remove(index);
    let settled = if v.attachments.is_empty() {
        "available"
    } else {
        "in-use"
    };
    let settle = VolumeOutcome::Settle {
        status: settled.into(),
        size: v.size,
    };
    v.start("detaching", settle_unless_stuck(due, outcome, settle));
    state.loops.detach(volume_id, &s.id);
    Reply::empty(202)
}
