//! Keystone v3: one token for the configured credentials, and the endpoints of Cinder and
//! Nova from its catalog.

use serde_json::{Value, json};

use crate::cloud_config::{Global, Secret};
use crate::error::{Error, Result};
use crate::openstack::fault_message;

/// A token and the endpoints its catalog lists for this driver.
#[derive(Clone, Debug)]
pub struct Session {
    /// `X-Auth-Token`.
    pub token: Secret,
    /// Cinder v3 (`volumev3` or `block-storage`).
    pub cinder_url: String,
    /// Nova (`compute`).
    pub nova_url: String,
}

/// The Keystone auth request body for `global`'s credentials (secrets inside: never log it).
pub fn auth_body(global: &Global) -> Value {
    if let Some(secret) = &global.application_credential_secret {
        let mut credential = json!({ "secret": secret.expose() });
        if let Some(id) = &global.application_credential_id {
            credential["id"] = json!(id);
        } else {
            credential["name"] = json!(global.application_credential_name);
            credential["user"] = user(global);
        }
        return json!({"auth": {"identity": {
            "methods": ["application_credential"],
            "application_credential": credential,
        }}});
    }
    let mut password_user = user(global);
    password_user["password"] = json!(global.password.as_ref().map(Secret::expose));
    let mut auth = json!({"identity": {
        "methods": ["password"],
        "password": { "user": password_user },
    }});
    let project = match (&global.project_id, &global.project_name) {
        (Some(id), _) => Some(json!({ "id": id })),
        (None, Some(name)) => {
            let domain = match (
                &global.project_domain_id,
                &global.project_domain_name,
                &global.domain_id,
                &global.domain_name,
            ) {
                (Some(id), ..) => json!({ "id": id }),
                (None, Some(name), ..) => json!({ "name": name }),
                (None, None, Some(id), _) => json!({ "id": id }),
                (None, None, None, Some(name)) => json!({ "name": name }),
                _ => json!({ "id": "default" }),
            };
            Some(json!({ "name": name, "domain": domain }))
        }
        (None, None) => None,
    };
    if let Some(project) = project {
        auth["scope"] = json!({ "project": project });
    }
    json!({ "auth": auth })
}

fn user(global: &Global) -> Value {
    if let Some(id) = &global.user_id {
        return json!({ "id": id });
    }
    let domain = match (
        &global.user_domain_id,
        &global.user_domain_name,
        &global.domain_id,
        &global.domain_name,
    ) {
        (Some(id), ..) => json!({ "id": id }),
        (None, Some(name), ..) => json!({ "name": name }),
        (None, None, Some(id), _) => json!({ "id": id }),
        (None, None, None, Some(name)) => json!({ "name": name }),
        _ => json!({ "id": "default" }),
    };
    json!({ "name": global.username, "domain": domain })
}

/// `auth-url` with `/v3` (Keystone's v3 root).
pub fn v3_root(auth_url: &str) -> String {
    let trimmed = auth_url.trim_end_matches('/');
    if trimmed.ends_with("/v3") {
        trimmed.to_string()
    } else {
        format!("{trimmed}/v3")
    }
}

/// Authenticates and looks Cinder and Nova up in the catalog.
pub async fn authenticate(http: &reqwest::Client, global: &Global) -> Result<Session> {
    let url = format!("{}/auth/tokens", v3_root(&global.auth_url));
    let response = http
        .post(&url)
        .json(&auth_body(global))
        .send()
        .await
        .map_err(|e| Error::Unreachable {
            service: "Keystone",
            url: url.clone(),
            reason: e.to_string(),
        })?;
    let status = response.status();
    let token = response
        .headers()
        .get("x-subject-token")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body: Value = response.json().await.unwrap_or(Value::Null);
    if status.as_u16() == 401 {
        return Err(Error::Unauthenticated(format!(
            "Keystone at {url} refused the credentials of [Global]: {}",
            fault_message(&body)
        )));
    }
    if !status.is_success() {
        return Err(Error::Api {
            service: "Keystone",
            method: "POST".into(),
            path: "/v3/auth/tokens".into(),
            status: status.as_u16(),
            message: fault_message(&body),
        });
    }
    let token = token.ok_or_else(|| Error::Decode {
        service: "Keystone",
        path: "/v3/auth/tokens".into(),
        reason: "no X-Subject-Token header".into(),
    })?;
    let catalog = &body["token"]["catalog"];
    let region = global.region.as_deref();
    let cinder_url = endpoint(
        catalog,
        &["volumev3", "block-storage"],
        &global.interface,
        region,
    )?;
    let nova_url = endpoint(catalog, &["compute"], &global.interface, region)?;
    Ok(Session {
        token: Secret::new(token),
        cinder_url,
        nova_url,
    })
}

