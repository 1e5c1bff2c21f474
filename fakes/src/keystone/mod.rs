//! Keystone v3: version documents, password, token and application-credential
//! authentication ([`auth`]); project-, domain- and trust-scoped tokens (the account's trustee
//! with `OS-TRUST:trust`), their validation and revocation ([`tokens`]). The catalog a token
//! carries is built by [`crate::catalog`], so that Keystone does not depend on the services it
//! lists; the services depend on Keystone to check the tokens they are sent
//! ([`KeystoneState::authenticate`]).

mod auth;
mod tokens;

use chrono::{DateTime, Duration as ChronoDuration, Utc};
use serde_json::{Value, json};
use wiremock::Request;
use wiremock::http::Method;

use crate::catalog::KEYSTONE_PREFIX as PREFIX;
use crate::config::CloudConfig;
use crate::faults::{FaultAction, FaultTable, Operation};
use crate::reply::Reply;
pub(crate) use tokens::KeystoneState;
use tokens::{Grant, Token};

/// Keystone's error body: `{"error":{"code","title","message"}}`.
pub(crate) fn error(status: u16, message: &str) -> Reply {
    let title = match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        503 => "Service Unavailable",
        _ => "Internal Server Error",
    };
    Reply::json(
        status,
        json!({"error": {"code": status, "title": title, "message": message}}),
    )
}

/// The 401 every service answers for a missing, unknown or expired token (as
/// keystonemiddleware does in front of Manila).
pub(crate) fn unauthorized(base_url: &str) -> Reply {
    error(401, "The request you have made requires authentication.").header(
        "WWW-Authenticate",
        format!("Keystone uri=\"{base_url}{PREFIX}\""),
    )
}

fn version_v3(base: &str) -> Value {
    json!({
        "id": "v3.14",
        "status": "stable",
        "updated": "2020-04-07T00:00:00Z",
        "links": [{"rel": "self", "href": format!("{base}{PREFIX}/v3/")}],
        "media-types": [{"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}],
    })
}

/// Handles a request under [`PREFIX`]; `rest` is the path after it.
pub(crate) fn handle(
    state: &mut KeystoneState,
    config: &CloudConfig,
    base_url: &str,
    faults: &mut FaultTable,
    req: &Request,
    rest: &str,
) -> Reply {
    let rest = rest.trim_end_matches('/');
    let base = base_url;
    match (&req.method, rest) {
        (&Method::GET, "") => Reply::json(300, json!({"versions": {"values": [version_v3(base)]}})),
        (&Method::GET, "/v3") => Reply::json(200, json!({"version": version_v3(base)})),
        (&Method::POST, "/v3/auth/tokens") => {
            if let Some(fault) = faults.take(Operation::Auth, &[]) {
                match fault {
                    FaultAction::HttpError { status, message } => {
                        return error(status, message.as_deref().unwrap_or("Injected fault."));
                    }
                    FaultAction::Latency { ms } => {
                        let mut reply = issue(state, config, base_url, req);
                        reply.delay = Some(std::time::Duration::from_millis(ms));
                        return reply;
                    }
                    // Stuck/error make no sense for a synchronous call: treat as a failure.
                    FaultAction::Stuck { .. } | FaultAction::Error { .. } => {
                        return error(503, "Injected fault.");
                    }
                }
            }
            issue(state, config, base_url, req)
        }
        (&Method::GET, "/v3/auth/tokens") => {
            let subject = match subject_token(state, base, req) {
                Ok(subject) => subject,
                Err(reply) => return reply,
            };
            match subject.and_then(|s| state.tokens.get(s).map(|t| (s.to_owned(), t.clone()))) {
                Some((id, t)) if t.expires_at > Utc::now() => {
                    let grant = if t.scoped {
                        Grant::Project
                    } else {
                        Grant::Unscoped
                    };
                    Reply::json(200, tokens::token_body(config, base, &t, &grant))
                        .header("X-Subject-Token", id)
                }
                _ => error(404, "Could not find token."),
            }
        }
        (&Method::DELETE, "/v3/auth/tokens") => {
            let subject = match subject_token(state, base, req) {
                Ok(subject) => subject,
                Err(reply) => return reply,
            };
            match subject.and_then(|s| state.tokens.remove(s)) {
                Some(_) => Reply::empty(204),
                None => error(404, "Could not find token."),
            }
        }
        _ => error(404, "The resource could not be found."),
    }
}

/// `POST /v3/auth/tokens`: verifies the body and issues a token (201, its id in
/// `X-Subject-Token`).
/// The `X-Subject-Token` a validation or revocation is about, once the caller's own token
/// (`X-Auth-Token`) is checked (401 otherwise).
fn subject_token<'r>(
    state: &KeystoneState,
    base_url: &str,
    req: &'r Request,
) -> Result<Option<&'r str>, Reply> {
    if state.authenticate(base_url, &req.headers).is_err() {
        return Err(unauthorized(base_url));
    }
    Ok(req
        .headers
        .get("X-Subject-Token")
        .and_then(|v| v.to_str().ok()))
}

fn issue(state: &mut KeystoneState, config: &CloudConfig, base_url: &str, req: &Request) -> Reply {
    let body: Value = match serde_json::from_slice(&req.body) {
        Ok(v) => v,
        Err(e) => return error(400, &format!("The request body is not valid JSON: {e}")),
    };
    let (method, grant, admin_user) = match auth::verify(&config.account, state, &body) {
        Ok(m) => m,
        Err(reply) => return reply,
    };
    let now = Utc::now();
    // The lifetime is range-checked where it is set; saturate anyway rather than panic.
    let mut expires_at = i64::try_from(config.token_lifetime_secs)
        .ok()
        .and_then(ChronoDuration::try_seconds)
        .and_then(|lifetime| now.checked_add_signed(lifetime))
        .unwrap_or(DateTime::<Utc>::MAX_UTC);
    // A token made from a token expires no later than it (as Keystone does).
    if method == "token"
        && let Some(old) = body
            .pointer("/auth/identity/token/id")
            .and_then(Value::as_str)
            .and_then(|id| state.tokens.get(id))
    {
        expires_at = expires_at.min(old.expires_at);
    }
    let token = Token {
        issued_at: now,
        expires_at,
        method,
        scoped: grant.scoped(),
        admin: admin_user || config.account.is_admin(),
        admin_user,
    };
    let id = format!("gAAAA{}", uuid::Uuid::new_v4().simple());
    let body = tokens::token_body(config, base_url, &token, &grant);
    state.remember(id.clone(), token);
    Reply::json(201, body).header("X-Subject-Token", id)
}
