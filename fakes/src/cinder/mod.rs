//! Cinder v3 (block storage) under `/volume`, and the data plane behind it: volumes are
//! sparse files that Nova ([`crate::nova`]) attaches to servers as loop devices.
//!
//! Microversions are read from `OpenStack-API-Version: volume 3.N` (absent: 3.0; `latest`:
//! the maximum; out of range: 406) and answered in the same header. What the Cinder CSI
//! driver relies on appears at the microversion it did upstream: the attachments API at
//! 3.27, extending in-use volumes at 3.42, multiattach volume types at 3.50.

pub(crate) mod disk;
pub(crate) mod model;
mod resources;
pub mod seed;
mod volumes;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use wiremock::Request;
use wiremock::http::Method;

use crate::faults::{FaultAction, Operation};
use crate::keystone;
use crate::lifecycle::AsyncFault;
use crate::microversion::{parse_pair, requested_in_generic_header};
use crate::reply::Reply;
use crate::reply::fault;
use crate::state::CloudState;
pub(crate) use model::BlockState;

pub use crate::catalog::CINDER_PREFIX as PREFIX;
pub use crate::microversion::GENERIC_HEADER as VERSION_HEADER;
/// The lowest microversion.
pub const MIN_VERSION: (u32, u32) = (3, 0);

pub(crate) fn max_version(state: &CloudState) -> (u32, u32) {
    parse_pair(&state.config.cinder.max_microversion).unwrap_or((3, 70))
}

/// Stuff the leftover report lists about block storage.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockLeftovers {
    /// Volumes not yet deleted (those still `deleting` too).
    pub volumes: Vec<BlockLeftover>,
    /// Volume snapshots not yet deleted.
    pub volume_snapshots: Vec<BlockLeftover>,
    /// Volumes still attached to servers (`id` is the attachment's).
    pub attachments: Vec<BlockLeftover>,
    /// Loop devices still set up on the host: `{device, file, link}`.
    pub loop_devices: Vec<LoopLeftover>,
}

impl BlockLeftovers {
    /// True when nothing is left.
    pub fn is_empty(&self) -> bool {
        self.volumes.is_empty()
            && self.volume_snapshots.is_empty()
            && self.attachments.is_empty()
            && self.loop_devices.is_empty()
    }
}

/// A volume, snapshot or attachment still present.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockLeftover {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: Option<String>,
    /// Its status.
    pub status: String,
    /// The volume it belongs to (snapshots, attachments).
    pub volume_id: Option<String>,
    /// The server (attachments).
    pub server_id: Option<String>,
}

/// What a test may want to know of a volume: where it is, how big, to which servers it is
/// attached (the cloud's view, as an administrator sees it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeView {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: Option<String>,
    /// Size in GiB.
    pub size: u64,
    /// Status (`available`, `in-use`, …).
    pub status: String,
    /// Availability zone.
    pub availability_zone: String,
    /// Volume type name.
    pub volume_type: String,
    /// Whether it may be attached to several servers.
    pub multiattach: bool,
    /// The snapshot it was made from.
    pub snapshot_id: Option<String>,
    /// The volume it was cloned from.
    pub source_volid: Option<String>,
    /// The ids of the servers it is attached to, in attachment order.
    pub attached_to: Vec<String>,
    /// Its metadata.
    pub metadata: BTreeMap<String, String>,
    /// The `same_host`/`different_host` scheduler hints it was created with (volume ids,
    /// a single-string hint as a one-item list); empty without hints.
    pub scheduler_hints: BTreeMap<String, Vec<String>>,
}

/// A loop device still set up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoopLeftover {
    /// `/dev/loopN`.
    pub device: String,
    /// The volume file behind it.
    pub file: String,
    /// Its link in the server's disk directory.
    pub link: String,
}

