//! A Manila v2 client over a Keystone [`Session`]: microversion check, shares, export
//! locations, access rules, share types, snapshots and user messages; [`Connector`] keeps
//! one client per set of credentials.

pub mod connector;
pub mod endpoint;
pub mod model;

use std::sync::{Mutex, PoisonError};

use reqwest::{Method, StatusCode};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

pub use connector::Connector;
pub use model::{
    AccessRule, ExportLocation, Message, Microversion, NewShare, Share, ShareType, Snapshot,
};

use crate::error::{Error, Result};
use crate::http::{error_for_response, transport_error};
use crate::keystone::Session;
use crate::single_flight::SingleFlight;

/// The minimum microversion the driver needs (user messages), sent on every call.
pub const MIN_MICROVERSION: Microversion = Microversion(2, 37);
/// The microversion of `GET /share-access-rules`.
pub const ACCESS_RULES_MICROVERSION: Microversion = Microversion(2, 45);
/// The microversion from which Manila accepts IPv6 `ip` access rules.
pub const IPV6_ACCESS_MICROVERSION: Microversion = Microversion(2, 38);
/// The microversion from which Manila takes share scheduler hints.
pub const SCHEDULER_HINTS_MICROVERSION: Microversion = Microversion(2, 65);

/// Manila v2 client for one identity.
#[derive(Debug)]
pub struct ManilaClient {
    /// Tokens carry the Manila endpoint URL.
    session: Session<String>,
    /// The maximum microversion, once read.
    max_version: Mutex<Option<Microversion>>,
    /// One version check in flight at a time, its outcome shared (as authentication).
    version_check: SingleFlight<Microversion>,
}

impl ManilaClient {
    /// Wraps a session; the version document is read on first use.
    pub fn new(session: Session<String>) -> Self {
        ManilaClient {
            session,
            max_version: Mutex::new(None),
            version_check: SingleFlight::default(),
        }
    }

