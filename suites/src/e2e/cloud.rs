//! Reading the fake cloud's shares and snapshots as a client would: through Keystone and
//! Manila over HTTP(S) (the in-process handle reports only what is left, not sizes or
//! zones); and Manila's admin `reset_status`, what a cloud operator does about a stuck
//! resource.

use std::collections::BTreeMap;

use fakes::FakeCloud;
use serde::Deserialize;

use super::error::{Error, Result};

/// The Manila microversion the inspector speaks (also that of `reset_status` without `os-`).
const MICROVERSION: &str = "2.45";

/// A share as Manila reports it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Share {
    /// Its id (the CSI volume id).
    pub id: String,
    /// Its name (the PV name for provisioned volumes).
    pub name: Option<String>,
    /// Size in GiB.
    pub size: u64,
    /// `available`, `extending`, …
    pub status: String,
    /// Its availability zone.
    pub availability_zone: Option<String>,
    /// The snapshot it was created from.
    pub snapshot_id: Option<String>,
    /// Its metadata (the PVC name and namespace with `--extra-create-metadata`).
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

/// A share snapshot as Manila reports it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Snapshot {
    /// Its id (the CSI snapshot id).
    pub id: String,
    /// Its name.
    pub name: Option<String>,
    /// The share it copies.
    pub share_id: String,
    /// `available`, `creating`, …
    pub status: String,
}

/// A client of the fake cloud's Manila API as the seed's administrator (a cloud operator:
/// `reset_status` is admin-only), or the seed account when the seed has none.
#[derive(Debug, Clone)]
pub struct CloudInspector {
    http: reqwest::Client,
    auth_url: String,
    manila_url: String,
    account: fakes::config::Account,
}

impl CloudInspector {
    /// An inspector of `cloud` (trusting its CA when it speaks TLS).
    pub fn new(cloud: &FakeCloud) -> Result<Self> {
        let mut builder = reqwest::Client::builder().timeout(std::time::Duration::from_secs(30));
        if let Some(pem) = cloud.ca_pem() {
            let ca = reqwest::Certificate::from_pem(pem.as_bytes())
                .map_err(|e| Error::Unexpected(format!("the fake cloud's CA: {e}")))?;
            builder = builder.add_root_certificate(ca);
        }
        Ok(CloudInspector {
            http: builder
                .build()
                .map_err(|e| Error::Unexpected(format!("an HTTP client: {e}")))?,
            auth_url: cloud.auth_url(),
            manila_url: cloud.manila_url(),
            account: {
                let account = cloud.account();
                account.as_admin().unwrap_or(account)
            },
        })
    }

    /// Manila's admin `reset_status` of the share or snapshot `id` (`collection` is `shares`
    /// or `snapshots`) to `status`.
    pub async fn reset_status(&self, collection: &str, id: &str, status: &str) -> Result<()> {
        let token = self.token().await?;
        let url = format!(
            "{}/{collection}/{id}/action",
            self.manila_url.trim_end_matches('/')
        );
        let response = self
            .http
            .post(&url)
            .header("X-Auth-Token", token)
            .header("X-OpenStack-Manila-API-Version", MICROVERSION)
            .json(&serde_json::json!({"reset_status": {"status": status}}))
            .send()
            .await
            .map_err(|e| Error::Unexpected(format!("POST {url}: {e}")))?;
        let code = response.status();
        if !code.is_success() {
            let text = response.text().await.unwrap_or_default();
            return Err(Error::Unexpected(format!(
                "reset_status of {collection} {id} to {status}: HTTP {code} {text}"
            )));
        }
        Ok(())
    }

    async fn token(&self) -> Result<String> {
        let body = serde_json::json!({
            "auth": {
                "identity": {
                    "methods": ["password"],
                    "password": {"user": {
                        "name": self.account.user_name,
                        "domain": {"name": self.account.domain_name},
                        "password": self.account.password.expose(),
                    }},
                },
                "scope": {"project": {
                    "name": self.account.project_name,
                    "domain": {"name": self.account.domain_name},
                }},
            }
        });
        let url = format!("{}/auth/tokens", self.auth_url.trim_end_matches('/'));
        let response = self
            .http
            .post(&url)
            .json(&body)
            .send()
            .await
            .map_err(|e| Error::Unexpected(format!("POST {url}: {e}")))?;
        if !response.status().is_success() {
            return Err(Error::Unexpected(format!(
                "POST {url} answered {}",
                response.status()
            )));
        }
        response
            .headers()
            .get("X-Subject-Token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
            .ok_or_else(|| Error::Unexpected(format!("POST {url}: no X-Subject-Token")))
    }

    async fn get(&self, path: &str) -> Result<Option<serde_json::Value>> {
        let token = self.token().await?;
        let url = format!("{}/{path}", self.manila_url.trim_end_matches('/'));
        let response = self
            .http
            .get(&url)
            .header("X-Auth-Token", token)
            .header("X-OpenStack-Manila-API-Version", MICROVERSION)
            .send()
            .await
            .map_err(|e| Error::Unexpected(format!("GET {url}: {e}")))?;
        if response.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !response.status().is_success() {
            return Err(Error::Unexpected(format!(
                "GET {url} answered {}",
                response.status()
            )));
        }
        response
            .json()
            .await
            .map(Some)
            .map_err(|e| Error::Unexpected(format!("GET {url}: {e}")))
    }

    /// The share `id`, if it exists.
    pub async fn share(&self, id: &str) -> Result<Option<Share>> {
        match self.get(&format!("shares/{id}")).await? {
            Some(mut body) => decode(body["share"].take(), "share").map(Some),
            None => Ok(None),
        }
    }

    /// Every share.
    pub async fn shares(&self) -> Result<Vec<Share>> {
        match self.get("shares/detail").await? {
            Some(mut body) => decode(body["shares"].take(), "shares"),
            None => Ok(Vec::new()),
        }
    }

    /// Every snapshot.
    pub async fn snapshots(&self) -> Result<Vec<Snapshot>> {
        match self.get("snapshots/detail").await? {
            Some(mut body) => decode(body["snapshots"].take(), "snapshots"),
            None => Ok(Vec::new()),
        }
    }
}

fn decode<T: serde::de::DeserializeOwned>(value: serde_json::Value, what: &str) -> Result<T> {
    serde_json::from_value(value)
        .map_err(|e| Error::Unexpected(format!("decoding Manila's {what}: {e}")))
}
