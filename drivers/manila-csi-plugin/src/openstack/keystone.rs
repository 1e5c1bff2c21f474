//! A Keystone v3 session: authenticates with [`Credentials`], caches the token, finds the
//! Manila endpoint in the catalog and re-authenticates when a service answers 401.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use reqwest::{Method, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

use super::credentials::{AuthMethod, Credentials, Secret};
use super::http::{error_for_response, transport_error};
use super::single_flight::SingleFlight;
use crate::error::{Error, Result};

/// Catalog types under which Manila may be registered, most specific first.
pub const MANILA_SERVICE_TYPES: [&str; 3] = ["shared-file-system", "sharev2", "share"];

/// Tokens this close to expiry are renewed before use.
const EXPIRY_MARGIN: chrono::TimeDelta = chrono::TimeDelta::seconds(30);

/// A valid token and the Manila endpoint from its catalog.
#[derive(Clone, Debug)]
pub struct Token {
    /// The `X-Subject-Token` value.
    pub value: Secret,
    /// `expires_at`, when Keystone sent one.
    pub expires_at: Option<DateTime<Utc>>,
    /// The Manila endpoint URL (no trailing slash).
    pub manila_url: String,
    /// A counter distinguishing tokens, so that a 401 only drops the token that failed.
    pub generation: u64,
}

/// How long one Keystone authentication may take, unless the connector says otherwise.
pub const DEFAULT_AUTH_TIMEOUT: Duration = Duration::from_secs(30);

/// One authenticated identity against one cloud.
///
/// At most one authentication is in flight per session (that is, per set of credentials):
/// calls that need a token while one is being issued wait for it and share its outcome, so
/// a hanging Keystone costs every waiting call one `auth_timeout`, not one each in turn.
#[derive(Debug)]
pub struct Session {
    http: reqwest::Client,
    credentials: Credentials,
    auth_timeout: Duration,
    /// The cached token and the generation counter; never held across an await.
    cache: Mutex<TokenCache>,
    authentication: SingleFlight<Token>,
}

#[derive(Debug, Default)]
struct TokenCache {
    generation: u64,
    token: Option<Token>,
}

#[derive(Deserialize)]
struct TokenBody {
    token: TokenInfo,
}

#[derive(Deserialize)]
struct TokenInfo {
    expires_at: Option<String>,
    #[serde(default)]
    catalog: Vec<CatalogEntry>,
}

#[derive(Deserialize)]
struct CatalogEntry {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    endpoints: Vec<Endpoint>,
}

#[derive(Deserialize)]
struct Endpoint {
    url: String,
    interface: String,
    region: Option<String>,
    region_id: Option<String>,
}

/// The Manila endpoint of `catalog` for `interface` (`public`, `internal`, `admin`, with or
/// without the old `URL` suffix) in `region` (any region when `None`). A region the catalog
/// does not list at all is named in the error with the regions it does list.
fn manila_endpoint(
    catalog: &[CatalogEntry],
    region: Option<&str>,
    interface: &str,
) -> Result<String> {
    let interface = interface.trim_end_matches("URL");
    let in_region = |endpoint: &Endpoint| {
        region.is_none_or(|r| {
            endpoint.region.as_deref() == Some(r) || endpoint.region_id.as_deref() == Some(r)
        })
    };
    let manila = || {
        MANILA_SERVICE_TYPES
            .iter()
            .flat_map(|kind| catalog.iter().filter(move |e| e.kind == *kind))
    };
    let found = manila()
        .flat_map(|entry| entry.endpoints.iter())
        .find(|endpoint| endpoint.interface == interface && in_region(endpoint));
    if let Some(endpoint) = found {
        return Ok(endpoint.url.trim_end_matches('/').to_string());
    }
    let mut regions: Vec<&str> = manila()
        .flat_map(|entry| entry.endpoints.iter())
        .filter_map(|e| e.region.as_deref().or(e.region_id.as_deref()))
        .collect();
    regions.sort_unstable();
    regions.dedup();
    if let Some(region) = region
        && !manila()
            .flat_map(|entry| entry.endpoints.iter())
            .any(in_region)
    {
        return Err(Error::NotInCatalog(format!(
            "os-region {region:?}: the Keystone catalog has no Manila endpoint (type {}) in that region; its Manila regions are: {}",
            MANILA_SERVICE_TYPES.join("/"),
            if regions.is_empty() {
                "none".to_string()
            } else {
                regions.join(", ")
            }
        )));
    }
    Err(Error::NotInCatalog(format!(
        "no Manila endpoint (type {}) with interface {interface:?} (os-endpointType){} in the Keystone catalog",
        MANILA_SERVICE_TYPES.join("/"),
        region
            .map(|r| format!(" in region {r:?}"))
            .unwrap_or_default()
    )))
}