    fn known_version(&self) -> Option<Microversion> {
        *self
            .max_version
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Authenticates (if needed) and checks the API supports microversion ≥ 2.37. Returns the
    /// maximum supported microversion (read once; a failure is not remembered, the next call
    /// asks again).
    pub async fn check_version(&self) -> Result<Microversion> {
        if let Some(version) = self.known_version() {
            return Ok(version);
        }
        self.version_check
            .run(|| async {
                if let Some(version) = self.known_version() {
                    return Ok(version);
                }
                let token = self.session.token().await?;
                let url = version_document_url(&token.endpoints);
                let response = self
                    .session
                    .http()
                    .get(&url)
                    .header("X-Auth-Token", token.value.expose())
                    .send()
                    .await
                    .map_err(|e| transport_error("Manila", &url, &e))?;
                if !response.status().is_success() {
                    return Err(error_for_response("Manila", "GET", &url, response).await);
                }
                let document: Value = response.json().await.map_err(|e| Error::Decode {
                    service: "Manila",
                    path: url.clone(),
                    reason: e.to_string(),
                })?;
                let max = max_version(&document).ok_or_else(|| Error::Decode {
                    service: "Manila",
                    path: url.clone(),
                    reason: "no v2 entry with a version in the version document".into(),
                })?;
                if max < MIN_MICROVERSION {
                    return Err(Error::FailedPrecondition(format!(
                        "Manila at {} supports microversions up to {max}; this driver needs at least {MIN_MICROVERSION}",
                        token.endpoints
                    )));
                }
                *self
                    .max_version
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = Some(max);
                Ok(max)
            })
            .await
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, &str)],
        body: Option<Value>,
        version: Microversion,
    ) -> Result<T> {
        let value = self.call_raw(method, path, query, body, version).await?;
        serde_json::from_value(value).map_err(|e| Error::Decode {
            service: "Manila",
            path: path.into(),
            reason: e.to_string(),
        })
    }

    /// `GET path?query`, decoded.
    async fn get<T: DeserializeOwned>(&self, path: &str, query: &[(&str, &str)]) -> Result<T> {
        self.call(Method::GET, path, query, None, MIN_MICROVERSION)
            .await
    }

    /// `GET path` of one resource; a 404 is [`Error::NotFound`] naming `what` ("share …").
    async fn get_one<T: DeserializeOwned>(
        &self,
        path: &str,
        what: impl FnOnce() -> String,
    ) -> Result<T> {
        match self.get(path, &[]).await {
            Err(e) if e.is_not_found() => Err(Error::NotFound(format!("{} not found", what()))),
            answer => answer,
        }
    }

    /// `DELETE path`; `false` when the resource did not exist.
    async fn delete(&self, path: &str) -> Result<bool> {
        match self
            .call_raw(Method::DELETE, path, &[], None, MIN_MICROVERSION)
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn call_raw(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, &str)],
        body: Option<Value>,
        version: Microversion,
    ) -> Result<Value> {
        self.check_version().await?;
        let mut retried = false;
        loop {
            let token = self.session.token().await?;
            let url = format!("{}{path}", token.endpoints);
            let mut request = self
                .session
                .http()
                .request(method.clone(), &url)
                .query(query)
                .header("X-Auth-Token", token.value.expose())
                .header("X-OpenStack-Manila-API-Version", version.to_string())
                .header(
                    "OpenStack-API-Version",
                    format!("shared-file-system {version}"),
                );
            if let Some(body) = &body {
                request = request.json(body);
            }
            let response = request
                .send()
                .await
                .map_err(|e| transport_error("Manila", &url, &e))?;
            let status = response.status();
            if status == StatusCode::UNAUTHORIZED && !retried {
                self.session.invalidate(&token, "Manila").await;
                retried = true;
                continue;
            }
            if status == StatusCode::UNAUTHORIZED {
                let error = error_for_response("Manila", method.as_str(), path, response).await;
                return Err(Error::Unauthenticated(format!(
                    "Manila rejected a freshly issued token: {error}"
                )));
            }
            if !status.is_success() {
                return Err(error_for_response("Manila", method.as_str(), path, response).await);
            }
            let text = response
                .text()
                .await
                .map_err(|e| transport_error("Manila", &url, &e))?;
            if text.trim().is_empty() {
                return Ok(Value::Null);
            }
            return serde_json::from_str(&text).map_err(|e| Error::Decode {
                service: "Manila",
                path: path.into(),
                reason: e.to_string(),
            });
        }
    }

    /// `GET /shares/{id}`; a missing share is [`Error::NotFound`].
    pub async fn share(&self, id: &str) -> Result<Share> {
        #[derive(Deserialize)]
        struct Body {
            share: Share,
        }
        let path = format!("/shares/{}", segment(id)?);
        let body: Body = self.get_one(&path, || format!("share {id}")).await?;
        Ok(body.share)
    }

    /// `GET /shares/detail?name=`: shares with exactly this name.
    pub async fn shares_named(&self, name: &str) -> Result<Vec<Share>> {
        #[derive(Deserialize)]
        struct Body {
            shares: Vec<Share>,
        }
        let query = [("name", name)];
        let body: Body = self.get("/shares/detail", &query).await?;
        Ok(body
            .shares
            .into_iter()
            .filter(|s| s.name.as_deref() == Some(name))
            .collect())
    }

    /// `POST /shares`.
    pub async fn create_share(&self, new: &NewShare) -> Result<Share> {
        #[derive(Deserialize)]
        struct Body {
            share: Share,
        }
        let mut share = json!({
            "name": new.name,
            "size": new.size,
            "share_proto": new.protocol,
            "share_type": new.share_type,
            "metadata": new.metadata,
            "description": new.description,
        });
        if let Some(zone) = &new.availability_zone {
            share["availability_zone"] = json!(zone);
        }
        if let Some(network) = &new.share_network_id {
            share["share_network_id"] = json!(network);
        }
        if let Some(snapshot) = &new.snapshot_id {
            share["snapshot_id"] = json!(snapshot);
        }
        if let Some(group) = &new.share_group_id {
            share["share_group_id"] = json!(group);
        }
        let mut version = MIN_MICROVERSION;
        if let Some(hints) = &new.scheduler_hints {
            let mut object = serde_json::Map::new();
            if let Some(ids) = &hints.same_host {
                object.insert("same_host".into(), json!(ids));
            }
            if let Some(ids) = &hints.different_host {
                object.insert("different_host".into(), json!(ids));
            }
            share["scheduler_hints"] = serde_json::Value::Object(object);
            version = SCHEDULER_HINTS_MICROVERSION;
        }
        let body: Body = self
            .call(
                Method::POST,
                "/shares",
                &[],
                Some(json!({ "share": share })),
                version,
            )
            .await?;
        Ok(body.share)
    }

    /// `DELETE /shares/{id}`; returns `false` when the share did not exist.
    pub async fn delete_share(&self, id: &str) -> Result<bool> {
        self.delete(&format!("/shares/{}", segment(id)?)).await
    }

    /// `POST /shares/{id}/action {"extend": …}`.
    pub async fn extend_share(&self, id: &str, new_size: u64) -> Result<()> {
        let path = format!("/shares/{}/action", segment(id)?);
        let body = json!({ "extend": { "new_size": new_size } });
        self.call_raw(Method::POST, &path, &[], Some(body), MIN_MICROVERSION)
            .await?;
        Ok(())
    }

    /// `GET /shares/{id}/export_locations`.
    pub async fn export_locations(&self, share_id: &str) -> Result<Vec<ExportLocation>> {
        #[derive(Deserialize)]
        struct Body {
            export_locations: Vec<ExportLocation>,
        }
        let path = format!("/shares/{}/export_locations", segment(share_id)?);
        let body: Body = self
            .call(Method::GET, &path, &[], None, MIN_MICROVERSION)
            .await?;
        Ok(body.export_locations)
    }

    /// The share's access rules (`GET /share-access-rules?share_id=` at 2.45, else the
    /// `access_list` action).
    pub async fn access_rules(&self, share_id: &str) -> Result<Vec<AccessRule>> {
        #[derive(Deserialize)]
        struct Body {
            access_list: Vec<AccessRule>,
        }
        let body: Body = if self.check_version().await? >= ACCESS_RULES_MICROVERSION {
            self.call(
                Method::GET,
                "/share-access-rules",
                &[("share_id", share_id)],
                None,
                ACCESS_RULES_MICROVERSION,
            )
            .await?
        } else {
            let path = format!("/shares/{}/action", segment(share_id)?);
            self.call(
                Method::POST,
                &path,
                &[],
                Some(json!({ "access_list": null })),
                MIN_MICROVERSION,
            )
            .await?
        };
        Ok(body.access_list)
    }

    /// `POST /shares/{id}/action {"allow_access": …}`.
    pub async fn grant_access(
        &self,
        share_id: &str,
        access_type: &str,
        access_to: &str,
        access_level: &str,
    ) -> Result<AccessRule> {
        #[derive(Deserialize)]
        struct Body {
            access: AccessRule,
        }
        let path = format!("/shares/{}/action", segment(share_id)?);
        let body = json!({ "allow_access": {
            "access_type": access_type,
            "access_to": access_to,
            "access_level": access_level,
        }});
        let version = if access_type == "ip" && access_to.contains(':') {
            IPV6_ACCESS_MICROVERSION
        } else {
            MIN_MICROVERSION
        };
        let body: Body = self
            .call(Method::POST, &path, &[], Some(body), version)
            .await?;
        Ok(body.access)
    }

    /// `GET /types`: the share types visible to the project.
    pub async fn share_types(&self) -> Result<Vec<ShareType>> {
        // Manila sends both the current and the legacy (`volume_type…`) keys.
        #[derive(Deserialize)]
        struct List {
            share_types: Option<Vec<ShareType>>,
            volume_types: Option<Vec<ShareType>>,
        }
        let types: List = self
            .call(Method::GET, "/types", &[], None, MIN_MICROVERSION)
            .await?;
        Ok(types.share_types.or(types.volume_types).unwrap_or_default())
    }

    /// The share type with this name or id (`default` asks `GET /types/default`).
    pub async fn share_type(&self, name_or_id: &str) -> Result<ShareType> {
        #[derive(Deserialize)]
        struct One {
            share_type: Option<ShareType>,
            volume_type: Option<ShareType>,
        }
        let list = self.share_types().await?;
        if let Some(found) = list
            .into_iter()
            .find(|t| t.name == name_or_id || t.id == name_or_id)
        {
            return Ok(found);
        }
        let path = if name_or_id == "default" {
            "/types/default".to_string()
        } else {
            format!("/types/{}", segment(name_or_id)?)
        };
        match self
            .call::<One>(Method::GET, &path, &[], None, MIN_MICROVERSION)
            .await
        {
            Ok(one) => one
                .share_type
                .or(one.volume_type)
                .ok_or_else(|| Error::Decode {
                    service: "Manila",
                    path: path.clone(),
                    reason: "no share_type in the response".into(),
                }),
            Err(e) if e.is_not_found() => Err(Error::InvalidArgument(format!(
                "parameter type: share type {name_or_id:?} does not exist"
            ))),
            Err(e) => Err(e),
        }
    }

    /// `POST /snapshots`.
    pub async fn create_snapshot(
        &self,
        share_id: &str,
        name: &str,
        description: &str,
    ) -> Result<Snapshot> {
        #[derive(Deserialize)]
        struct Body {
            snapshot: Snapshot,
        }
        let body = json!({ "snapshot": {
            "share_id": share_id,
            "name": name,
            "description": description,
            "force": false,
        }});
        let body: Body = self
            .call(
                Method::POST,
                "/snapshots",
                &[],
                Some(body),
                MIN_MICROVERSION,
            )
            .await?;
        Ok(body.snapshot)
    }

    /// `GET /snapshots/{id}`; a missing snapshot is [`Error::NotFound`].
    pub async fn snapshot(&self, id: &str) -> Result<Snapshot> {
        #[derive(Deserialize)]
        struct Body {
            snapshot: Snapshot,
        }
        let path = format!("/snapshots/{}", segment(id)?);
        let body: Body = self.get_one(&path, || format!("snapshot {id}")).await?;
        Ok(body.snapshot)
    }

    /// `GET /snapshots/detail?name=`: snapshots with exactly this name.
    pub async fn snapshots_named(&self, name: &str) -> Result<Vec<Snapshot>> {
        #[derive(Deserialize)]
        struct Body {
            snapshots: Vec<Snapshot>,
        }
        let query = [("name", name)];
        let body: Body = self.get("/snapshots/detail", &query).await?;
        Ok(body
            .snapshots
            .into_iter()
            .filter(|s| s.name.as_deref() == Some(name))
            .collect())
    }

    /// `DELETE /snapshots/{id}`; returns `false` when it did not exist.
    pub async fn delete_snapshot(&self, id: &str) -> Result<bool> {
        self.delete(&format!("/snapshots/{}", segment(id)?)).await
    }

    /// The newest `ERROR` user message about `resource_id`, if any.
    pub async fn newest_error_message(&self, resource_id: &str) -> Result<Option<Message>> {
        #[derive(Deserialize)]
        struct Body {
            messages: Vec<Message>,
        }
        let body: Body = self
            .call(
                Method::GET,
                "/messages",
                &[("resource_id", resource_id)],
                None,
                MIN_MICROVERSION,
            )
            .await?;
        Ok(body
            .messages
            .into_iter()
            .filter(|m| {
                m.message_level
                    .as_deref()
                    .is_none_or(|l| l.eq_ignore_ascii_case("ERROR"))
            })
            .max_by(|a, b| a.created_at.cmp(&b.created_at)))
    }
}

