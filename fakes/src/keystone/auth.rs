//! Authentication: which method a `POST /v3/auth/tokens` body uses, whether its credentials
//! and scope are the account's, and what the new token is granted.

use chrono::Utc;
use serde_json::Value;

use super::error;
use super::tokens::{Grant, KeystoneState};
use crate::config::Account;
use crate::reply::Reply;

/// Which authentication method succeeded, what it grants and whether the user is the
/// seed's administrator, or the error to answer.
type Verified = Result<(&'static str, Grant, bool), Reply>;

/// Keystone's 400 for a body without a required property.
fn missing(message: &str) -> Reply {
    error(400, message)
}

/// Keystone's 401 for credentials that are not the account's.
fn denied() -> Reply {
    error(401, "The request you have made requires authentication.")
}

/// Verifies a `POST /v3/auth/tokens` body: its shape here, then the credentials of the
/// method it names (the first of `methods`).
pub(super) fn verify(account: &Account, keystone: &KeystoneState, body: &Value) -> Verified {
    let Some(auth) = body.get("auth") else {
        return Err(missing(
            "Invalid input for field 'auth': 'auth' is a required property",
        ));
    };
    let Some(identity) = auth.get("identity") else {
        return Err(missing(
            "Invalid input for field 'identity': 'identity' is a required property",
        ));
    };
    let Some(methods) = identity.get("methods").and_then(Value::as_array) else {
        return Err(missing(
            "Invalid input for field 'identity/methods': 'methods' is a required property",
        ));
    };
    let scope = auth.get("scope");
    match methods.first().and_then(Value::as_str).unwrap_or_default() {
        "password" => password(account, identity, scope),
        "token" => token(account, keystone, identity, scope),
        "application_credential" => application_credential(account, identity, scope),
        _ => Err(denied()),
    }
}

/// A user's password: the account's user (project, domain or no scope), its administrator,
/// or the trustee with a trust scope.
fn password(account: &Account, identity: &Value, scope: Option<&Value>) -> Verified {
    let Some(user) = identity.pointer("/password/user") else {
        return Err(missing(
            "Invalid input for field 'identity/password/user': 'user' is a required property",
        ));
    };
    let password = user.get("password").and_then(Value::as_str);
    if let Some(trust) = scope.and_then(|s| s.get("OS-TRUST:trust")) {
        // Only the trustee may use the trust, with its own password.
        let Some(trustee) = &account.trustee else {
            return Err(denied());
        };
        if password != Some(trustee.password.expose()) || !trustee_matches(account, user) {
            return Err(denied());
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
            return Err(denied());
        }
        return grant_for(account, scope)
            .map_or_else(|| Err(denied()), |grant| Ok(("password", grant, true)));
    }
    if password != Some(account.password.expose()) || !user_matches(account, user) {
        return Err(denied());
    }
    grant_for(account, scope).map_or_else(|| Err(denied()), |grant| Ok(("password", grant, false)))
}

/// An unexpired token, re-scoped to the scope given or keeping its own (no trust).
fn token(
    account: &Account,
    keystone: &KeystoneState,
    identity: &Value,
    scope: Option<&Value>,
) -> Verified {
    let Some(id) = identity.pointer("/token/id").and_then(Value::as_str) else {
        return Err(missing(
            "Invalid input for field 'identity/token/id': 'id' is a required property",
        ));
    };
    let Some(known) = keystone
        .tokens
        .get(id)
        .filter(|t| t.expires_at > Utc::now())
    else {
        return Err(denied());
    };
    if scope.and_then(|s| s.get("OS-TRUST:trust")).is_some() {
        return Err(denied());
    }
    // Without a scope the new token keeps the old one's (the driver re-uses a token it was
    // given); a scope must be the account's.
    let grant = match scope {
        None if known.scoped => Grant::Project,
        other => match grant_for(account, other) {
            Some(grant) => grant,
            None => return Err(denied()),
        },
    };
    Ok(("token", grant, known.admin_user))
}

/// The account's application credential (id + secret, or name + user + secret), with no
/// scope of the caller's.
fn application_credential(account: &Account, identity: &Value, scope: Option<&Value>) -> Verified {
    let Some(cred) = identity.get("application_credential") else {
        return Err(missing(
            "Invalid input for field 'identity/application_credential': 'application_credential' is a required property",
        ));
    };
    let Some(known) = &account.application_credential else {
        return Err(denied());
    };
    let secret_ok = cred.get("secret").and_then(Value::as_str) == Some(known.secret.expose());
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
        Err(denied())
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

/// Whether `value` (a user or project object) names the one with `id`, or `name` in the
/// account's domain.
fn names(account: &Account, value: &Value, id: &str, name: &str) -> bool {
    match (
        value.get("id").and_then(Value::as_str),
        value.get("name").and_then(Value::as_str),
    ) {
        (Some(given), _) => given == id,
        (None, Some(given)) => given == name && domain_matches(account, value.get("domain")),
        _ => false,
    }
}

/// The trustee named by id, or by name in the account's domain.
fn trustee_matches(account: &Account, user: &Value) -> bool {
    account
        .trustee
        .as_ref()
        .is_some_and(|t| names(account, user, &t.user_id, &t.user_name))
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
    names(account, user, &account.user_id, &account.user_name)
}

fn project_matches(account: &Account, scope: &Value) -> bool {
    scope
        .get("project")
        .is_some_and(|p| names(account, p, &account.project_id, &account.project_name))
}
