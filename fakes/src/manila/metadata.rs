//! Share metadata: `/shares/{id}/metadata[/{key}]` GET, POST (merge), PUT (replace or one
//! item), DELETE (one item).

use serde_json::json;

use super::input::string_map;
use super::model::Share;
use super::{Ctx, ManilaState, share_not_found};
use crate::faults::Operation;
use crate::reply::{Reply, bad_request, fault, not_found};

/// `/shares/{id}/metadata[/{key}]`: GET, POST (merge), PUT (replace), DELETE (one key).
pub(crate) fn handle(
    state: &mut ManilaState,
    ctx: &mut Ctx<'_>,
    id: &str,
    key: Option<&str>,
) -> Reply {
    let keys = state.shares.get(id).map(Share::keys).unwrap_or_default();
    if let Err(r) = ctx.fault(Operation::ShareMetadata, &keys) {
        return r;
    }
    let method = ctx.req.method.as_str().to_owned();
    let body = if method == "POST" || method == "PUT" {
        match ctx.body() {
            Ok(b) => Some(b),
            Err(r) => return r,
        }
    } else {
        None
    };
    let Some(share) = state.shares.get_mut(id) else {
        return share_not_found(id);
    };
    match (method.as_str(), key) {
        ("GET", None) => Reply::json(200, json!({"metadata": share.metadata})),
        ("GET", Some(k)) => match share.metadata.get(k) {
            Some(v) => Reply::json(200, json!({"meta": {k: v}})),
            None => not_found(format!("Metadata item {k} was not found.")),
        },
        ("POST" | "PUT", None) => {
            let new = match string_map(body.as_ref().and_then(|b| b.get("metadata")), "metadata") {
                Ok(m) => m,
                Err(r) => return r,
            };
            if method == "PUT" {
                share.metadata = new;
            } else {
                share.metadata.extend(new);
            }
            Reply::json(200, json!({"metadata": share.metadata}))
        }
        ("PUT", Some(k)) => {
            let item = match string_map(body.as_ref().and_then(|b| b.get("meta")), "meta") {
                Ok(m) => m,
                Err(r) => return r,
            };
            if item.len() != 1 || !item.contains_key(k) {
                return bad_request("Request body and URI mismatch");
            }
            share.metadata.extend(item.clone());
            Reply::json(200, json!({"meta": item}))
        }
        ("DELETE", Some(k)) => match share.metadata.remove(k) {
            Some(_) => Reply::empty(200),
            None => not_found(format!("Metadata item {k} was not found.")),
        },
        _ => fault(405, "The method is not allowed for this resource."),
    }
}
