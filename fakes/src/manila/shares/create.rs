//! `POST /shares`, one step per thing Manila's API checks, in its order (the first refusal
//! wins): the basic fields, the source snapshot, the share type, the share group, the zone
//! and the type's limits, the share network, the metadata, the quotas, the injected fault;
//! then the new share is made ([`insert`]).

use std::collections::BTreeMap;

use chrono::Utc;
use serde_json::{Map, Value, json};

use super::view;
use crate::config::MAX_SHARE_SIZE_GIB;
use crate::faults::Operation;
use crate::lifecycle::{AsyncFault, new_id};
use crate::manila::input::{optional_string, parse_size, string_map};
use crate::manila::model::{
    ExportLocation, Failure, MessageAction, Share, ShareOutcome, ShareType,
};
use crate::manila::share_groups::{GroupForShare, group_for_share};
use crate::manila::{CopyTarget, Ctx, ManilaState, pending_outcome};
use crate::reply::{Reply, bad_request, fault, not_found};

/// The protocols this cloud's `enabled_share_protocols` names (a CSI deployment's NFS and
/// CephFS); Manila refuses every other one, known or not, with a 400 naming it.
const PROTOCOLS: [&str; 2] = ["NFS", "CEPHFS"];

/// `POST /shares`.
pub(crate) fn create(state: &mut ManilaState, ctx: &mut Ctx<'_>) -> Reply {
    let body = match ctx.body_object("share") {
        Ok(b) => b,
        Err(r) => return r,
    };
    match create_checked(state, ctx, &body) {
        Ok(reply) | Err(reply) => reply,
    }
}

/// A share create that passed every check.
struct NewShare {
    name: Option<String>,
    description: Option<String>,
    size: u64,
    /// Upper case (`NFS`, `CEPHFS`).
    proto: String,
    snapshot_id: Option<String>,
    share_type: ShareType,
    share_group_id: Option<String>,
    zone: String,
    network: Option<String>,
    metadata: BTreeMap<String, String>,
    is_public: bool,
}

fn create_checked(
    state: &mut ManilaState,
    ctx: &mut Ctx<'_>,
    body: &Map<String, Value>,
) -> Result<Reply, Reply> {
    let (name, description, size, proto) = basics(body)?;
    let snapshot_id = optional_string(body, "snapshot_id")?;
    let source = match &snapshot_id {
        None => None,
        Some(id) => Some(source(state, id, size)?),
    };
    let share_type = share_type(state, body, source.as_ref(), snapshot_id.as_deref())?;
    let (share_group_id, group) = share_group(state, ctx, body, &share_type)?;
    let zone = zone(ctx, body, group.as_ref(), source.as_ref())?;
    check_type_limits(&share_type, size, &zone)?;
    let network = share_network(state, body, group.as_ref(), &share_type)?;
    // Manila accepts a share network with a DHSS=False type and the share then fails in the
    // share manager (user message 003, UNEXPECTED_NETWORK).
    let unexpected_network = network.is_some() && !share_type.dhss;
    let metadata = metadata(state, ctx, body, &proto)?;
    let is_public = body
        .get("is_public")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    check_quotas(state, ctx, size)?;
    let keys: Vec<String> = name.iter().cloned().collect();
    let mut injected = ctx.fault(Operation::ShareCreate, &keys)?;
    if unexpected_network && !matches!(injected, AsyncFault::Stuck(_)) {
        injected = AsyncFault::Error {
            detail_id: "003".into(),
            message: None,
        };
    }
    let share = NewShare {
        name,
        description,
        size,
        proto,
        snapshot_id,
        share_type,
        share_group_id,
        zone,
        network,
        metadata,
        is_public,
    };
    insert(state, ctx, share, injected)
}

/// Name, description, size and protocol (upper case, one of [`PROTOCOLS`]).
fn basics(
    body: &Map<String, Value>,
) -> Result<(Option<String>, Option<String>, u64, String), Reply> {
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
    Ok((name, description, size, proto_upper))
}

/// What a share made from a snapshot inherits from the snapshot's parent share.
struct Source {
    parent_type: Option<String>,
    parent_zone: Option<String>,
}