/// Whether `id` has the form of a Manila resource id: a UUID, hyphenated
/// (`8-4-4-4-12` hex digits, as Manila and the fake cloud write them) or as 32 hex digits.
/// Anything else cannot name a share or snapshot, and is never put in a URL.
pub fn is_manila_id(id: &str) -> bool {
    let bytes = id.as_bytes();
    match bytes.len() {
        32 => bytes.iter().all(u8::is_ascii_hexdigit),
        36 => bytes.iter().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => *b == b'-',
            _ => b.is_ascii_hexdigit(),
        }),
        _ => false,
    }
}

/// One URL path segment: every byte outside RFC 3986's unreserved set is percent-escaped,
/// so that `/`, `?`, `#` and `%` in a value cannot change the path. Empty, `.` and `..`
/// segments are refused: URL parsers resolve dot segments (escaped or not) before the
/// request is sent.
fn segment(value: &str) -> Result<String> {
    if value.is_empty() || value.bytes().all(|b| b == b'.') && value.len() <= 2 {
        return Err(Error::InvalidArgument(format!(
            "{value:?} cannot be used as a Manila resource id"
        )));
    }
    let mut escaped = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            escaped.push(char::from(byte));
        } else {
            escaped.push_str(&format!("%{byte:02X}"));
        }
    }
    Ok(escaped)
}