impl BlockState {
    /// The view of volume `id`, transitions due by now applied.
    pub(crate) fn volume_view(&mut self, id: &str) -> Option<VolumeView> {
        self.advance(Instant::now());
        self.volumes.get(id).map(|v| VolumeView {
            id: v.id.clone(),
            name: v.name.clone(),
            size: v.size,
            status: v.status.clone(),
            availability_zone: v.availability_zone.clone(),
            volume_type: v.type_name.clone(),
            multiattach: v.multiattach,
            snapshot_id: v.snapshot_id.clone(),
            source_volid: v.source_volid.clone(),
            attached_to: v.attachments.iter().map(|a| a.server_id.clone()).collect(),
            metadata: v.metadata.clone(),
            scheduler_hints: v.scheduler_hints.clone(),
        })
    }

    /// What is still present, in creation order.
    pub(crate) fn leftovers(&mut self) -> BlockLeftovers {
        self.advance(Instant::now());
        let mut volumes: Vec<&model::Volume> = self.volumes.values().collect();
        volumes.sort_by_key(|v| v.seq);
        let mut snapshots: Vec<&model::VolumeSnapshot> = self.snapshots.values().collect();
        snapshots.sort_by_key(|s| s.seq);
        BlockLeftovers {
            volumes: volumes
                .iter()
                .map(|v| BlockLeftover {
                    id: v.id.clone(),
                    name: v.name.clone(),
                    status: v.status.clone(),
                    volume_id: None,
                    server_id: None,
                })
                .collect(),
            volume_snapshots: snapshots
                .iter()
                .map(|s| BlockLeftover {
                    id: s.id.clone(),
                    name: s.name.clone(),
                    status: s.status.clone(),
                    volume_id: Some(s.volume_id.clone()),
                    server_id: None,
                })
                .collect(),
            attachments: volumes
                .iter()
                .flat_map(|v| {
                    v.attachments.iter().map(|a| BlockLeftover {
                        id: a.id.clone(),
                        name: Some(a.device.clone()),
                        status: "attached".into(),
                        volume_id: Some(v.id.clone()),
                        server_id: Some(a.server_id.clone()),
                    })
                })
                .collect(),
            loop_devices: self
                .loops
                .list()
                .into_iter()
                .map(|l| LoopLeftover {
                    device: l.device.display().to_string(),
                    file: l.file.display().to_string(),
                    link: l.link.display().to_string(),
                })
                .collect(),
        }
    }
}

/// One Cinder (or Nova) request being served.
pub(crate) struct Ctx<'a> {
    pub req: &'a Request,
    pub version: (u32, u32),
    pub now: Instant,
    pub admin: bool,
    query: Vec<(String, String)>,
    pub latency: Option<Duration>,
}

impl<'a> Ctx<'a> {
    pub(crate) fn new(req: &'a Request, version: (u32, u32), admin: bool) -> Self {
        Self {
            req,
            version,
            now: Instant::now(),
            admin,
            query: req
                .url
                .query_pairs()
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
            latency: None,
        }
    }

    /// Whether the microversion is at least 3.`minor`.
    pub(crate) fn at_least(&self, minor: u32) -> bool {
        self.version >= (3, minor)
    }

