//! Cinder v3 (block storage) under `/volume`, and the data plane behind it: volumes are
//! sparse files that Nova (`crate::nova`) attaches to servers as loop devices.
//!
//! Microversions are read from `OpenStack-API-Version: volume 3.N` as Cinder reads it
//! ([`crate::microversion::cinder_requested`]: absent 3.0, `latest` the maximum, out of
//! range 406) and answered in the same header (`volume 3.N`, whatever the service word
//! asked); the maximum is the release's unless the seed sets `cinder.max_microversion`. What the Cinder CSI
//! driver relies on appears at the microversion it did upstream: the attachments API at
//! 3.27, extending in-use volumes at 3.42, multiattach volume types at 3.50.

pub(crate) mod disk;
pub(crate) mod model;
mod resources;
pub mod seed;
mod state;
mod volumes;

use serde_json::{Value, json};
use wiremock::Request;
use wiremock::http::Method;

use crate::config::CloudConfig;
use crate::faults::Operation;
use crate::microversion::{CINDER_MIN, cinder_requested};
use crate::reply::{Reply, fault};
use crate::request::{self, Shared};
pub use state::{BlockLeftover, BlockLeftovers, LoopLeftover, VolumeView};
pub(crate) use state::{BlockState, CopyTarget};

pub use crate::catalog::CINDER_PREFIX as PREFIX;
pub use crate::microversion::GENERIC_HEADER as VERSION_HEADER;
/// The lowest microversion.
pub const MIN_VERSION: (u32, u32) = (CINDER_MIN.major, CINDER_MIN.minor);

fn max_version(config: &CloudConfig) -> (u32, u32) {
    let max = config.cinder_max_microversion();
    (max.major, max.minor)
}

/// One Cinder (or Nova) request being served; the version is the one asked of the service
/// (Cinder's `3.N`, Nova's `2.N`).
pub(crate) type Ctx<'a> = request::Ctx<'a, (u32, u32)>;

impl Ctx<'_> {
    /// Whether the microversion is at least 3.`minor`.
    pub(crate) fn at_least(&self, minor: u32) -> bool {
        self.version >= (3, minor)
    }

    /// The object under `key` in the JSON body, or 400.
    pub(crate) fn body_object(&self, key: &str) -> Result<serde_json::Map<String, Value>, Reply> {
        match self.body()?.get(key) {
            Some(Value::Object(map)) => Ok(map.clone()),
            _ => Err(fault(
                400,
                format!("Missing required element '{key}' in request body."),
            )),
        }
    }

    pub(crate) fn links(&self, collection: &str, id: &str) -> Value {
        let base = self.base_url;
        let project = self.project_id();
        json!([
            {"rel": "self", "href": format!("{base}{PREFIX}/v3/{project}/{collection}/{id}")},
            {"rel": "bookmark", "href": format!("{base}{PREFIX}/{project}/{collection}/{id}")},
        ])
    }
}

fn versions(config: &CloudConfig, base_url: &str) -> Value {
    let (major, minor) = max_version(config);
    json!([{
        "id": "v3.0", "status": "CURRENT",
        "version": format!("{major}.{minor}"), "min_version": "3.0",
        "updated": "2022-08-31T00:00:00Z",
        "links": [
            {"rel": "describedby", "type": "text/html", "href": "https://docs.openstack.org/"},
            {"rel": "self", "href": format!("{base_url}{PREFIX}/v3/")},
        ],
        "media-types": [{"base": "application/json", "type": "application/vnd.openstack.volume+json;version=3"}],
    }])
}

/// Handles a request under [`PREFIX`]; `rest` is the path after it.
pub(crate) fn handle(
    state: &mut BlockState,
    mut shared: Shared<'_>,
    req: &Request,
    rest: &str,
) -> Reply {
    let config = shared.config;
    if !config.cinder.present {
        return request::absent();
    }
    let trimmed = rest.trim_end_matches('/');
    if req.method == Method::GET && (trimmed.is_empty() || trimmed == "/v3") {
        if let Some(reply) = shared.version_fault(Operation::CinderVersions) {
            return reply;
        }
        let status = if trimmed.is_empty() { 300 } else { 200 };
        let versions = versions(config, shared.base_url);
        return Reply::json(status, json!({ "versions": versions }));
    }
    let (segments, admin) = match shared.admit(req, trimmed, "/v3/") {
        Ok(admitted) => admitted,
        Err(reply) => return reply,
    };
    let version = match cinder_requested(&req.headers, config.cinder_max_microversion()) {
        Ok(v) => (v.major, v.minor),
        Err(refusal) => return fault(refusal.status(), refusal.to_string()),
    };
    let mut ctx = Ctx::new(req, version, admin, shared);
    state.advance(ctx.now);
    let mut reply = route(state, &mut ctx, &segments);
    reply.delay = ctx.latency;
    reply
        .header(
            VERSION_HEADER,
            format!("volume {}.{}", version.0, version.1),
        )
        .header("Vary", VERSION_HEADER)
}

fn route(state: &mut BlockState, ctx: &mut Ctx<'_>, segments: &[&str]) -> Reply {
    let method = ctx.req.method.clone();
    let m = method.as_str();
    match segments {
        ["volumes"] if m == "GET" => volumes::list(state, ctx, false),
        ["volumes"] if m == "POST" => volumes::create(state, ctx),
        ["volumes", "detail"] if m == "GET" => volumes::list(state, ctx, true),
        ["volumes", id] if m == "GET" => volumes::show(state, ctx, id),
        ["volumes", id] if m == "DELETE" => volumes::delete(state, ctx, id),
        ["volumes", id, "action"] if m == "POST" => volumes::action(state, ctx, id),
        ["snapshots"] if m == "GET" => resources::list_snapshots(state, ctx, false),
        ["snapshots"] if m == "POST" => resources::create_snapshot(state, ctx),
        ["snapshots", "detail"] if m == "GET" => resources::list_snapshots(state, ctx, true),
        ["snapshots", id] if m == "GET" => resources::show_snapshot(state, ctx, id),
        ["snapshots", id] if m == "DELETE" => resources::delete_snapshot(state, ctx, id),
        ["types"] if m == "GET" => resources::list_types(state, ctx),
        ["types", "default"] if m == "GET" && ctx.at_least(62) => {
            resources::default_type(state, ctx)
        }
        ["types", id] if m == "GET" => resources::show_type(state, ctx, id),
        ["types", id, "extra_specs"] if m == "GET" => resources::extra_specs(state, ctx, id),
        ["os-availability-zone"] if m == "GET" => resources::zones(ctx),
        ["os-quota-sets", _project] if m == "GET" => resources::quotas(state, ctx),
        ["limits"] if m == "GET" => resources::limits(state, ctx),
        ["messages"] if m == "GET" && ctx.at_least(3) => resources::list_messages(state, ctx),
        ["messages", id] if m == "GET" && ctx.at_least(3) => {
            resources::show_message(state, ctx, id)
        }
        ["messages", id] if m == "DELETE" && ctx.at_least(3) => {
            resources::delete_message(state, ctx, id)
        }
        ["attachments"] if m == "GET" && ctx.at_least(27) => {
            resources::list_attachments(state, ctx, false)
        }
        ["attachments", "detail"] if m == "GET" && ctx.at_least(27) => {
            resources::list_attachments(state, ctx, true)
        }
        ["attachments", id] if m == "GET" && ctx.at_least(27) => {
            resources::show_attachment(state, ctx, id)
        }
        _ => fault(404, "The resource could not be found."),
    }
}