/// Snapshot `id`, which must be `available` and no larger than the new share.
fn source(state: &ManilaState, id: &str, size: u64) -> Result<Source, Reply> {
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
    Ok(Source {
        parent_type: parent.map(|p| p.share_type_id.clone()),
        parent_zone: parent.map(|p| p.availability_zone.clone()),
    })
}

/// The type named (`share_type`, or the legacy `volume_type`), else the parent share's, else
/// the default; from a snapshot it must be the parent's and allow it.
fn share_type(
    state: &ManilaState,
    body: &Map<String, Value>,
    source: Option<&Source>,
    snapshot_id: Option<&str>,
) -> Result<ShareType, Reply> {
    let type_ref = optional_string(body, "share_type")?
        .or_else(|| optional_string(body, "volume_type").ok().flatten());
    let parent_type = source.and_then(|s| s.parent_type.as_ref());
    let share_type = match (&type_ref, parent_type) {
        (Some(t), _) => state.share_type(t).cloned().ok_or_else(|| {
            if uuid::Uuid::parse_str(t).is_ok() {
                not_found(format!("Share type {t} could not be found."))
            } else {
                not_found(format!("Share type with name {t} could not be found."))
            }
        })?,
        (None, Some(parent_type)) => state
            .share_type(parent_type)
            .cloned()
            .ok_or_else(|| not_found(format!("Share type {parent_type} could not be found.")))?,
        _ => state.default_share_type().cloned().ok_or_else(|| {
            bad_request("Invalid share type: no share type was given and no default share type is configured.")
        })?,
    };
    if let (Some(parent_type), Some(_)) = (parent_type, &type_ref)
        && parent_type != &share_type.id
    {
        return Err(bad_request(format!(
            "Invalid input received: Share type {} of the new share must be the same as the type {parent_type} of snapshot {}'s parent share.",
            share_type.id,
            snapshot_id.unwrap_or_default()
        )));
    }
    if source.is_some() && !share_type.create_share_from_snapshot_support {
        return Err(bad_request(format!(
            "A new share may not be created from snapshot {} because the share type {} does not support it.",
            snapshot_id.unwrap_or_default(),
            share_type.name
        )));
    }
    Ok(share_type)
}

/// The share group (2.31): it must exist, be `available` and allow the share's type; the
/// share lands in the group's zone and on its share network.
fn share_group(
    state: &mut ManilaState,
    ctx: &Ctx<'_>,
    body: &Map<String, Value>,
    share_type: &ShareType,
) -> Result<(Option<String>, Option<GroupForShare>), Reply> {
    let share_group_id = if ctx.at_least(31) {
        optional_string(body, "share_group_id")?
    } else {
        None
    };
    let Some(id) = &share_group_id else {
        return Ok((None, None));
    };
    let group = group_for_share(state, id)
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
    Ok((share_group_id, Some(group)))
}

/// The zone asked for (the group's when it has one; from a snapshot the parent's), which
/// must exist; else the parent's, else the first.
fn zone(
    ctx: &Ctx<'_>,
    body: &Map<String, Value>,
    group: Option<&GroupForShare>,
    source: Option<&Source>,
) -> Result<String, Reply> {
    let requested_zone = optional_string(body, "availability_zone")?;
    let requested_zone = match (
        requested_zone,
        group.and_then(|g| g.availability_zone.clone()),
    ) {
        (Some(z), Some(gz)) if z != gz => {
            return Err(bad_request(format!(
                "Invalid input received: Share cannot have AZ ('{z}') different than share group's one ('{gz}')."
            )));
        }
        (z, gz) => z.or(gz),
    };
    let zones = &ctx.config.manila.availability_zones;
    let parent_zone = source.and_then(|s| s.parent_zone.as_ref());
    if let (Some(z), Some(parent_zone)) = (&requested_zone, parent_zone)
        && z != parent_zone
    {
        return Err(bad_request(format!(
            "Invalid input received: The specified availability zone {z} must be the same as the parent share's ({parent_zone}) when use_scheduler_creating_share_from_snapshot is False."
        )));
    }
    match requested_zone {
        Some(z) if zones.contains(&z) => Ok(z),
        Some(z) => Err(not_found(format!(
            "Availability zone {z} could not be found."
        ))),
        None => Ok(parent_zone
            .cloned()
            .or_else(|| zones.first().cloned())
            .unwrap_or_else(|| "nova".into())),
    }
}

