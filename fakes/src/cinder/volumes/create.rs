//! `POST /volumes`, one step per thing Cinder's API checks, in its order (the first refusal
//! wins): the text fields, the scheduler hints, the metadata, the source (a snapshot or a
//! volume), the size, the type, the zone, the quotas, the injected fault; then the new volume
//! is made ([`insert`]): a sparse file of its size, or the copy of its source's.

use std::collections::BTreeMap;
use std::path::PathBuf;

use chrono::Utc;
use serde_json::{Map, Value, json};

use super::{not_found, view};
use crate::backend::Copy;
use crate::cinder::model::{BlockFailure, Volume, VolumeOutcome, VolumeType};
use crate::cinder::{BlockState, CopyTarget, Ctx, disk};
use crate::faults::Operation;
use crate::lifecycle::{AsyncFault, due_after, new_id, plan};
use crate::reply::{Reply, fault};

/// `POST /volumes`.
pub(crate) fn create(state: &mut BlockState, ctx: &mut Ctx<'_>) -> Reply {
    let body = match ctx.body_object("volume") {
        Ok(b) => b,
        Err(r) => return r,
    };
    match create_checked(state, ctx, &body) {
        Ok(reply) | Err(reply) => reply,
    }
}

/// The text fields of a create.
struct Fields {
    name: Option<String>,
    description: Option<String>,
    type_name: Option<String>,
    zone: Option<String>,
    snapshot_id: Option<String>,
    source_volid: Option<String>,
}

/// What a volume made from a snapshot or a volume starts from.
struct Source {
    file: PathBuf,
    /// The default size, and the smallest allowed.
    size: u64,
    /// The type the new volume takes when none is named.
    type_id: Option<String>,
}

/// A volume create that passed every check.
struct NewVolume {
    fields: Fields,
    size: u64,
    vtype: VolumeType,
    zone: String,
    metadata: BTreeMap<String, String>,
    scheduler_hints: BTreeMap<String, Vec<String>>,
    source: Option<Source>,
}

fn create_checked(
    state: &mut BlockState,
    ctx: &mut Ctx<'_>,
    body: &Map<String, Value>,
) -> Result<Reply, Reply> {
    let fields = Fields {
        name: text(body, "name")?,
        description: text(body, "description")?,
        type_name: text(body, "volume_type")?,
        zone: text(body, "availability_zone")?,
        snapshot_id: text(body, "snapshot_id")?,
        source_volid: text(body, "source_volid")?,
    };
    let scheduler_hints = scheduler_hints(state, ctx)?;
    let metadata = metadata(body)?;
    let source = source(state, &fields)?;
    let size = size(body, source.as_ref())?;
    let vtype = volume_type(state, ctx, &fields, source.as_ref())?;
    let zone = zone(ctx, fields.zone.clone())?;
    check_quotas(state, ctx, size)?;
    let keys: Vec<String> = fields.name.iter().cloned().collect();
    let injected = ctx.fault(Operation::VolumeCreate, &keys)?;
    let volume = NewVolume {
        fields,
        size,
        vtype,
        zone,
        metadata,
        scheduler_hints,
        source,
    };
    insert(state, ctx, volume, injected)
}

/// A text field that may be absent or null.
fn text(map: &Map<String, Value>, key: &str) -> Result<Option<String>, Reply> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(fault(
            400,
            format!("Invalid input for field/attribute {key}. Value: {other}."),
        )),
    }
}

/// The scheduler hint keys the fake checks and keeps.
const VOLUME_HINTS: [&str; 2] = ["same_host", "different_host"];

