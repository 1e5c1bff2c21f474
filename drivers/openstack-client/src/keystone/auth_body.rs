//! The body of Keystone's `POST /v3/auth/tokens` for a set of [`Credentials`]: password,
//! application credential or token identity, scoped to a trust, a project or a domain.
//! It carries the secrets: never log it.

use serde_json::{Value, json};

use crate::credentials::{AuthMethod, Credentials};

/// The auth request for `credentials`. Application credentials carry their own scope; the
/// others are scoped to the trust, else the project, else the domain, if any is given.
pub fn auth_body(credentials: &Credentials) -> Value {
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
    let (identity, scoped) = match &credentials.method {
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
    let scope = &credentials.scope;
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::HashMap;

    use super::*;
    use crate::credentials::Environment;

    fn body(secrets: &[(&str, &str)]) -> Value {
        let secrets: HashMap<String, String> = secrets
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let credentials = Credentials::from_secrets(&secrets, &Environment::default()).unwrap();
        auth_body(&credentials)
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
