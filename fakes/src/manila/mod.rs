//! Manila v2: version documents, microversions, authentication, and the routing of
//! `/share/v2/[<project_id>/]<resource>...` to the resource modules.

mod access;
mod admin_actions;
mod export_locations;
mod input;
mod messages;
mod metadata;
pub(crate) mod model;
mod networks;
mod quotas;
mod share_groups;
mod shares;
mod snapshots;
mod state;
mod types;
mod zones;

use serde_json::{Value, json};
use wiremock::Request;
use wiremock::http::Method;

use crate::catalog::MANILA_PREFIX as PREFIX;
use crate::config::CloudConfig;
use crate::faults::Operation;
use crate::lifecycle::{AsyncFault, Plan, due_after, plan};
use crate::microversion::{self, Microversion, VersionError};
use crate::reply::{Reply, bad_request, fault, not_found};
use crate::request::{self, Shared};
pub(crate) use state::{CopyTarget, ManilaState};

/// One Manila request being served.
pub(crate) type Ctx<'a> = request::Ctx<'a, Microversion>;

impl Ctx<'_> {
    /// Whether the request's microversion is at least 2.`minor`.
    pub(crate) fn at_least(&self, minor: u32) -> bool {
        self.version >= Microversion::v2(minor)
    }

    /// The object under `key` in the body, or Manila's 422 when absent (`is_valid_body`).
    pub(crate) fn body_object(&self, key: &str) -> Result<serde_json::Map<String, Value>, Reply> {
        match self.body()?.get(key) {
            Some(Value::Object(map)) => Ok(map.clone()),
            _ => Err(fault(422, "Unable to process the contained instructions")),
        }
    }

    /// Self link of a resource.
    pub(crate) fn links(&self, collection: &str, id: &str) -> Value {
        let base = self.base_url;
        json!([
            {"rel": "self", "href": format!("{base}{PREFIX}/v2/{collection}/{id}")},
            {"rel": "bookmark", "href": format!("{base}{PREFIX}/{collection}/{id}")},
        ])
    }
}

/// The 404 for an unknown share.
pub(crate) fn share_not_found(id: &str) -> Reply {
    not_found(format!("Share {id} could not be found."))
}

/// How an async operation with `delay_ms` and an injected `fault` ends.
pub(crate) fn pending_outcome<T>(
    ctx: &Ctx<'_>,
    delay_ms: u64,
    fault: AsyncFault,
    success: T,
    failure: impl FnOnce(String, Option<String>) -> T,
) -> Plan<T> {
    match due_after(ctx.now, delay_ms) {
        // A delay beyond what the clock can hold (set in process, unchecked): never due,
        // whatever the fault.
        None => (None, None),
        due => plan(due, fault, success, failure),
    }
}

fn max_version(config: &CloudConfig) -> Microversion {
    config.manila_max_microversion()
}

fn version_entries(config: &CloudConfig, base: &str, with_v1: bool) -> Value {
    let mut versions = Vec::new();
    if with_v1 {
        versions.push(json!({
            "id": "v1.0", "status": "DEPRECATED", "version": "", "min_version": "",
            "updated": "2015-08-27T11:33:21Z",
            "links": [{"rel": "self", "href": format!("{base}{PREFIX}/v1/")}],
            "media-types": [{"base": "application/json", "type": "application/vnd.openstack.share+json;version=1"}],
        }));
    }
    versions.push(json!({
        "id": "v2.0", "status": "CURRENT",
        "version": max_version(config).to_string(), "min_version": Microversion::MIN.to_string(),
        "updated": "2015-08-27T11:33:21Z",
        "links": [
            {"rel": "describedby", "type": "text/html", "href": "http://docs.openstack.org/"},
            {"rel": "self", "href": format!("{base}{PREFIX}/v2/")},
        ],
        "media-types": [{"base": "application/json", "type": "application/vnd.openstack.share+json;version=1"}],
    }));
    Value::Array(versions)
}