impl Session {
    /// Builds a session; no network traffic happens until the first call. One
    /// authentication may take up to `auth_timeout`.
    pub fn new(http: reqwest::Client, credentials: Credentials, auth_timeout: Duration) -> Self {
        Session {
            http,
            credentials,
            auth_timeout,
            cache: Mutex::new(TokenCache::default()),
            authentication: SingleFlight::default(),
        }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, TokenCache> {
        // The cache is only ever assigned whole: a panic elsewhere cannot leave it torn.
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The HTTP client (with the credentials' TLS settings).
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// A valid token: the cached one unless it is about to expire; otherwise the one the
    /// authentication in flight issues (started here if there is none).
    pub async fn token(&self) -> Result<Token> {
        if let Some(token) = self.cached() {
            return Ok(token);
        }
        self.authentication
            .run(|| async {
                // A flight that finished just before this one started may have left a token.
                if let Some(token) = self.cached() {
                    return Ok(token);
                }
                let generation = {
                    let mut cache = self.cache();
                    cache.generation += 1;
                    cache.generation
                };
                let token = self.authenticate(generation).await?;
                self.cache().token = Some(token.clone());
                Ok(token)
            })
            .await
    }

    /// The cached token, unless it is missing or about to expire.
    fn cached(&self) -> Option<Token> {
        self.cache()
            .token
            .as_ref()
            .filter(|t| {
                t.expires_at
                    .is_none_or(|at| at - EXPIRY_MARGIN > Utc::now())
            })
            .cloned()
    }

    /// Drops `token` from the cache after a service rejected it, unless a newer one has
    /// already replaced it.
    pub async fn invalidate(&self, token: &Token) {
        let mut cache = self.cache();
        if cache
            .token
            .as_ref()
            .is_some_and(|t| t.generation == token.generation)
        {
            tracing::info!("token rejected by Manila; re-authenticating");
            cache.token = None;
        }
    }

    fn tokens_url(&self) -> String {
        let base = self.credentials.auth_url.trim_end_matches('/');
        if base.ends_with("/v3") {
            format!("{base}/auth/tokens")
        } else {
            format!("{base}/v3/auth/tokens")
        }
    }

    async fn authenticate(&self, generation: u64) -> Result<Token> {
        let url = self.tokens_url();
        let response = self
            .http
            .request(Method::POST, &url)
            .json(&self.auth_body())
            .timeout(self.auth_timeout)
            .send()
            .await
            .map_err(|e| transport_error("Keystone", &url, &e))?;
        let status = response.status();
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            let error = error_for_response("Keystone", "POST", "/v3/auth/tokens", response).await;
            return Err(Error::Unauthenticated(format!(
                "Keystone at {} rejected the credentials: {error}",
                self.credentials.auth_url
            )));
        }
        if !status.is_success() {
            return Err(error_for_response("Keystone", "POST", "/v3/auth/tokens", response).await);
        }
        let value = response
            .headers()
            .get("X-Subject-Token")
            .and_then(|v| v.to_str().ok())
            .map(Secret::new)
            .ok_or_else(|| Error::Decode {
                service: "Keystone",
                path: "/v3/auth/tokens".into(),
                reason: "no X-Subject-Token header".into(),
            })?;
        let body: TokenBody = response.json().await.map_err(|e| Error::Decode {
            service: "Keystone",
            path: "/v3/auth/tokens".into(),
            reason: e.to_string(),
        })?;
        let expires_at = body
            .token
            .expires_at
            .as_deref()
            .and_then(|at| DateTime::parse_from_rfc3339(at).ok())
            .map(|at| at.with_timezone(&Utc));
        let manila_url = self.manila_endpoint(&body.token.catalog)?;
        tracing::debug!(%manila_url, ?expires_at, "authenticated to Keystone");
        Ok(Token {
            value,
            expires_at,
            manila_url,
            generation,
        })
    }

    fn manila_endpoint(&self, catalog: &[CatalogEntry]) -> Result<String> {
        manila_endpoint(
            catalog,
            self.credentials.region.as_deref(),
            &self.credentials.interface,
        )
    }

    fn auth_body(&self) -> Value {
        let domain = |id: &Option<String>, name: &Option<String>| match (id, name) {
            (Some(id), _) => Some(json!({ "id": id })),
            (None, Some(name)) => Some(json!({ "name": name })),
            (None, None) => None,
        };
        let user = |id: &Option<String>, name: &Option<String>, did, dname| {
            let mut user = serde_json::Map::new();
            if let Some(id) = id {
                user.insert("id".into(), json!(id));
            } else if let Some(name) = name {
                user.insert("name".into(), json!(name));
                if let Some(domain) = domain(did, dname) {
                    user.insert("domain".into(), domain);
                }
            }
            user
        };
        let (identity, scoped) = match &self.credentials.method {
            AuthMethod::Password {
                user_id,
                user_name,
                user_domain_id,
                user_domain_name,
                password,
            } => {
                let mut user = user(user_id, user_name, user_domain_id, user_domain_name);
                user.insert("password".into(), json!(password.expose()));
                (
                    json!({ "methods": ["password"], "password": { "user": user } }),
                    true,
                )
            }
            AuthMethod::ApplicationCredential {
                id,
                name,
                user_id,
                user_name,
                user_domain_id,
                user_domain_name,
                secret,
            } => {
                let mut credential = serde_json::Map::new();
                if let Some(id) = id {
                    credential.insert("id".into(), json!(id));
                } else {
                    credential.insert("name".into(), json!(name));
                    credential.insert(
                        "user".into(),
                        Value::Object(user(user_id, user_name, user_domain_id, user_domain_name)),
                    );
                }
                credential.insert("secret".into(), json!(secret.expose()));
                // Application credentials carry their own scope.
                (
                    json!({ "methods": ["application_credential"], "application_credential": credential }),
                    false,
                )
            }
            AuthMethod::Token { token } => (
                json!({ "methods": ["token"], "token": { "id": token.expose() } }),
                true,
            ),
        };
        let scope = &self.credentials.scope;
        let scope = if !scoped {
            None
        } else if let Some(trust) = &scope.trust_id {
            Some(json!({ "OS-TRUST:trust": { "id": trust } }))
        } else if let Some(id) = &scope.project_id {
            Some(json!({ "project": { "id": id } }))
        } else if let Some(name) = &scope.project_name {
            let mut project = json!({ "name": name });
            if let Some(domain) = domain(&scope.project_domain_id, &scope.project_domain_name) {
                project["domain"] = domain;
            }
            Some(json!({ "project": project }))
        } else {
            domain(&scope.domain_id, &scope.domain_name).map(|domain| json!({ "domain": domain }))
        };
        let mut auth = json!({ "identity": identity });
        if let Some(scope) = scope {
            auth["scope"] = scope;
        }
        json!({ "auth": auth })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn catalog() -> Vec<CatalogEntry> {
        let endpoints = ["RegionOne", "RegionTwo"]
            .iter()
            .flat_map(|region| {
                ["public", "internal", "admin"]
                    .iter()
                    .map(move |interface| Endpoint {
                        url: format!("http://{region}-{interface}/v2/"),
                        interface: interface.to_string(),
                        region: Some(region.to_string()),
                        region_id: Some(region.to_string()),
                    })
            })
            .collect();
        vec![
            CatalogEntry {
                kind: "identity".into(),
                endpoints: Vec::new(),
            },
            CatalogEntry {
                kind: "sharev2".into(),
                endpoints,
            },
        ]
    }

    #[test]
    fn region_and_interface_pick_the_endpoint() {
        let catalog = catalog();
        assert_eq!(
            manila_endpoint(&catalog, Some("RegionTwo"), "internal").unwrap(),
            "http://RegionTwo-internal/v2"
        );
        assert_eq!(
            manila_endpoint(&catalog, Some("RegionOne"), "adminURL").unwrap(),
            "http://RegionOne-admin/v2"
        );
        assert_eq!(
            manila_endpoint(&catalog, None, "public").unwrap(),
            "http://RegionOne-public/v2"
        );
    }

    #[test]
    fn an_unknown_region_names_the_known_ones() {
        let error = manila_endpoint(&catalog(), Some("RegionNine"), "public")
            .unwrap_err()
            .to_string();
        assert!(error.contains("\"RegionNine\""), "{error}");
        assert!(error.contains("RegionOne, RegionTwo"), "{error}");
        let error = manila_endpoint(&catalog(), Some("RegionTwo"), "private")
            .unwrap_err()
            .to_string();
        assert!(error.contains("\"private\""), "{error}");
    }

    fn body(secrets: &[(&str, &str)]) -> Value {
        let secrets = secrets
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let env = super::super::credentials::Environment::default();
        let credentials = Credentials::from_secrets(&secrets, &env).unwrap();
        Session::new(reqwest::Client::new(), credentials, DEFAULT_AUTH_TIMEOUT).auth_body()
    }

    #[test]
    fn the_auth_body_carries_the_trust_the_token_and_the_domain_scope() {
        let trustee = body(&[
            ("os-authURL", "http://k/v3"),
            ("os-trustID", "t1"),
            ("os-trusteeID", "u1"),
            ("os-trusteePassword", "p1"),
            ("os-projectName", "ignored-for-the-trust"),
        ]);
        assert_eq!(
            trustee["auth"]["identity"]["password"]["user"],
            json!({"id": "u1", "password": "p1"})
        );
        assert_eq!(
            trustee["auth"]["scope"],
            json!({"OS-TRUST:trust": {"id": "t1"}})
        );
        let token = body(&[
            ("os-authURL", "http://k/v3"),
            ("os-token", "tok"),
            ("os-projectID", "p"),
        ]);
        assert_eq!(
            token["auth"]["identity"],
            json!({"methods": ["token"], "token": {"id": "tok"}})
        );
        assert_eq!(token["auth"]["scope"], json!({"project": {"id": "p"}}));
        let domain = body(&[
            ("os-authURL", "http://k/v3"),
            ("os-userName", "u"),
            ("os-password", "p"),
            ("os-domainName", "Default"),
        ]);
        assert_eq!(
            domain["auth"]["scope"],
            json!({"domain": {"name": "Default"}})
        );
    }
}
