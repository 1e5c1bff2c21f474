//! The control API under `/_fake/`: drives faults, share types, delays, Manila's presence,
//! tokens, the journal, leftovers and reset over HTTP, for processes that cannot hold a
//! [`crate::FakeCloud`]. Each endpoint calls the same state operation as the in-process
//! API. Answers are JSON; errors are `{"error": "<what is wrong>"}`.

use serde::Deserialize;
use serde_json::{Value, json};
use wiremock::Request;

use crate::config::{Delays, ShareTypeSeed, check_token_lifetime};
use crate::credentials::{self, SecretKind};
use crate::error::Result;
use crate::faults::FaultRule;
use crate::metadata::NodeMetadata;
use crate::reply::Reply;
use crate::state::CloudState;

/// Where the control API is mounted.
pub const PREFIX: &str = "/_fake";

/// Body of `PUT /_fake/manila`: fields left out stay as they are.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManilaSwitches {
    present: Option<bool>,
    types_forbidden: Option<bool>,
}

/// Body of `PUT /_fake/default-share-type`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DefaultType {
    name: Option<String>,
}

/// Body of `PUT /_fake/token-lifetime`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenLifetime {
    seconds: u64,
}

fn bad(message: impl Into<String>) -> Reply {
    Reply::json(400, json!({"error": message.into()}))
}

fn missing(message: impl Into<String>) -> Reply {
    Reply::json(404, json!({"error": message.into()}))
}

fn parse<T: serde::de::DeserializeOwned>(req: &Request) -> std::result::Result<T, Reply> {
    serde_json::from_slice(&req.body).map_err(|e| bad(format!("invalid request body: {e}")))
}

fn ok(value: Value) -> Reply {
    Reply::json(200, value)
}

fn done(result: Result<()>) -> Reply {
    match result {
        Ok(()) => Reply::empty(204),
        Err(e) => bad(e.to_string()),
    }
}

/// Handles a request under [`PREFIX`]; `rest` is the path after it.
pub(crate) fn handle(state: &mut CloudState, req: &Request, rest: &str) -> Reply {
    match handle_checked(state, req, rest) {
        Ok(reply) | Err(reply) => reply,
    }
}

/// One control endpoint: the method and the path's segments.
type Route<'r> = (&'r str, &'r [&'r str]);

fn handle_checked(
    state: &mut CloudState,
    req: &Request,
    rest: &str,
) -> std::result::Result<Reply, Reply> {
    let segments: Vec<&str> = rest.trim_matches('/').split('/').collect();
    let method = req.method.as_str();
    let route = (method, segments.as_slice());
    let topic = match segments.first().copied().unwrap_or_default() {
        "health" | "journal" | "leftovers" | "block-leftovers" | "reset" => cloud,
        "cinder-delays" | "servers" => block,
        "faults" => faults,
        "share-types" | "default-share-type" | "delays" | "manila" => manila,
        "token-lifetime" | "tokens" => keystone,
        "metadata" => metadata,
        "clouds.yaml" | "secret" => credentials,
        _ => none,
    };
    Ok(topic(state, req, route)?
        .unwrap_or_else(|| missing(format!("no control endpoint {method} {PREFIX}{rest}"))))
}

/// A query parameter of `req`.
fn query(req: &Request, key: &str) -> Option<String> {
    req.url
        .query_pairs()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
}

/// The endpoints of a topic: the reply, or `None` for no such endpoint.
type Topic = std::result::Result<Option<Reply>, Reply>;

/// No endpoint.
fn none(_: &mut CloudState, _: &Request, _: Route<'_>) -> Topic {
    Ok(None)
}

/// Health, the journal, the leftovers and reset.
fn cloud(state: &mut CloudState, req: &Request, route: Route<'_>) -> Topic {
    Ok(Some(match route {
        ("GET", ["health"]) => ok(json!({"status": "ok"})),
        ("GET", ["journal"]) => {
            let since: u64 = query(req, "since")
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            let entries: Vec<_> = state.journal.entries().filter(|e| e.seq > since).collect();
            ok(json!(entries))
        }
        ("DELETE", ["journal"]) => {
            state.journal.clear();
            Reply::empty(204)
        }
        ("GET", ["leftovers"]) => {
            let mut all = json!(state.leftovers());
            // Block storage is listed beside Manila's resources on a cloud that has it.
            if state.config.cinder.present
                && let (Some(map), Value::Object(block)) =
                    (all.as_object_mut(), json!(state.block.leftovers()))
            {
                map.extend(block);
            }
            ok(all)
        }
        ("GET", ["block-leftovers"]) => ok(json!(state.block.leftovers())),
        ("POST", ["reset"]) => done(state.reset()),
        _ => return Ok(None),
    }))
}

/// Cinder's delays and Nova's servers.
fn block(state: &mut CloudState, req: &Request, route: Route<'_>) -> Topic {
    Ok(Some(match route {
        ("GET", ["cinder-delays"]) => ok(json!(state.config.cinder.delays)),
        ("PUT", ["cinder-delays"]) => {
            let delays = parse::<crate::config::CinderDelays>(req)?;
            delays.validate().map_err(bad)?;
            state.config.cinder.delays = delays;
            Reply::empty(204)
        }
        ("GET", ["servers"]) => ok(Value::Array(
            state
                .block
                .servers
                .values()
                .map(|s| {
                    json!({"id": s.id, "name": s.name, "availability_zone": s.availability_zone,
                           "disk_dir": s.disk_dir})
                })
                .collect(),
        )),
        ("POST", ["servers"]) => {
            let seed: crate::config::ServerSeed = parse(req)?;
            let state = &mut *state;
            match state.block.add_server(&seed, &mut state.node_metadata) {
                Ok(id) => Reply::json(201, json!({"id": id})),
                Err(e) => bad(e.to_string()),
            }
        }
        _ => return Ok(None),
    }))
}