/// Handles a request under [`PREFIX`]; `rest` is the path after it.
pub(crate) fn handle(
    state: &mut ManilaState,
    mut shared: Shared<'_>,
    req: &Request,
    rest: &str,
) -> Reply {
    let config = shared.config;
    if !config.manila.present {
        return request::absent();
    }
    let trimmed = rest.trim_end_matches('/');
    if req.method == Method::GET && (trimmed.is_empty() || trimmed == "/v2") {
        if let Some(reply) = shared.version_fault(Operation::ManilaVersions) {
            return reply;
        }
        // The unversioned root lists all versions with 300 Multiple Choices.
        let (status, with_v1) = if trimmed.is_empty() {
            (300, true)
        } else {
            (200, false)
        };
        let versions = version_entries(config, shared.base_url, with_v1);
        return Reply::json(status, json!({ "versions": versions }));
    }
    let (segments, admin) = match shared.admit(req, trimmed, "/v2/") {
        Ok(admitted) => admitted,
        Err(reply) => return reply,
    };
    let max = max_version(config);
    let version = match microversion::requested(&req.headers, max) {
        Ok(v) => v,
        Err(VersionError::Malformed(raw)) => {
            return bad_request(format!(
                "API Version String {raw} is of invalid format. Must be of format MajorNum.MinorNum."
            ));
        }
        Err(VersionError::OutOfRange(v)) => {
            return fault(
                406,
                format!(
                    "Version {v} is not supported by the API. Minimum is {} and maximum is {max}.",
                    Microversion::MIN
                ),
            );
        }
    };
    let mut ctx = Ctx::new(req, version, admin, shared);
    state.advance(ctx.now);
    let mut reply = route(state, &mut ctx, &segments);
    reply.delay = ctx.latency;
    // Manila answers its own header and varies on it; the generic `OpenStack-API-Version`
    // is neither read nor sent.
    reply
        .header(microversion::MANILA_HEADER, version.to_string())
        .header("Vary", microversion::MANILA_HEADER)
}

