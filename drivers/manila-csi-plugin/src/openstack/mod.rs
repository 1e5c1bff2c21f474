//! OpenStack access from CSI secrets: credentials, Keystone session, Manila client, and a
//! connector that reuses one authenticated client per set of credentials.

pub mod credentials;
mod http;
pub mod keystone;
pub mod manila;
pub mod model;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub use credentials::{Credentials, Secret};
pub use manila::ManilaClient;

use crate::error::{Error, Result};

/// Builds (and caches) Manila clients from request secrets. Clients are cached per distinct
/// credentials so the Keystone token is reused across calls and renewed on 401.
#[derive(Debug)]
pub struct Connector {
    user_agent: String,
    clients: Mutex<HashMap<String, Arc<ManilaClient>>>,
}

impl Connector {
    /// A connector whose requests carry `user_agent`.
    pub fn new(user_agent: String) -> Self {
        Connector {
            user_agent,
            clients: Mutex::new(HashMap::new()),
        }
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
                let client = Arc::new(ManilaClient::new(keystone::Session::new(http, credentials)));
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
