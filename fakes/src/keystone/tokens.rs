//! Tokens: the ones issued ([`KeystoneState`]), how a new one is issued, and the token
//! document Keystone answers with.

use std::collections::{HashMap, VecDeque};

use chrono::{DateTime, Duration as ChronoDuration, SecondsFormat, Utc};
use serde_json::{Value, json};
use wiremock::http::HeaderMap;

use super::unauthorized;
use crate::catalog::{catalog, stable_id};
use crate::config::CloudConfig;
use crate::journal::JOURNAL_LIMIT;
use crate::reply::Reply;

/// An issued Keystone token.
#[derive(Debug, Clone)]
pub(crate) struct Token {
    pub issued_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub method: &'static str,
    /// Scoped to the project (carries a catalog); unscoped tokens cannot call Manila.
    pub scoped: bool,
    /// The user's roles make it a Manila administrator.
    pub admin: bool,
    /// Issued to the seed's administrator user ([`crate::config::Account::admin`]).
    pub admin_user: bool,
}

/// The tokens of one cloud.
#[derive(Debug, Default)]
pub(crate) struct KeystoneState {
    /// The tokens issued, by id (revoked ones removed; a reset forgets them all).
    pub tokens: HashMap<String, Token>,
    /// The ids of the newest [`JOURNAL_LIMIT`] tokens issued, expired or revoked ones too
    /// (kept by a reset): what a test looks for in logs.
    pub issued: VecDeque<String>,
}

/// What a successful authentication grants: the token's method and scope.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Grant {
    /// No scope: no catalog, cannot call Manila.
    Unscoped,
    /// The account's project.
    Project,
    /// The account's domain: a catalog, but no project, so Manila refuses it.
    Domain,
    /// The account's project through the trust, as the trustee.
    Trust,
}

impl Grant {
    /// Whether the token may call Manila (it has the project).
    pub(super) fn scoped(&self) -> bool {
        matches!(self, Grant::Project | Grant::Trust)
    }
}

impl KeystoneState {
    /// Checks `X-Auth-Token`: an unexpired, project-scoped token; `Err` is the 401 to answer.
    pub(crate) fn authenticate(&self, base_url: &str, headers: &HeaderMap) -> Result<Token, Reply> {
        let token = headers
            .get("X-Auth-Token")
            .and_then(|v| v.to_str().ok())
            .and_then(|t| self.tokens.get(t));
        match token {
            Some(t) if t.expires_at > Utc::now() && t.scoped => Ok(t.clone()),
            _ => Err(unauthorized(base_url)),
        }
    }

    /// Makes every issued token expired.
    pub(crate) fn expire_all(&mut self) {
        let past = Utc::now() - ChronoDuration::seconds(1);
        for t in self.tokens.values_mut() {
            t.expires_at = past;
        }
    }

    /// Keeps a new token, and its id among the newest issued.
    pub(super) fn remember(&mut self, id: String, token: Token) {
        self.tokens.insert(id.clone(), token);
        if self.issued.len() >= JOURNAL_LIMIT {
            self.issued.pop_front();
        }
        self.issued.push_back(id);
    }
}

fn keystone_time(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// The token document. A validated token (`GET /v3/auth/tokens`) is shown with the grant
/// its `scoped` flag implies: project or none (the stored token keeps no more).
pub(super) fn token_body(
    config: &CloudConfig,
    base_url: &str,
    token: &Token,
    grant: &Grant,
) -> Value {
    let admin = token
        .admin_user
        .then(|| config.account.as_admin())
        .flatten();
    let a = admin.as_ref().unwrap_or(&config.account);
    let domain = json!({"id": a.domain_id, "name": a.domain_name});
    let user = match (grant, &a.trustee) {
        (Grant::Trust, Some(t)) => json!({"id": t.user_id, "name": t.user_name}),
        _ => json!({"id": a.user_id, "name": a.user_name}),
    };
    let mut body = json!({
        "methods": [token.method],
        "user": user,
        "audit_ids": [uuid::Uuid::new_v4().simple().to_string()[..22].to_owned()],
        "issued_at": keystone_time(&token.issued_at),
        "expires_at": keystone_time(&token.expires_at),
    });
    body["user"]["domain"] = domain.clone();
    body["user"]["password_expires_at"] = Value::Null;
    let roles: Value = a
        .roles
        .iter()
        .map(|r| json!({"id": stable_id(r), "name": r}))
        .collect();
    match grant {
        Grant::Unscoped => {}
        Grant::Project | Grant::Trust => {
            body["project"] = json!({"id": a.project_id, "name": a.project_name, "domain": domain});
            body["is_domain"] = json!(false);
            body["roles"] = roles;
            body["catalog"] = catalog(config, base_url);
        }
        Grant::Domain => {
            body["domain"] = domain;
            body["roles"] = roles;
            body["catalog"] = catalog(config, base_url);
        }
    }
    if let (Grant::Trust, Some(t)) = (grant, &a.trustee) {
        body["OS-TRUST:trust"] = json!({
            "id": t.trust_id,
            "impersonation": false,
            "trustee_user": {"id": t.user_id},
            "trustor_user": {"id": a.user_id},
        });
    }
    if token.method == "application_credential"
        && let Some(cred) = &a.application_credential
    {
        body["application_credential"] =
            json!({"id": cred.id, "name": cred.name, "restricted": true});
    }
    json!({"token": body})
}
