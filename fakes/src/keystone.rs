//! Keystone v3: version documents, password, token and application-credential
//! authentication; project-, domain- and trust-scoped tokens (the account's trustee with
//! `OS-TRUST:trust`); token validation and revocation. The catalog a token carries is built by
//! [`crate::catalog`], so that Keystone does not depend on the services it lists.

use chrono::{Duration as ChronoDuration, SecondsFormat, Utc};
use serde_json::{Value, json};
use wiremock::Request;
use wiremock::http::{HeaderMap, Method};

use crate::catalog::{KEYSTONE_PREFIX as PREFIX, catalog, stable_id};
use crate::config::Account;
use crate::faults::{FaultAction, Operation};
use crate::reply::Reply;
use crate::state::{CloudState, Token};

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

/// Checks `X-Auth-Token`; `Err` is the 401 to answer.
pub(crate) fn authenticate(state: &CloudState, headers: &HeaderMap) -> Result<Token, Reply> {
    let token = headers
        .get("X-Auth-Token")
        .and_then(|v| v.to_str().ok())
        .and_then(|t| state.tokens.get(t));
    match token {
        Some(t) if t.expires_at > Utc::now() && t.scoped => Ok(t.clone()),
        _ => Err(unauthorized(&state.base_url)),
    }
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
pub(crate) fn handle(state: &mut CloudState, req: &Request, rest: &str) -> Reply {
    let rest = rest.trim_end_matches('/');
    let base = state.base_url.clone();
    match (&req.method, rest) {
        (&Method::GET, "") => {
            Reply::json(300, json!({"versions": {"values": [version_v3(&base)]}}))
        }
        (&Method::GET, "/v3") => Reply::json(200, json!({"version": version_v3(&base)})),
        (&Method::POST, "/v3/auth/tokens") => {
            if let Some(fault) = state.faults.take(Operation::Auth, &[]) {
                match fault {
                    FaultAction::HttpError { status, message } => {
                        return error(status, message.as_deref().unwrap_or("Injected fault."));
                    }
                    FaultAction::Latency { ms } => {
                        let mut reply = issue(state, req);
                        reply.delay = Some(std::time::Duration::from_millis(ms));
                        return reply;
                    }
                    // Stuck/error make no sense for a synchronous call: treat as a failure.
                    FaultAction::Stuck { .. } | FaultAction::Error { .. } => {
                        return error(503, "Injected fault.");
                    }
                }
            }
            issue(state, req)
        }
        (&Method::GET, "/v3/auth/tokens") => {
            if authenticate(state, &req.headers).is_err() {
                return unauthorized(&base);
            }
            let subject = req
                .headers
                .get("X-Subject-Token")
                .and_then(|v| v.to_str().ok());
            match subject.and_then(|s| state.tokens.get(s).map(|t| (s.to_owned(), t.clone()))) {
                Some((id, t)) if t.expires_at > Utc::now() => {
                    let grant = if t.scoped {
                        Grant::Project
                    } else {
                        Grant::Unscoped
                    };
                    Reply::json(200, token_body(state, &t, &grant)).header("X-Subject-Token", id)
                }
                _ => error(404, "Could not find token."),
            }
        }
        (&Method::DELETE, "/v3/auth/tokens") => {
            if authenticate(state, &req.headers).is_err() {
                return unauthorized(&base);
            }
            let subject = req
                .headers
                .get("X-Subject-Token")
                .and_then(|v| v.to_str().ok());
            match subject.and_then(|s| state.tokens.remove(s)) {
                Some(_) => Reply::empty(204),
                None => error(404, "Could not find token."),
            }
        }
        _ => error(404, "The resource could not be found."),
    }
}

/// What a successful authentication grants: the token's method and scope.
#[derive(Debug, Clone, PartialEq)]
enum Grant {
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
    fn scoped(&self) -> bool {
        matches!(self, Grant::Project | Grant::Trust)
    }
}

/// The grant of a scope object (`None`: the scope is not the account's).
fn grant_for(account: &Account, scope: Option<&Value>) -> Option<Grant> {
    match scope {
        None => Some(Grant::Unscoped),
        Some(scope) if scope.get("project").is_some() => {
            project_matches(account, scope).then_some(Grant::Project)
        }
        Some(scope) if scope.get("domain").is_some() => {
            domain_matches(account, scope.get("domain")).then_some(Grant::Domain)
        }
        Some(_) => None,
    }
}

/// Which authentication method succeeded, what it grants and whether the user is the
/// seed's administrator, or the error to answer.
fn verify(state: &CloudState, body: &Value) -> Result<(&'static str, Grant, bool), Reply> {
    let account = &state.config.account;
    let bad = |m: &str| Err(error(400, m));
    let Some(auth) = body.get("auth") else {
        return bad("Invalid input for field 'auth': 'auth' is a required property");
    };
    let Some(identity) = auth.get("identity") else {
        return bad("Invalid input for field 'identity': 'identity' is a required property");
    };
    let Some(methods) = identity.get("methods").and_then(Value::as_array) else {
        return bad("Invalid input for field 'identity/methods': 'methods' is a required property");
    };
    let denied = || {
        Err(error(
            401,
            "The request you have made requires authentication.",
        ))
    };
    let scope = auth.get("scope");
    let trust = scope.and_then(|s| s.get("OS-TRUST:trust"));
    let method = methods.first().and_then(Value::as_str).unwrap_or_default();
    match method {
        "password" => {
            let user = identity.pointer("/password/user");
            let Some(user) = user else {
                return bad(
                    "Invalid input for field 'identity/password/user': 'user' is a required property",
                );
            };
            let password = user.get("password").and_then(Value::as_str);
            if let Some(trust) = trust {
                // Only the trustee may use the trust, with its own password.
                let Some(trustee) = &account.trustee else {
                    return denied();
                };
                if password != Some(trustee.password.expose()) || !trustee_matches(account, user) {
                    return denied();
                }
                if trust.get("id").and_then(Value::as_str) != Some(trustee.trust_id.as_str()) {
                    return Err(error(404, "Could not find trust."));
                }
                return Ok(("password", Grant::Trust, false));
            }
            if let Some(admin) = account.as_admin()
                && user_matches(&admin, user)
            {
                if password != Some(admin.password.expose()) {
                    return denied();
                }
                return grant_for(account, scope)
                    .map_or_else(denied, |grant| Ok(("password", grant, true)));
            }
            if password != Some(account.password.expose()) || !user_matches(account, user) {
                return denied();
            }
            grant_for(account, scope).map_or_else(denied, |grant| Ok(("password", grant, false)))
        }
        "token" => {
            let Some(id) = identity.pointer("/token/id").and_then(Value::as_str) else {
                return bad(
                    "Invalid input for field 'identity/token/id': 'id' is a required property",
                );
            };
            let Some(known) = state.tokens.get(id).filter(|t| t.expires_at > Utc::now()) else {
                return denied();
            };
            if trust.is_some() {
                return denied();
            }
            // Without a scope the new token keeps the old one's (the driver re-uses a token
            // it was given); a scope must be the account's.
            let grant = match scope {
                None if known.scoped => Grant::Project,
                other => match grant_for(account, other) {
                    Some(grant) => grant,
                    None => return denied(),
                },
            };
            Ok(("token", grant, known.admin_user))
        }
        "application_credential" => {
            let Some(cred) = identity.get("application_credential") else {
                return bad(
                    "Invalid input for field 'identity/application_credential': 'application_credential' is a required property",
                );
            };
            let Some(known) = &account.application_credential else {
                return denied();
            };
            let secret_ok =
                cred.get("secret").and_then(Value::as_str) == Some(known.secret.expose());
            let id_ok = match cred.get("id").and_then(Value::as_str) {
                Some(id) => id == known.id,
                None => {
                    cred.get("name").and_then(Value::as_str) == Some(known.name.as_str())
                        && cred.get("user").is_some_and(|u| user_matches(account, u))
                }
            };
            // Application credentials carry their own scope; Keystone refuses another.
            if secret_ok && id_ok && scope.is_none() {
                Ok(("application_credential", Grant::Project, false))
            } else {
                denied()
            }
        }
        _ => denied(),
    }
}

/// The trustee named by id, or by name in the account's domain.
fn trustee_matches(account: &Account, user: &Value) -> bool {
    let Some(trustee) = &account.trustee else {
        return false;
    };
    match (
        user.get("id").and_then(Value::as_str),
        user.get("name").and_then(Value::as_str),
    ) {
        (Some(id), _) => id == trustee.user_id,
        (None, Some(name)) => {
            name == trustee.user_name && domain_matches(account, user.get("domain"))
        }
        _ => false,
    }
}

fn domain_matches(account: &Account, domain: Option<&Value>) -> bool {
    let Some(domain) = domain else { return false };
    match (
        domain.get("id").and_then(Value::as_str),
        domain.get("name").and_then(Value::as_str),
    ) {
        (Some(id), _) => id == account.domain_id,
        (None, Some(name)) => name == account.domain_name,
        _ => false,
    }
}

fn user_matches(account: &Account, user: &Value) -> bool {
    match (
        user.get("id").and_then(Value::as_str),
        user.get("name").and_then(Value::as_str),
    ) {
        (Some(id), _) => id == account.user_id,
        (None, Some(name)) => {
            name == account.user_name && domain_matches(account, user.get("domain"))
        }
        _ => false,
    }
}

fn project_matches(account: &Account, scope: &Value) -> bool {
    let Some(project) = scope.get("project") else {
        return false;
    };
    match (
        project.get("id").and_then(Value::as_str),
        project.get("name").and_then(Value::as_str),
    ) {
        (Some(id), _) => id == account.project_id,
        (None, Some(name)) => {
            name == account.project_name && domain_matches(account, project.get("domain"))
        }
        _ => false,
    }
}

fn issue(state: &mut CloudState, req: &Request) -> Reply {
    let body: Value = match serde_json::from_slice(&req.body) {
        Ok(v) => v,
        Err(e) => return error(400, &format!("The request body is not valid JSON: {e}")),
    };
    let (method, grant, admin_user) = match verify(state, &body) {
        Ok(m) => m,
        Err(reply) => return reply,
    };
    let now = Utc::now();
    // The lifetime is range-checked where it is set; saturate anyway rather than panic.
    let mut expires_at = i64::try_from(state.config.token_lifetime_secs)
        .ok()
        .and_then(ChronoDuration::try_seconds)
        .and_then(|lifetime| now.checked_add_signed(lifetime))
        .unwrap_or(chrono::DateTime::<Utc>::MAX_UTC);
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
        admin: admin_user || state.config.account.is_admin(),
        admin_user,
    };
    let id = format!("gAAAA{}", uuid::Uuid::new_v4().simple());
    let body = token_body(state, &token, &grant);
    state.tokens.insert(id.clone(), token);
    if state.issued_tokens.len() >= crate::state::JOURNAL_LIMIT {
        state.issued_tokens.pop_front();
    }
    state.issued_tokens.push_back(id.clone());
    Reply::json(201, body).header("X-Subject-Token", id)
}

fn keystone_time(t: &chrono::DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// The token document. A validated token (`GET /v3/auth/tokens`) is shown with the grant
/// its `scoped` flag implies: project or none (the stored token keeps no more).
fn token_body(state: &CloudState, token: &Token, grant: &Grant) -> Value {
    let admin = token
        .admin_user
        .then(|| state.config.account.as_admin())
        .flatten();
    let a = admin.as_ref().unwrap_or(&state.config.account);
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
            body["catalog"] = catalog(&state.config, &state.base_url);
        }
        Grant::Domain => {
            body["domain"] = domain;
            body["roles"] = roles;
            body["catalog"] = catalog(&state.config, &state.base_url);
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