/// The fault rules.
fn faults(state: &mut CloudState, req: &Request, route: Route<'_>) -> Topic {
    Ok(Some(match route {
        ("GET", ["faults"]) => ok(json!(state.faults.list())),
        ("POST", ["faults"]) => {
            let rule: FaultRule = parse(req)?;
            rule.validate().map_err(bad)?;
            Reply::json(201, json!({"id": state.faults.add(rule)}))
        }
        ("DELETE", ["faults"]) => {
            state.faults.clear();
            Reply::empty(204)
        }
        ("DELETE", ["faults", id]) => match id.parse::<u64>() {
            Ok(n) if state.faults.remove(n) => Reply::empty(204),
            _ => missing(format!("no fault rule with id {id:?}")),
        },
        _ => return Ok(None),
    }))
}

/// Manila's share types, default type, delays and switches.
fn manila(state: &mut CloudState, req: &Request, route: Route<'_>) -> Topic {
    Ok(Some(match route {
        ("GET", ["share-types"]) => ok(json!(
            state
                .manila
                .share_types
                .iter()
                .map(|t| json!({"id": t.id, "name": t.name}))
                .collect::<Vec<_>>()
        )),
        ("POST", ["share-types"]) => {
            let seed: ShareTypeSeed = parse(req)?;
            let id = state
                .manila
                .add_share_type(&seed)
                .map_err(|e| bad(e.to_string()))?;
            Reply::json(201, json!({"id": id, "name": seed.name}))
        }
        ("DELETE", ["share-types", name]) => match state.manila.remove_share_type(name) {
            Ok(()) => Reply::empty(204),
            Err(e) => missing(e.to_string()),
        },
        ("PUT", ["default-share-type"]) => {
            let body: DefaultType = parse(req)?;
            done(state.manila.set_default_share_type(body.name.as_deref()))
        }
        ("GET", ["delays"]) => ok(json!(state.config.manila.delays)),
        ("PUT", ["delays"]) => {
            let delays = parse::<Delays>(req)?;
            delays.validate().map_err(bad)?;
            state.config.manila.delays = delays;
            Reply::empty(204)
        }
        ("GET", ["manila"]) => ok(json!({
            "present": state.config.manila.present,
            "types_forbidden": state.config.manila.types_forbidden,
        })),
        ("PUT", ["manila"]) => {
            let body: ManilaSwitches = parse(req)?;
            if let Some(p) = body.present {
                state.config.manila.present = p;
            }
            if let Some(f) = body.types_forbidden {
                state.config.manila.types_forbidden = f;
            }
            Reply::empty(204)
        }
        _ => return Ok(None),
    }))
}

/// Token lifetime and expiry.
fn keystone(state: &mut CloudState, req: &Request, route: Route<'_>) -> Topic {
    Ok(Some(match route {
        ("PUT", ["token-lifetime"]) => {
            let body: TokenLifetime = parse(req)?;
            check_token_lifetime("seconds", body.seconds).map_err(bad)?;
            state.config.token_lifetime_secs = body.seconds;
            Reply::empty(204)
        }
        ("POST", ["tokens", "expire"]) => {
            state.keystone.expire_all();
            Reply::empty(204)
        }
        _ => return Ok(None),
    }))
}

/// The metadata service's documents.
fn metadata(state: &mut CloudState, req: &Request, route: Route<'_>) -> Topic {
    Ok(Some(match route {
        ("GET", ["metadata"]) => ok(json!(state.node_metadata)),
        ("GET", ["metadata", node]) => match state.node_metadata.get(*node) {
            Some(metadata) => ok(json!(metadata)),
            None => missing(format!("no metadata document for node {node:?}")),
        },
        ("PUT", ["metadata", node]) => {
            let metadata: NodeMetadata = parse(req)?;
            metadata.validate().map_err(bad)?;
            state.node_metadata.insert((*node).to_string(), metadata);
            Reply::empty(204)
        }
        ("DELETE", ["metadata", node]) => match state.node_metadata.remove(*node) {
            Some(_) => Reply::empty(204),
            None => missing(format!("no metadata document for node {node:?}")),
        },
        _ => return Ok(None),
    }))
}

/// The clouds.yaml and flat secret for this cloud.
fn credentials(state: &mut CloudState, req: &Request, route: Route<'_>) -> Topic {
    Ok(Some(match route {
        ("GET", ["clouds.yaml"]) => {
            let cloud = query(req, "cloud").unwrap_or_else(|| "fake".into());
            let text = credentials::clouds_yaml(
                &state.config.account,
                &state.config.region,
                &state.base_url,
                &cloud,
                state.ca.as_ref().map(|(_, file)| file.as_path()),
            );
            Reply::text(200, text, "application/yaml")
        }
        ("GET", ["secret"]) => {
            let kind = match query(req, "kind").as_deref() {
                None | Some("password") => SecretKind::Password,
                Some("application-credential") => SecretKind::ApplicationCredential,
                Some(other) => {
                    return Err(bad(format!(
                        "unknown secret kind {other:?} (password or application-credential)"
                    )));
                }
            };
            let mut secret = credentials::secret(
                &state.config.account,
                &state.config.region,
                &state.base_url,
                kind,
            );
            if let Some((pem, _)) = &state.ca {
                secret.insert("os-certAuthority".into(), pem.clone());
            }
            ok(json!(secret))
        }
        _ => return Ok(None),
    }))
}
