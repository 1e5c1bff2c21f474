//! Quota sets of the project (limits from the seed, usage from the current resources).

use serde_json::{Value, json};

use super::{Ctx, ManilaState};
use crate::faults::Operation;
use crate::reply::Reply;

/// `GET /quota-sets/{project}[/defaults|/detail]`.
pub(crate) fn show(
    state: &mut ManilaState,
    ctx: &mut Ctx<'_>,
    project: &str,
    detail: bool,
) -> Reply {
    if let Err(r) = ctx.fault(Operation::Quotas, &[project.to_owned()]) {
        return r;
    }
    let q = &ctx.config.manila.quotas;
    let in_use = [
        ("shares", q.shares, state.shares.len() as u64),
        ("gigabytes", q.gigabytes, state.share_gigabytes()),
        ("snapshots", q.snapshots, state.snapshots.len() as u64),
        (
            "snapshot_gigabytes",
            q.snapshot_gigabytes,
            state.snapshot_gigabytes(),
        ),
        (
            "share_networks",
            q.share_networks,
            state.share_networks.len() as u64,
        ),
    ];
    let mut set = serde_json::Map::new();
    set.insert("id".into(), json!(project));
    for (key, limit, used) in in_use {
        let value = if detail {
            json!({"limit": limit, "in_use": used, "reserved": 0})
        } else {
            json!(limit)
        };
        set.insert(key.into(), value);
    }
    let unlimited = |set: &mut serde_json::Map<String, Value>, key: &str| {
        let value = if detail {
            json!({"limit": -1, "in_use": 0, "reserved": 0})
        } else {
            json!(-1)
        };
        set.insert(key.into(), value);
    };
    if ctx.at_least(40) {
        unlimited(&mut set, "share_groups");
        unlimited(&mut set, "share_group_snapshots");
    }
    if ctx.at_least(53) {
        unlimited(&mut set, "share_replicas");
        unlimited(&mut set, "replica_gigabytes");
    }
    if ctx.at_least(62) {
        unlimited(&mut set, "per_share_gigabytes");
    }
    if ctx.at_least(80) {
        unlimited(&mut set, "backups");
        unlimited(&mut set, "backup_gigabytes");
    }
    Reply::json(200, json!({"quota_set": set}))
}