    pub(crate) fn query(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The object under `key` in the JSON body, or 400.
    pub(crate) fn body_object(&self, key: &str) -> Result<serde_json::Map<String, Value>, Reply> {
        let body: Value = serde_json::from_slice(&self.req.body)
            .map_err(|_| fault(400, "Malformed request body"))?;
        match body.get(key) {
            Some(Value::Object(map)) => Ok(map.clone()),
            _ => Err(fault(
                400,
                format!("Missing required element '{key}' in request body."),
            )),
        }
    }

    /// Consumes a fault rule for `operation` about `resources`.
    pub(crate) fn fault(
        &mut self,
        state: &mut CloudState,
        operation: Operation,
        resources: &[String],
    ) -> Result<AsyncFault, Reply> {
        match state.faults.take(operation, resources) {
            None => Ok(AsyncFault::None),
            Some(FaultAction::HttpError { status, message }) => Err(fault(
                status,
                message.unwrap_or_else(|| format!("Injected fault on {operation:?}.")),
            )),
            Some(FaultAction::Latency { ms }) => {
                self.latency = Some(Duration::from_millis(ms));
                Ok(AsyncFault::None)
            }
            Some(FaultAction::Stuck { status }) => Ok(AsyncFault::Stuck(status)),
            Some(FaultAction::Error { detail_id, message }) => {
                Ok(AsyncFault::Error { detail_id, message })
            }
        }
    }

    pub(crate) fn links(&self, state: &CloudState, collection: &str, id: &str) -> Value {
        let base = &state.base_url;
        let project = &state.config.account.project_id;
        json!([
            {"rel": "self", "href": format!("{base}{PREFIX}/v3/{project}/{collection}/{id}")},
            {"rel": "bookmark", "href": format!("{base}{PREFIX}/{project}/{collection}/{id}")},
        ])
    }
}

fn versions(state: &CloudState) -> Value {
    let (major, minor) = max_version(state);
    json!([{
        "id": "v3.0", "status": "CURRENT",
        "version": format!("{major}.{minor}"), "min_version": "3.0",
        "updated": "2022-08-31T00:00:00Z",
        "links": [
            {"rel": "describedby", "type": "text/html", "href": "https://docs.openstack.org/"},
            {"rel": "self", "href": format!("{}{PREFIX}/v3/", state.base_url)},
        ],
        "media-types": [{"base": "application/json", "type": "application/vnd.openstack.volume+json;version=3"}],
    }])
}

/// Handles a request under [`PREFIX`]; `rest` is the path after it.
pub(crate) fn handle(state: &mut CloudState, req: &Request, rest: &str) -> Reply {
    if !state.config.cinder.present {
        return Reply::text(404, "404 Not Found".into(), "text/plain");
    }
    let trimmed = rest.trim_end_matches('/');
    if req.method == Method::GET && (trimmed.is_empty() || trimmed == "/v3") {
        if let Some(FaultAction::HttpError { status, message }) =
            state.faults.take(Operation::CinderVersions, &[])
        {
            return fault(status, message.unwrap_or_else(|| "Injected fault.".into()));
        }
        let status = if trimmed.is_empty() { 300 } else { 200 };
        return Reply::json(status, json!({"versions": versions(state)}));
    }
    let Some(path) = trimmed.strip_prefix("/v3/") else {
        return fault(404, "The resource could not be found.");
    };
    let token = match keystone::authenticate(state, &req.headers) {
        Ok(token) => token,
        Err(reply) => return reply,
    };
    let max = max_version(state);
    let version = match requested_in_generic_header(&req.headers, "volume") {
        None => MIN_VERSION,
        Some(v) if v.eq_ignore_ascii_case("latest") => max,
        Some(v) => match parse_pair(v) {
            None => {
                return fault(
                    400,
                    format!(
                        "API Version String {v} is of invalid format. Must be of format MajorNum.MinorNum."
                    ),
                );
            }
            Some(v) if v < MIN_VERSION || v > max => {
                return fault(
                    406,
                    format!(
                        "Version {}.{} is not supported by the API. Minimum is 3.0 and maximum is {}.{}.",
                        v.0, v.1, max.0, max.1
                    ),
                );
            }
            Some(v) => v,
        },
    };
    let mut segments: Vec<&str> = path.split('/').collect();
    if segments.first() == Some(&state.config.account.project_id.as_str()) {
        segments.remove(0);
    }
    let mut ctx = Ctx::new(req, version, token.admin);
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

fn route(state: &mut CloudState, ctx: &mut Ctx<'_>, segments: &[&str]) -> Reply {
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
        ["os-availability-zone"] if m == "GET" => resources::zones(state, ctx),
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