/// The type's `provisioning:min_share_size` / `provisioning:max_share_size` and
/// `availability_zones` extra specs, as Manila's API enforces them.
fn check_type_limits(share_type: &ShareType, size: u64, zone: &str) -> Result<(), Reply> {
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

/// The share network asked for (the group's when it has one), which must exist; a DHSS=True
/// type needs one.
fn share_network(
    state: &ManilaState,
    body: &Map<String, Value>,
    group: Option<&GroupForShare>,
    share_type: &ShareType,
) -> Result<Option<String>, Reply> {
    let network = optional_string(body, "share_network_id")?;
    let group_network = group.and_then(|g| g.share_network_id.clone());
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
    Ok(network)
}

/// The metadata asked for, with the keys Manila adds: the scheduler hints (2.65) and the
/// CephFS file system's mount option.
fn metadata(
    state: &ManilaState,
    ctx: &Ctx<'_>,
    body: &Map<String, Value>,
    proto: &str,
) -> Result<BTreeMap<String, String>, Reply> {
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
    if proto == "CEPHFS"
        && let Some(fs) = &ctx.config.manila.cephfs_filesystem_name
    {
        metadata.insert("__mount_options".into(), format!("fs={fs}"));
    }
    Ok(metadata)
}

/// The `scheduler_hints` of a share create (2.65): `same_host` and `different_host`, each a
/// comma list of existing share ids; the metadata key each is kept under, with its value.
fn scheduler_hints(
    state: &ManilaState,
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

/// The project's share count and gigabytes quotas (413 beyond them).
fn check_quotas(state: &ManilaState, ctx: &Ctx<'_>, size: u64) -> Result<(), Reply> {
    let quotas = &ctx.config.manila.quotas;
    let used = state.share_gigabytes();
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
    Ok(())
}

/// Makes the share: its directory (or, from a snapshot, the copy the router runs once the
/// state lock is released), its export locations, its pending outcome; answers its view.
fn insert(
    state: &mut ManilaState,
    ctx: &Ctx<'_>,
    new: NewShare,
    injected: AsyncFault,
) -> Result<Reply, Reply> {
    let id = new_id();
    let (dir, copy) = match new.snapshot_id.as_deref() {
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
    let export_locations = ctx
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
    let initial = if new.snapshot_id.is_some() {
        "creating_from_snapshot"
    } else {
        "creating"
    };
    let plan = pending_outcome(
        ctx,
        ctx.config.manila.delays.share_create_ms,
        injected,
        ShareOutcome::Available { size: new.size },
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
        None => plan,
        Some(copy) => {
            let target = CopyTarget::Share {
                id: id.clone(),
                plan,
            };
            state.copies.push((copy, target));
            (None, None)
        }
    };
    let share = Share {
        id: id.clone(),
        seq: state.next_seq(),
        name: new.name,
        description: new.description,
        size: new.size,
        share_proto: new.proto,
        share_type_id: new.share_type.id.clone(),
        share_type_name: new.share_type.name.clone(),
        availability_zone: new.zone,
        share_network_id: new.network,
        share_group_id: new.share_group_id,
        snapshot_id: new.snapshot_id,
        metadata: new.metadata,
        is_public: new.is_public,
        status: stuck_status.unwrap_or_else(|| initial.into()),
        snapshot_support: new.share_type.snapshot_support,
        create_share_from_snapshot_support: new.share_type.create_share_from_snapshot_support,
        instance_id: new_id(),
        created_at: Utc::now(),
        updated_at: None,
        pending,
        export_locations,
        access_rules: Vec::new(),
    };
    let body = json!({"share": view(ctx, &share)});
    state.shares.insert(id, share);
    Ok(Reply::json(200, body))
}