/// `OS-SCH-HNT:scheduler_hints` beside `volume` in a create body, as Cinder's schema takes
/// it: an object (or null) whose `same_host`/`different_host` are a volume id or a list of
/// distinct ids; other hints are accepted and not kept. Unlike Cinder's API, which checks
/// the format only and leaves the rest to its scheduler, an id naming no volume is refused
/// here too, so that a test sees the mistake at once.
fn scheduler_hints(
    state: &BlockState,
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
        if let Some(missing) = ids.iter().find(|id| !state.volumes.contains_key(*id)) {
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

/// The metadata: an object of strings, or absent.
fn metadata(body: &Map<String, Value>) -> Result<BTreeMap<String, String>, Reply> {
    let mut metadata = BTreeMap::new();
    match body.get("metadata") {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for (k, v) in m {
                let Some(v) = v.as_str() else {
                    return Err(fault(400, format!("Invalid metadata value for key {k}")));
                };
                metadata.insert(k.clone(), v.to_owned());
            }
        }
        Some(_) => return Err(fault(400, "Invalid input for field/attribute metadata.")),
    }
    Ok(metadata)
}

/// The source: an `available` snapshot, or an `available` or `in-use` volume.
fn source(state: &BlockState, fields: &Fields) -> Result<Option<Source>, Reply> {
    if let Some(snap) = &fields.snapshot_id {
        let Some(s) = state.snapshots.get(snap) else {
            return Err(fault(404, format!("Snapshot {snap} could not be found.")));
        };
        if s.status != "available" {
            return Err(fault(
                400,
                format!(
                    "Invalid snapshot: Originating snapshot status must be one of 'available' values (snapshot {snap} is {})",
                    s.status
                ),
            ));
        }
        Ok(Some(Source {
            file: disk::snapshot_file(state.root(), snap),
            size: s.size,
            type_id: state.volumes.get(&s.volume_id).map(|v| v.type_id.clone()),
        }))
    } else if let Some(src) = &fields.source_volid {
        let Some(v) = state.volumes.get(src) else {
            return Err(not_found(src));
        };
        if v.status != "available" && v.status != "in-use" {
            return Err(fault(
                400,
                format!(
                    "Invalid volume: Volume {src} status must be available or in-use, but current status is: {}",
                    v.status
                ),
            ));
        }
        Ok(Some(Source {
            file: disk::volume_file(state.root(), src),
            size: v.size,
            type_id: Some(v.type_id.clone()),
        }))
    } else {
        Ok(None)
    }
}

/// The size asked for (a source's when none is), at least 1 GiB and the source's size.
fn size(body: &Map<String, Value>, source: Option<&Source>) -> Result<u64, Reply> {
    let source_size = source.map_or(0, |s| s.size);
    let size = match body.get("size") {
        None | Some(Value::Null) if source.is_some() => source_size,
        Some(v) => match v
            .as_u64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        {
            Some(n) if n >= 1 => n,
            _ => {
                return Err(fault(
                    400,
                    format!(
                        "Invalid input received: Volume size '{v}' must be an integer and greater than 0"
                    ),
                ));
            }
        },
        None => {
            return Err(fault(
                400,
                "Invalid input received: Volume size must be given",
            ));
        }
    };
    if size < source_size {
        return Err(fault(
            400,
            format!(
                "Invalid input received: Volume size '{size}'GB cannot be smaller than the source size {source_size}GB."
            ),
        ));
    }
    Ok(size)
}

/// The type named, else the source's, else the default; a multiattach type needs 3.50.
fn volume_type(
    state: &BlockState,
    ctx: &Ctx<'_>,
    fields: &Fields,
    source: Option<&Source>,
) -> Result<VolumeType, Reply> {
    let source_type = source.and_then(|s| s.type_id.as_deref());
    let vtype = match fields.type_name.as_deref().or(source_type) {
        Some(t) => state.volume_type(t),
        None => ctx
            .config
            .cinder
            .default_volume_type
            .as_deref()
            .and_then(|d| state.volume_type(d)),
    };
    let Some(vtype) = vtype.cloned() else {
        return Err(fault(
            404,
            format!(
                "Volume type {} could not be found.",
                fields.type_name.as_deref().unwrap_or_default()
            ),
        ));
    };
    if vtype.multiattach() && !ctx.at_least(50) {
        return Err(fault(
            400,
            "Multiattach volume types are supported from microversion 3.50.",
        ));
    }
    Ok(vtype)
}

/// The zone asked for, which must be one of Cinder's; else the first.
fn zone(ctx: &Ctx<'_>, zone: Option<String>) -> Result<String, Reply> {
    let zones = &ctx.config.cinder.availability_zones;
    match zone {
        Some(z) if !zones.contains(&z) => Err(fault(
            400,
            format!("Invalid input received: Availability zone '{z}' is invalid."),
        )),
        Some(z) => Ok(z),
        None => Ok(zones.first().cloned().unwrap_or_else(|| "nova".into())),
    }
}

/// The project's volume count and gigabytes quotas (413 beyond them).
fn check_quotas(state: &BlockState, ctx: &Ctx<'_>, size: u64) -> Result<(), Reply> {
    let quotas = &ctx.config.cinder.quotas;
    if state.volumes.len() as u64 >= quotas.volumes {
        return Err(fault(
            413,
            format!(
                "VolumeLimitExceeded: Maximum number of volumes allowed ({}) exceeded for quota 'volumes'.",
                quotas.volumes
            ),
        ));
    }
    if state.gigabytes_used() + size > quotas.gigabytes {
        return Err(fault(
            413,
            format!(
                "VolumeSizeExceedsAvailableQuota: Requested volume or snapshot exceeds allowed gigabytes quota. Requested {size}G, quota is {}G.",
                quotas.gigabytes
            ),
        ));
    }
    Ok(())
}

/// Makes the volume: a sparse file of its size, or (from a source) the copy the router runs
/// once the state lock is released, the volume staying `creating` until it is done.
fn insert(
    state: &mut BlockState,
    ctx: &Ctx<'_>,
    new: NewVolume,
    injected: AsyncFault,
) -> Result<Reply, Reply> {
    let id = new_id();
    let file = disk::volume_file(state.root(), &id);
    if new.source.is_none()
        && let Err(e) = disk::allocate(&file, new.size)
    {
        return Err(fault(
            500,
            format!("The backend could not make the volume: {e}"),
        ));
    }
    let due = due_after(ctx.now, ctx.config.cinder.delays.volume_create_ms);
    let (pending, stuck) = plan(
        due,
        injected,
        VolumeOutcome::Settle {
            status: "available".into(),
            size: new.size,
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
    let seq = state.next_seq();
    let mut volume = Volume {
        id: id.clone(),
        seq,
        name: new.fields.name,
        description: new.fields.description,
        size: new.size,
        type_id: new.vtype.id.clone(),
        type_name: new.vtype.name.clone(),
        availability_zone: new.zone,
        snapshot_id: new.fields.snapshot_id,
        source_volid: new.fields.source_volid,
        metadata: new.metadata,
        scheduler_hints: new.scheduler_hints,
        multiattach: new.vtype.multiattach(),
        status: "creating".into(),
        created_at: Utc::now(),
        updated_at: None,
        pending: None,
        attachments: Vec::new(),
    };
    let reply = Reply::json(202, json!({"volume": view(ctx, &volume)}));
    match new.source {
        Some(source) => {
            let copy = Copy {
                from: source.file,
                to: file,
            };
            let target = CopyTarget::Volume {
                id: id.clone(),
                plan: (pending, stuck),
            };
            state.copies.push((copy, target));
        }
        None => {
            volume.pending = pending;
            if let Some(s) = stuck {
                volume.status = s;
            }
        }
    }
    state.volumes.insert(id, volume);
    Ok(reply)
}