fn route(state: &mut ManilaState, ctx: &mut Ctx<'_>, segments: &[&str]) -> Reply {
    let method = ctx.req.method.clone();
    let m = method.as_str();
    match segments {
        ["shares"] if m == "GET" => shares::list(state, ctx, false),
        ["shares"] if m == "POST" => shares::create(state, ctx),
        ["shares", "detail"] if m == "GET" => shares::list(state, ctx, true),
        ["shares", id] if m == "GET" => shares::show(state, ctx, id),
        ["shares", id] if m == "PUT" => shares::update(state, ctx, id),
        ["shares", id] if m == "DELETE" => shares::delete(state, ctx, id),
        ["shares", id, "action"] if m == "POST" => action(state, ctx, id),
        ["shares", id, "export_locations"] if m == "GET" && ctx.at_least(9) => {
            export_locations::show(state, ctx, id, None)
        }
        ["shares", id, "export_locations", el] if m == "GET" && ctx.at_least(9) => {
            export_locations::show(state, ctx, id, Some(el))
        }
        ["shares", id, "metadata"] => metadata::handle(state, ctx, id, None),
        ["shares", id, "metadata", key] => metadata::handle(state, ctx, id, Some(key)),
        ["share-access-rules"] if m == "GET" && ctx.at_least(45) => access::rules(state, ctx),
        ["share-access-rules", id] if m == "GET" && ctx.at_least(45) => {
            access::rule(state, ctx, id)
        }
        ["types"] if m == "GET" => types::list(state, ctx),
        ["types"] if m == "POST" => types::create(state, ctx),
        ["types", "default"] if m == "GET" => types::default(state, ctx),
        ["types", id] if m == "GET" => types::show(state, ctx, id),
        ["types", id] if m == "DELETE" => types::delete(state, ctx, id),
        ["types", id, "extra_specs"] if m == "GET" => types::extra_specs_of(state, ctx, id),
        ["snapshots"] if m == "GET" => snapshots::list(state, ctx, false),
        ["snapshots"] if m == "POST" => snapshots::create(state, ctx),
        ["snapshots", "detail"] if m == "GET" => snapshots::list(state, ctx, true),
        ["snapshots", id] if m == "GET" => snapshots::show(state, ctx, id),
        ["snapshots", id] if m == "PUT" => snapshots::update(state, ctx, id),
        ["snapshots", id] if m == "DELETE" => snapshots::delete(state, ctx, id),
        ["snapshots", id, "action"] if m == "POST" => snapshots::action(state, ctx, id),
        ["availability-zones"] if m == "GET" && ctx.at_least(7) => zones::list(ctx),
        ["os-availability-zone"] if m == "GET" && !ctx.at_least(7) => zones::list(ctx),
        ["share-networks"] if m == "GET" => networks::list(state, ctx, false),
        ["share-networks"] if m == "POST" => networks::create(state, ctx),
        ["share-networks", "detail"] if m == "GET" => networks::list(state, ctx, true),
        ["share-networks", id] if m == "GET" => networks::show(state, ctx, id),
        ["share-networks", id] if m == "DELETE" => networks::delete(state, ctx, id),
        ["quota-sets", project] if m == "GET" => quotas::show(state, ctx, project, false),
        ["quota-sets", project, "defaults"] if m == "GET" => {
            quotas::show(state, ctx, project, false)
        }
        ["quota-sets", project, "detail"] if m == "GET" && ctx.at_least(25) => {
            quotas::show(state, ctx, project, true)
        }
        ["share-group-types"] if m == "GET" && share_groups::api_enabled(ctx) => {
            share_groups::list_types(state, ctx)
        }
        ["share-group-types", id] if m == "GET" && share_groups::api_enabled(ctx) => {
            share_groups::show_type(state, ctx, id)
        }
        ["share-groups"] if m == "GET" && share_groups::api_enabled(ctx) => {
            share_groups::list(state, ctx, false)
        }
        ["share-groups"] if m == "POST" && share_groups::api_enabled(ctx) => {
            share_groups::create(state, ctx)
        }
        ["share-groups", "detail"] if m == "GET" && share_groups::api_enabled(ctx) => {
            share_groups::list(state, ctx, true)
        }
        ["share-groups", id] if m == "GET" && share_groups::api_enabled(ctx) => {
            share_groups::show(state, ctx, id)
        }
        ["share-groups", id] if m == "DELETE" && share_groups::api_enabled(ctx) => {
            share_groups::delete(state, ctx, id)
        }
        ["messages"] if m == "GET" && ctx.at_least(37) => messages::list(state, ctx),
        ["messages", id] if m == "GET" && ctx.at_least(37) => messages::show(state, ctx, id),
        ["messages", id] if m == "DELETE" && ctx.at_least(37) => messages::delete(state, ctx, id),
        _ => not_found("The resource could not be found."),
    }
}

/// The action named by an `/action` body (one key, `os-`-prefixed below 2.7), its
/// arguments and the key as sent.
pub(crate) fn action_name(ctx: &Ctx<'_>) -> Result<(String, Value, String), Reply> {
    let body = match ctx.body()? {
        Value::Object(map) if map.len() == 1 => map,
        _ => {
            return Err(bad_request(
                "There is no such action: the body must name exactly one action",
            ));
        }
    };
    let Some((key, args)) = body.into_iter().next() else {
        return Err(bad_request("There is no such action"));
    };
    let name = match (key.strip_prefix("os-"), ctx.at_least(7)) {
        (Some(name), false) => name.to_owned(),
        (None, true) => key.clone(),
        _ => return Err(bad_request(format!("There is no such action: {key}"))),
    };
    Ok((name, args, key))
}

/// `POST /shares/{id}/action`.
fn action(state: &mut ManilaState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    let (name, args, key) = match action_name(ctx) {
        Ok(parts) => parts,
        Err(reply) => return reply,
    };
    match name.as_str() {
        "extend" => shares::resize(state, ctx, id, &args, true),
        "shrink" => shares::resize(state, ctx, id, &args, false),
        "allow_access" => access::allow(state, ctx, id, &args),
        "deny_access" => access::deny(state, ctx, id, &args),
        "access_list" => access::list_action(state, ctx, id),
        "force_delete" => admin_actions::force_delete(state, ctx, id),
        "reset_status" => admin_actions::reset_status(state, ctx, id, &args),
        _ => bad_request(format!("There is no such action: {key}")),
    }
}
