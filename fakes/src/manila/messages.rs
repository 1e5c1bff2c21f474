//! User messages (`/messages`, ≥ 2.37): one per failure the fake produced.

use chrono::Duration;
use serde_json::{Value, json};

use super::model::UserMessage;
use super::{Ctx, ManilaState};
use crate::faults::Operation;
use crate::lifecycle::api_time;
use crate::reply::{Reply, not_found};

fn view(ctx: &Ctx<'_>, m: &UserMessage) -> Value {
    json!({
        "id": m.id,
        "project_id": ctx.config.account.project_id,
        "resource_type": m.resource_type,
        "resource_id": m.resource_id,
        "action_id": m.action_id,
        "detail_id": m.detail_id,
        "message_level": "ERROR",
        "user_message": m.user_message,
        "request_id": m.request_id,
        "created_at": api_time(&m.created_at),
        "expires_at": api_time(&(m.created_at + Duration::days(30))),
        "links": ctx.links("messages", &m.id),
    })
}

/// `GET /messages` with filters `resource_id`, `resource_type`, `action_id`, `detail_id`,
/// `message_level`, `request_id`; newest first unless `sort_dir=asc`; `limit`.
pub(crate) fn list(state: &mut ManilaState, ctx: &mut Ctx<'_>) -> Reply {
    if let Err(r) = ctx.fault(Operation::Messages, &[]) {
        return r;
    }
    let matches = |m: &&UserMessage| {
        [
            ("resource_id", m.resource_id.as_str()),
            ("resource_type", m.resource_type),
            ("action_id", m.action_id),
            ("detail_id", m.detail_id.as_str()),
            ("message_level", "ERROR"),
            ("request_id", m.request_id.as_str()),
        ]
        .iter()
        .all(|(k, v)| ctx.query(k).is_none_or(|want| want == *v))
    };
    let mut items: Vec<&UserMessage> = state.messages.iter().filter(matches).collect();
    if ctx.query("sort_dir") != Some("asc") {
        items.reverse();
    }
    let limit = ctx
        .query("limit")
        .and_then(|l| l.parse().ok())
        .unwrap_or(usize::MAX);
    let items: Vec<Value> = items
        .into_iter()
        .take(limit)
        .map(|m| view(ctx, m))
        .collect();
    Reply::json(200, json!({"messages": items}))
}

/// `GET /messages/{id}`.
pub(crate) fn show(state: &mut ManilaState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    if let Err(r) = ctx.fault(Operation::Messages, &[id.to_owned()]) {
        return r;
    }
    match state.messages.iter().find(|m| m.id == id) {
        Some(m) => Reply::json(200, json!({"message": view(ctx, m)})),
        None => not_found(format!("Message {id} could not be found.")),
    }
}

/// `DELETE /messages/{id}`.
pub(crate) fn delete(state: &mut ManilaState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    if let Err(r) = ctx.fault(Operation::Messages, &[id.to_owned()]) {
        return r;
    }
    let before = state.messages.len();
    state.messages.retain(|m| m.id != id);
    if state.messages.len() == before {
        return not_found(format!("Message {id} could not be found."));
    }
    Reply::empty(204)
}
