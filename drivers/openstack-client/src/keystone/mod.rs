//! A Keystone v3 session: authenticates with [`Credentials`], caches the token, picks the
//! endpoints its client needs from the catalog and re-authenticates when a service answers
//! 401. At most one authentication is in flight per session (per set of credentials).

pub mod auth_body;
pub mod catalog;

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use reqwest::{Method, StatusCode};
use serde::Deserialize;

pub use auth_body::auth_body;
pub use catalog::Catalog;

use crate::credentials::Credentials;
use crate::error::{Error, Result};
use crate::http::{error_for_response, transport_error};
use crate::secret::Secret;
use crate::single_flight::SingleFlight;

/// Tokens this close to expiry are renewed before use.
const EXPIRY_MARGIN: chrono::TimeDelta = chrono::TimeDelta::seconds(30);

/// How long one Keystone authentication may take, unless the caller says otherwise.
pub const DEFAULT_AUTH_TIMEOUT: Duration = Duration::from_secs(30);

/// Picks what a client needs from a new token's catalog (its service endpoints), given the
/// session's credentials (region, interface). An error fails the authentication.
pub type EndpointPicker<E> = fn(&Catalog, &Credentials) -> Result<E>;

/// A valid token and the endpoints its session's picker chose from its catalog.
#[derive(Clone, Debug)]
pub struct Token<E> {
    /// The `X-Subject-Token` value.
    pub value: Secret,
    /// `expires_at`, when Keystone sent one.
    pub expires_at: Option<DateTime<Utc>>,
    /// The service endpoints (see [`EndpointPicker`]).
    pub endpoints: E,
    /// A counter distinguishing tokens, so that a 401 only drops the token that failed.
    pub generation: u64,
}

/// One authenticated identity against one cloud, for a client whose endpoints are `E`.
///
/// Calls that need a token while one is being issued wait for it and share its outcome, so
/// a hanging Keystone costs every waiting call one `auth_timeout`, not one each in turn.
#[derive(Debug)]
pub struct Session<E> {
    http: reqwest::Client,
    credentials: Credentials,
    auth_timeout: Duration,
    pick_endpoints: EndpointPicker<E>,
    /// The cached token and the generation counter; never held across an await.
    cache: Mutex<TokenCache<E>>,
    authentication: SingleFlight<Token<E>>,
}

#[derive(Debug)]
struct TokenCache<E> {
    generation: u64,
    token: Option<Token<E>>,
}

#[derive(Deserialize)]
struct TokenBody {
    token: TokenInfo,
}

#[derive(Deserialize)]
struct TokenInfo {
    expires_at: Option<String>,
    #[serde(default)]
    catalog: Catalog,
}

impl<E: Clone + std::fmt::Debug> Session<E> {
    /// Builds a session; no network traffic happens until the first call. One
    /// authentication may take up to `auth_timeout`.
    pub fn new(
        http: reqwest::Client,
        credentials: Credentials,
        auth_timeout: Duration,
        pick_endpoints: EndpointPicker<E>,
    ) -> Self {
        Session {
            http,
            credentials,
            auth_timeout,
            pick_endpoints,
            cache: Mutex::new(TokenCache {
                generation: 0,
                token: None,
            }),
            authentication: SingleFlight::default(),
        }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, TokenCache<E>> {
        // The cache is only ever assigned whole: a panic elsewhere cannot leave it torn.
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The HTTP client (with the credentials' TLS settings).
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// The credentials the session authenticates with.
    pub fn credentials(&self) -> &Credentials {
        &self.credentials
    }

    /// A valid token: the cached one unless it is about to expire; otherwise the one the
    /// authentication in flight issues (started here if there is none).
    pub async fn token(&self) -> Result<Token<E>> {
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
    fn cached(&self) -> Option<Token<E>> {
        self.cache()
            .token
            .as_ref()
            .filter(|t| {
                t.expires_at
                    .is_none_or(|at| at - EXPIRY_MARGIN > Utc::now())
            })
            .cloned()
    }

    /// Drops `token` from the cache after `service` rejected it, unless a newer one has
    /// already replaced it.
    pub async fn invalidate(&self, token: &Token<E>, service: &str) {
        let mut cache = self.cache();
        if cache
            .token
            .as_ref()
            .is_some_and(|t| t.generation == token.generation)
        {
            tracing::info!("token rejected by {service}; re-authenticating");
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

    async fn authenticate(&self, generation: u64) -> Result<Token<E>> {
        let url = self.tokens_url();
        let response = self
            .http
            .request(Method::POST, &url)
            .json(&auth_body(&self.credentials))
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
        let endpoints = (self.pick_endpoints)(&body.token.catalog, &self.credentials)?;
        tracing::debug!(?endpoints, ?expires_at, "authenticated to Keystone");
        Ok(Token {
            value,
            expires_at,
            endpoints,
            generation,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::credentials::Environment;

    fn session(auth_url: &str) -> Result<Session<()>> {
        let secrets: HashMap<String, String> = [
            ("os-authURL", auth_url),
            ("os-userName", "u"),
            ("os-password", "p"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let credentials = Credentials::from_secrets(&secrets, &Environment::default())?;
        Ok(Session::new(
            reqwest::Client::new(),
            credentials,
            DEFAULT_AUTH_TIMEOUT,
            |_, _| Ok(()),
        ))
    }

    #[test]
    fn v3_is_appended_once() -> Result<()> {
        assert_eq!(
            session("http://k:5000")?.tokens_url(),
            "http://k:5000/v3/auth/tokens"
        );
        assert_eq!(
            session("http://k:5000/v3/")?.tokens_url(),
            "http://k:5000/v3/auth/tokens"
        );
        Ok(())
    }
}