/// The URL of the first service of `types` in `catalog` with `interface` (and `region`).
pub fn endpoint(
    catalog: &Value,
    types: &[&str],
    interface: &str,
    region: Option<&str>,
) -> Result<String> {
    let services = catalog.as_array().map(Vec::as_slice).unwrap_or_default();
    for kind in types {
        for service in services.iter().filter(|s| s["type"] == *kind) {
            let endpoints = service["endpoints"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default();
            let found = endpoints.iter().find(|e| {
                e["interface"] == interface
                    && region.is_none_or(|r| e["region_id"] == r || e["region"] == r)
            });
            if let Some(url) = found.and_then(|e| e["url"].as_str()) {
                return Ok(url.trim_end_matches('/').to_string());
            }
        }
    }
    Err(Error::NotInCatalog(format!(
        "the Keystone catalog has no {} endpoint with interface {interface}{}",
        types.join(" or "),
        region
            .map(|r| format!(" in region {r}"))
            .unwrap_or_default()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn global() -> Global {
        Global {
            auth_url: "http://k:5000".into(),
            username: Some("alice".into()),
            password: Some(Secret::new("pw")),
            project_name: Some("demo".into()),
            domain_name: Some("Default".into()),
            interface: "public".into(),
            ..Global::default()
        }
    }

    #[test]
    fn password_auth_is_scoped_to_the_project() {
        let body = auth_body(&global());
        assert_eq!(
            body["auth"]["identity"]["password"]["user"]["name"],
            "alice"
        );
        assert_eq!(
            body["auth"]["identity"]["password"]["user"]["domain"]["name"],
            "Default"
        );
        assert_eq!(body["auth"]["scope"]["project"]["name"], "demo");
        assert_eq!(
            body["auth"]["scope"]["project"]["domain"]["name"],
            "Default"
        );
    }

    #[test]
    fn application_credentials_are_not_scoped() {
        let mut g = global();
        g.application_credential_id = Some("ac".into());
        g.application_credential_secret = Some(Secret::new("s"));
        let body = auth_body(&g);
        assert_eq!(
            body["auth"]["identity"]["methods"][0],
            "application_credential"
        );
        assert_eq!(
            body["auth"]["identity"]["application_credential"]["id"],
            "ac"
        );
        assert!(body["auth"].get("scope").is_none());
    }

    #[test]
    fn v3_is_appended_once() {
        assert_eq!(v3_root("http://k:5000"), "http://k:5000/v3");
        assert_eq!(v3_root("http://k:5000/v3/"), "http://k:5000/v3");
    }

    #[test]
    fn catalog_lookup_prefers_volumev3_and_honours_region() -> Result<()> {
        let catalog = json!([
            {"type": "block-storage", "endpoints": [{"interface": "public", "region_id": "R1", "url": "http://bs/v3/p"}]},
            {"type": "volumev3", "endpoints": [
                {"interface": "internal", "region_id": "R1", "url": "http://internal"},
                {"interface": "public", "region_id": "R2", "url": "http://r2/v3/p"},
                {"interface": "public", "region_id": "R1", "url": "http://r1/v3/p/"}]},
        ]);
        assert_eq!(
            endpoint(
                &catalog,
                &["volumev3", "block-storage"],
                "public",
                Some("R1")
            )?,
            "http://r1/v3/p"
        );
        let missing = endpoint(&catalog, &["compute"], "public", None)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(missing.contains("no compute endpoint"), "{missing}");
        Ok(())
    }
}
