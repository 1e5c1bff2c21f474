//! A small scripted Keystone + Cinder + Nova on wiremock, standing in until the project's
//! fake Cinder/Nova (`fakes/`) is ready: state per instance, transitions on read
//! (`creating` → `available`, `attaching` → `in-use`, `detaching` → `available`), fault
//! bodies shaped like the real services', and checks of the token and microversion headers.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Quota of the project in GiB.
pub const QUOTA_GIB: i64 = 10;

/// The cloud's state, for tests to inspect.
#[derive(Debug, Default)]
pub struct State {
    /// Volumes by id.
    pub volumes: BTreeMap<String, Value>,
    /// Snapshots by id.
    pub snapshots: BTreeMap<String, Value>,
    /// Nova servers.
    pub servers: Vec<String>,
    /// Request bodies of `POST /volumes`.
    pub created: Vec<Value>,
    next: u32,
}

/// The running cloud.
pub struct MiniCloud {
    /// The server.
    pub server: MockServer,
    /// Its state.
    pub state: Arc<Mutex<State>>,
}

impl MiniCloud {
    /// Starts a cloud with servers `server-1` and `server-2`.
    pub async fn start() -> Self {
        let server = MockServer::start().await;
        let state = Arc::new(Mutex::new(State {
            servers: vec!["server-1".into(), "server-2".into()],
            ..State::default()
        }));
        Mock::given(any())
            .respond_with(Router {
                base: server.uri(),
                state: state.clone(),
            })
            .mount(&server)
            .await;
        MiniCloud { server, state }
    }

    /// Keystone's v3 URL.
    pub fn auth_url(&self) -> String {
        format!("{}/identity/v3", self.server.uri())
    }

    /// A copy of volume `id`.
    pub fn volume(&self, id: &str) -> Option<Value> {
        self.state.lock().ok()?.volumes.get(id).cloned()
    }
}

struct Router {
    base: String,
    state: Arc<Mutex<State>>,
}

fn fault(status: u16, kind: &str, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(status)
        .set_body_json(json!({ kind: { "code": status, "message": message } }))
}

fn ok(body: Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(body)
}

impl Respond for Router {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let path = request.url.path().to_string();
        let method = request.method.as_str().to_string();
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let header = |name: &str| {
            request
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string()
        };
        if path == "/identity/v3/auth/tokens" && method == "POST" {
            let password = &body["auth"]["identity"]["password"]["user"]["password"];
            if password != "secret" {
                return fault(
                    401,
                    "error",
                    "The request you have made requires authentication.",
                );
            }
            return ResponseTemplate::new(201)
                .insert_header("X-Subject-Token", "tok")
                .set_body_json(json!({"token": {"catalog": [
                    {"type": "volumev3", "endpoints": [{"interface": "public", "region_id": "RegionOne",
                        "url": format!("{}/volume/v3/p", self.base)}]},
                    {"type": "compute", "endpoints": [{"interface": "public", "region_id": "RegionOne",
                        "url": format!("{}/compute/v2.1", self.base)}]},
                ]}}));
        }
        if header("x-auth-token") != "tok" {
            return fault(401, "error", "no token");
        }
        let Ok(mut state) = self.state.lock() else {
            return fault(500, "computeFault", "poisoned");
        };
        if let Some(rest) = path.strip_prefix("/volume/v3/p") {
            if header("openstack-api-version") != "volume 3.50" {
                return fault(400, "badRequest", "missing microversion");
            }
            let query: BTreeMap<String, String> = request.url.query_pairs().into_owned().collect();
            return cinder(&mut state, &method, rest, &body, &query);
        }
        if let Some(rest) = path.strip_prefix("/compute/v2.1") {
            if header("openstack-api-version") != "compute 2.60" {
                return fault(400, "badRequest", "missing microversion");
            }
            return nova(&mut state, &method, rest, &body);
        }
        fault(404, "itemNotFound", &format!("no route {method} {path}"))
    }
}

fn advance(volume: &mut Value) {
    let next = match volume["status"].as_str() {
        Some("creating") | Some("detaching") | Some("extending") => "available",
        Some("attaching") => "in-use",
        _ => return,
    };
    volume["status"] = json!(next);
}