/// `http://h:8786/v2/<project>` → `http://h:8786/v2/` (the version document).
fn version_document_url(manila_url: &str) -> String {
    let trimmed = manila_url.trim_end_matches('/');
    match trimmed.rfind("/v2") {
        Some(index) => format!("{}/v2/", &trimmed[..index]),
        None => format!("{trimmed}/"),
    }
}

/// The highest `version` of a v2 entry in `{"versions":[…]}` (or `{"version":{…}}`).
fn max_version(document: &Value) -> Option<Microversion> {
    let entries: Vec<&Value> = match (document.get("versions"), document.get("version")) {
        (Some(Value::Array(list)), _) => list.iter().collect(),
        (_, Some(one)) => vec![one],
        _ => return None,
    };
    entries
        .into_iter()
        .filter(|v| {
            v.get("id")
                .and_then(Value::as_str)
                .is_some_and(|id| id.starts_with("v2"))
        })
        .filter_map(|v| {
            v.get("version")
                .and_then(Value::as_str)
                .and_then(Microversion::parse)
        })
        .max()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn path_segments_are_escaped_and_dot_segments_refused() {
        assert_eq!(segment("abc-1_2.x~").unwrap(), "abc-1_2.x~");
        assert_eq!(
            segment("../snapshots/a?b#c%d e").unwrap(),
            "..%2Fsnapshots%2Fa%3Fb%23c%25d%20e"
        );
        assert_eq!(segment("é").unwrap(), "%C3%A9");
        for bad in ["", ".", ".."] {
            assert!(segment(bad).is_err(), "{bad:?}");
        }
        assert_eq!(segment("...").unwrap(), "...");
    }

    #[test]
    fn manila_ids_are_uuids() {
        assert!(is_manila_id("0b5e7a2c-1f3d-4c5e-9a7b-2d4f6a8c0e1f"));
        assert!(is_manila_id("0B5E7A2C-1F3D-4C5E-9A7B-2D4F6A8C0E1F"));
        assert!(is_manila_id("0b5e7a2c1f3d4c5e9a7b2d4f6a8c0e1f"));
        for bad in [
            "",
            "reallyfakevolumeid",
            "../snapshots/0b5e7a2c-1f3d-4c5e-9a7b-2d4f6a8c0e1f",
            "0b5e7a2c-1f3d-4c5e-9a7b-2d4f6a8c0e1",
            "0b5e7a2c-1f3d-4c5e-9a7b-2d4f6a8c0e1g",
            "0b5e7a2c+1f3d-4c5e-9a7b-2d4f6a8c0e1f",
        ] {
            assert!(!is_manila_id(bad), "{bad:?}");
        }
    }

    #[test]
    fn version_document_is_at_the_v2_root() {
        assert_eq!(
            version_document_url("http://h:8786/v2/abc"),
            "http://h:8786/v2/"
        );
        assert_eq!(
            version_document_url("http://h:8786/v2"),
            "http://h:8786/v2/"
        );
        assert_eq!(version_document_url("http://h/share"), "http://h/share/");
    }

    #[test]
    fn max_version_comes_from_the_v2_entry() {
        let document = json!({"versions": [
            {"id": "v1.0", "version": "", "min_version": ""},
            {"id": "v2.0", "version": "2.65", "min_version": "2.0", "status": "CURRENT"}
        ]});
        assert_eq!(max_version(&document), Some(Microversion(2, 65)));
        assert!(Microversion(2, 9) < Microversion(2, 37));
    }

    #[test]
    fn share_type_specs_accept_manila_spellings() {
        let share_type: ShareType = serde_json::from_value(json!({
            "id": "1", "name": "default",
            "extra_specs": {"snapshot_support": "True", "create_share_from_snapshot_support": "<is> False"}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(share_type.spec_enabled("snapshot_support"));
        assert!(!share_type.spec_enabled("create_share_from_snapshot_support"));
        assert!(!share_type.spec_enabled("missing"));
    }
}
