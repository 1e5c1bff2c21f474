//! Share networks: list, detail, show, create, delete (refused while shares use them).

use chrono::Utc;
use serde_json::{Value, json};

use super::model::ShareNetwork;
use super::{Ctx, ManilaState};
use crate::faults::Operation;
use crate::lifecycle::{api_time, new_id};
use crate::reply::{Reply, fault, not_found};

fn view(ctx: &Ctx<'_>, n: &ShareNetwork) -> Value {
    let mut v = json!({
        "id": n.id,
        "name": n.name,
        "description": n.description,
        "project_id": ctx.config.account.project_id,
        "created_at": api_time(&n.created_at),
        "updated_at": null,
    });
    if ctx.at_least(51) {
        v["share_network_subnets"] = json!([]);
    } else {
        for key in [
            "neutron_net_id",
            "neutron_subnet_id",
            "network_type",
            "segmentation_id",
            "cidr",
            "ip_version",
        ] {
            v[key] = Value::Null;
        }
    }
    v
}

/// `GET /share-networks[/detail]`.
pub(crate) fn list(state: &mut ManilaState, ctx: &mut Ctx<'_>, detail: bool) -> Reply {
    if let Err(r) = ctx.fault(Operation::ShareNetworks, &[]) {
        return r;
    }
    let items: Vec<Value> = state
        .share_networks
        .iter()
        .filter(|n| {
            ctx.query("name")
                .is_none_or(|x| n.name.as_deref() == Some(x))
        })
        .map(|n| {
            if detail {
                view(ctx, n)
            } else {
                json!({"id": n.id, "name": n.name})
            }
        })
        .collect();
    Reply::json(200, json!({"share_networks": items}))
}

/// `GET /share-networks/{id}`.
pub(crate) fn show(state: &mut ManilaState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    if let Err(r) = ctx.fault(Operation::ShareNetworks, &[id.to_owned()]) {
        return r;
    }
    match state.share_networks.iter().find(|n| n.id == id) {
        Some(n) => Reply::json(200, json!({"share_network": view(ctx, n)})),
        None => not_found(format!("Share network {id} could not be found.")),
    }
}

/// `POST /share-networks`.
pub(crate) fn create(state: &mut ManilaState, ctx: &mut Ctx<'_>) -> Reply {
    let body = match ctx.body_object("share_network") {
        Ok(b) => b,
        Err(r) => return r,
    };
    if let Err(r) = ctx.fault(Operation::ShareNetworks, &[]) {
        return r;
    }
    let limit = ctx.config.manila.quotas.share_networks;
    if state.share_networks.len() as u64 >= limit {
        return fault(
            413,
            format!("Maximum number of share-networks allowed ({limit}) exceeded."),
        );
    }
    let text = |k: &str| body.get(k).and_then(Value::as_str).map(str::to_owned);
    let network = ShareNetwork {
        id: new_id(),
        name: text("name"),
        description: text("description"),
        created_at: Utc::now(),
    };
    let v = view(ctx, &network);
    state.share_networks.push(network);
    Reply::json(200, json!({"share_network": v}))
}

/// `DELETE /share-networks/{id}`.
pub(crate) fn delete(state: &mut ManilaState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    if let Err(r) = ctx.fault(Operation::ShareNetworks, &[id.to_owned()]) {
        return r;
    }
    if !state.share_networks.iter().any(|n| n.id == id) {
        return not_found(format!("Share network {id} could not be found."));
    }
    let users = state
        .shares
        .values()
        .filter(|s| s.share_network_id.as_deref() == Some(id))
        .count();
    if users > 0 {
        return fault(
            409,
            format!("Share network {id} is still used by {users} share(s)."),
        );
    }
    state.share_networks.retain(|n| n.id != id);
    Reply::empty(202)
}
