//! `GET /shares` and `GET /shares/detail`: Manila's common filters, sorting and paging;
//! any other query parameter is refused (400), never silently ignored.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::view;
use crate::faults::Operation;
use crate::manila::input::{query_number, string_map};
use crate::manila::model::Share;
use crate::manila::{Ctx, ManilaState};
use crate::reply::{Reply, bad_request};

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

/// `GET /shares` and `GET /shares/detail` with Manila's common filters.
pub(crate) fn list(state: &mut ManilaState, ctx: &mut Ctx<'_>, detail: bool) -> Reply {
    match list_checked(state, ctx, detail) {
        Ok(reply) | Err(reply) => reply,
    }
}

fn list_checked(state: &ManilaState, ctx: &mut Ctx<'_>, detail: bool) -> Result<Reply, Reply> {
    ctx.fault(Operation::ShareList, &[])?;
    if let Some((key, _)) = ctx
        .query
        .iter()
        .find(|(k, _)| !LIST_PARAMS.contains(&k.as_str()))
    {
        return Err(bad_request(format!(
            "Invalid filter {key:?}: the shares list does not support it."
        )));
    }
    let query = ListQuery::parse(ctx)?;
    let mut shares = matching(state, ctx, &query);
    sort(&mut shares, &query);
    let count = shares.len();
    let items: Vec<Value> = shares
        .into_iter()
        .skip(query.offset)
        .take(query.limit)
        .map(|s| {
            if detail {
                view(ctx, s)
            } else {
                json!({"id": s.id, "name": s.name, "links": ctx.links("shares", &s.id)})
            }
        })
        .collect();
    let mut body = json!({"shares": items});
    if query.with_count {
        body["count"] = json!(count);
    }
    Ok(Reply::json(200, body))
}

/// The list's query, once checked (the text filters are read as they are matched).
struct ListQuery<'q> {
    metadata: Option<BTreeMap<String, String>>,
    offset: usize,
    limit: usize,
    descending: bool,
    sort_key: &'q str,
    soft_deleted: bool,
    with_count: bool,
}

impl<'q> ListQuery<'q> {
    /// Reads the paging, sorting and boolean parameters; 400 for a malformed one.
    fn parse(ctx: &'q Ctx<'_>) -> Result<Self, Reply> {
        let metadata = ctx.query("metadata").map(metadata_filter).transpose()?;
        let offset = query_number(ctx.query("offset"), "offset")?.unwrap_or(0);
        let limit = query_number(ctx.query("limit"), "limit")?.unwrap_or(usize::MAX);
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
        Ok(Self {
            metadata,
            offset,
            limit,
            descending,
            sort_key,
            soft_deleted,
            with_count,
        })
    }
}

/// The shares the filters keep, in no particular order.
fn matching<'s>(state: &'s ManilaState, ctx: &Ctx<'_>, query: &ListQuery<'_>) -> Vec<&'s Share> {
    let (metadata, soft_deleted) = (&query.metadata, query.soft_deleted);
    let project = ctx.config.account.project_id.clone();
    let text_has = |value: &Option<String>, key: &str| {
        ctx.query(key)
            .is_none_or(|n| value.as_deref().is_some_and(|v| v.contains(n)))
    };
    state
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
        .collect()
}

/// Creation order first (the seq breaks ties), then the requested key and direction.
fn sort(shares: &mut [&Share], query: &ListQuery<'_>) {
    let (sort_key, descending) = (query.sort_key, query.descending);
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
}