fn cinder(
    state: &mut State,
    method: &str,
    path: &str,
    body: &Value,
    query: &BTreeMap<String, String>,
) -> ResponseTemplate {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match (method, parts.as_slice()) {
        ("GET", ["volumes", "detail"]) => {
            let volumes: Vec<Value> = state
                .volumes
                .values()
                .filter(|v| query.get("name").is_none_or(|n| v["name"] == *n.as_str()))
                .cloned()
                .collect();
            ok(json!({ "volumes": volumes }))
        }
        ("POST", ["volumes"]) => {
            let wanted = &body["volume"];
            let size = wanted["size"].as_i64().unwrap_or(0);
            let used: i64 = state
                .volumes
                .values()
                .filter_map(|v| v["size"].as_i64())
                .sum();
            if used + size > QUOTA_GIB {
                return fault(
                    413,
                    "overLimit",
                    &format!(
                        "VolumeSizeExceedsAvailableQuota: Requested volume or snapshot exceeds allowed gigabytes quota. Requested {size}G, quota is {QUOTA_GIB}G and {used}G has been consumed."
                    ),
                );
            }
            state.next += 1;
            let id = format!("0000{:04}-aaaa-bbbb-cccc-dddddddddddd", state.next);
            state.created.push(body.clone());
            let volume = json!({
                "id": id, "name": wanted["name"], "size": size, "status": "creating",
                "availability_zone": wanted["availability_zone"].as_str().unwrap_or("nova"),
                "volume_type": wanted["volume_type"].as_str().unwrap_or("__DEFAULT__"),
                "multiattach": wanted["volume_type"] == "multi",
                "attachments": [], "snapshot_id": wanted["snapshot_id"],
                "source_volid": wanted["source_volid"], "metadata": wanted["metadata"],
            });
            state.volumes.insert(id, volume.clone());
            ResponseTemplate::new(202).set_body_json(json!({ "volume": volume }))
        }
        ("GET", ["volumes", id]) => match state.volumes.get_mut(*id) {
            Some(volume) => {
                let answer = volume.clone();
                advance(volume);
                ok(json!({ "volume": answer }))
            }
            None => fault(
                404,
                "itemNotFound",
                &format!("Volume {id} could not be found."),
            ),
        },
        ("DELETE", ["volumes", id]) => match state.volumes.remove(*id) {
            Some(_) => ResponseTemplate::new(202),
            None => fault(
                404,
                "itemNotFound",
                &format!("Volume {id} could not be found."),
            ),
        },
        ("POST", ["volumes", id, "action"]) => match state.volumes.get_mut(*id) {
            Some(volume) => {
                volume["size"] = body["os-extend"]["new_size"].clone();
                volume["status"] = json!("extending");
                ResponseTemplate::new(202)
            }
            None => fault(
                404,
                "itemNotFound",
                &format!("Volume {id} could not be found."),
            ),
        },
        ("POST", ["snapshots"]) => {
            let wanted = &body["snapshot"];
            let Some(volume) = wanted["volume_id"]
                .as_str()
                .and_then(|v| state.volumes.get(v))
            else {
                return fault(404, "itemNotFound", "Volume could not be found.");
            };
            let size = volume["size"].clone();
            state.next += 1;
            let id = format!("5a5a{:04}-aaaa-bbbb-cccc-dddddddddddd", state.next);
            let snapshot = json!({
                "id": id, "name": wanted["name"], "volume_id": wanted["volume_id"], "size": size,
                "status": "creating", "created_at": "2026-11-25T13:00:00.000000",
            });
            state.snapshots.insert(id, snapshot.clone());
            ResponseTemplate::new(202).set_body_json(json!({ "snapshot": snapshot }))
        }
        ("GET", ["snapshots", "detail"]) => {
            let snapshots: Vec<Value> = state
                .snapshots
                .values()
                .filter(|s| query.get("name").is_none_or(|n| s["name"] == *n.as_str()))
                .filter(|s| {
                    query
                        .get("volume_id")
                        .is_none_or(|v| s["volume_id"] == *v.as_str())
                })
                .cloned()
                .collect();
            ok(json!({ "snapshots": snapshots }))
        }
        ("GET", ["snapshots", id]) => match state.snapshots.get_mut(*id) {
            Some(snapshot) => {
                let answer = snapshot.clone();
                snapshot["status"] = json!("available");
                ok(json!({ "snapshot": answer }))
            }
            None => fault(
                404,
                "itemNotFound",
                &format!("Snapshot {id} could not be found."),
            ),
        },
        ("DELETE", ["snapshots", id]) => match state.snapshots.remove(*id) {
            Some(_) => ResponseTemplate::new(202),
            None => fault(
                404,
                "itemNotFound",
                &format!("Snapshot {id} could not be found."),
            ),
        },
        _ => fault(404, "itemNotFound", &format!("no route {method} {path}")),
    }
}

fn nova(state: &mut State, method: &str, path: &str, body: &Value) -> ResponseTemplate {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let server = parts.get(1).copied().unwrap_or("");
    if parts.first() != Some(&"servers") || !state.servers.iter().any(|s| s == server) {
        return fault(
            404,
            "itemNotFound",
            &format!("Instance {server} could not be found."),
        );
    }
    match (method, parts.as_slice()) {
        ("GET", [_, _]) => ok(json!({ "server": { "id": server } })),
        ("POST", [_, _, "os-volume_attachments"]) => {
            let volume_id = body["volumeAttachment"]["volumeId"].as_str().unwrap_or("");
            let Some(volume) = state.volumes.get_mut(volume_id) else {
                return fault(
                    404,
                    "itemNotFound",
                    &format!("Volume {volume_id} could not be found."),
                );
            };
            if volume["status"] != "available" && volume["multiattach"] != true {
                return fault(
                    400,
                    "badRequest",
                    &format!("Invalid volume: volume {volume_id} status must be available"),
                );
            }
            let device = "/dev/vdb";
            if let Some(list) = volume["attachments"].as_array_mut() {
                list.push(json!({ "server_id": server, "device": device, "attachment_id": "att" }));
            }
            volume["status"] = json!("attaching");
            ok(
                json!({ "volumeAttachment": { "device": device, "serverId": server, "volumeId": volume_id } }),
            )
        }
        ("DELETE", [_, _, "os-volume_attachments", volume_id]) => {
            let Some(volume) = state.volumes.get_mut(*volume_id) else {
                return fault(404, "itemNotFound", "Volume could not be found.");
            };
            if let Some(list) = volume["attachments"].as_array_mut() {
                list.retain(|a| a["server_id"] != server);
            }
            volume["status"] = json!("detaching");
            ResponseTemplate::new(202)
        }
        _ => fault(404, "itemNotFound", &format!("no route {method} {path}")),
    }
}
