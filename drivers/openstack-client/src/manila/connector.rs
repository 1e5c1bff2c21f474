//! Builds (and caches) Manila clients from request secrets, one authenticated client per
//! set of credentials.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{ManilaClient, endpoint};
use crate::credentials::Credentials;
use crate::error::{Error, Result};
use crate::{http, keystone};

/// Builds (and caches) Manila clients from request secrets. Clients are cached per distinct
/// credentials so the Keystone token is reused across calls and renewed on 401.
///
/// Each cached client authenticates at most once at a time: concurrent calls with the same
/// credentials share one authentication (and its error), see [`keystone::Session`].
#[derive(Debug)]
pub struct Connector {
    user_agent: String,
    auth_timeout: Duration,
    clients: Mutex<HashMap<String, Arc<ManilaClient>>>,
}

impl Connector {
    /// A connector whose requests carry `user_agent`.
    pub fn new(user_agent: String) -> Self {
        Connector {
            user_agent,
            auth_timeout: keystone::DEFAULT_AUTH_TIMEOUT,
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// How long one Keystone authentication may take (default
    /// [`keystone::DEFAULT_AUTH_TIMEOUT`]).
    pub fn with_auth_timeout(mut self, timeout: Duration) -> Self {
        self.auth_timeout = timeout;
        self
    }

    /// A client for the identity in `secrets` (flat `os-*` keys or clouds.yaml mode). The
    /// version check runs here so that an unreachable or unsuitable cloud fails early.
    pub async fn connect(&self, secrets: &HashMap<String, String>) -> Result<Arc<ManilaClient>> {
        let credentials = Credentials::try_from(secrets)?;
        let key = credentials.cache_key();
        let cached = self
            .clients
            .lock()
            .map_err(|_| Error::Internal("client cache lock poisoned".into()))?
            .get(key.expose())
            .cloned();
        let client = match cached {
            Some(client) => client,
            None => {
                let http = http::build_client(&credentials.tls, &self.user_agent)?;
                let client = Arc::new(ManilaClient::new(keystone::Session::new(
                    http,
                    credentials,
                    self.auth_timeout,
                    endpoint::pick,
                )));
                self.clients
                    .lock()
                    .map_err(|_| Error::Internal("client cache lock poisoned".into()))?
                    .entry(key.expose().to_string())
                    .or_insert(client)
                    .clone()
            }
        };
        client.check_version().await?;
        Ok(client)
    }
}
