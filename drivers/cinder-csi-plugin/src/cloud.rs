//! The cloud of `[Global]`: the shared OpenStack client's [`Credentials`] made from the INI
//! keys, and the Cinder/Nova connection built on them.
//!
//! Upstream's domain rules apply: the user's and the project's domain fall back to
//! `domain-id`/`domain-name`, then to the `default` domain id; application credentials carry
//! their own scope; a password identity is scoped to the project when one is named.

use std::time::Duration;

use openstack_client::credentials::{AuthMethod, Scope, TlsOptions};
use openstack_client::{BlockStorageCloud, Credentials, Secret};

use crate::cloud_config::Global;
use crate::error::{Error, Result};

/// What requests to the cloud carry as `User-Agent`.
const USER_AGENT: &str = concat!("cinder-csi-plugin/", env!("CARGO_PKG_VERSION"));

/// How long one Keystone authentication may take (the driver's request timeout).
const AUTH_TIMEOUT: Duration = Duration::from_secs(60);

/// A client for `global`'s cloud (no request is made yet). The `ca-file` is read here, so
/// that its errors name the file and `[Global]`'s key.
pub fn connect(global: Global) -> Result<BlockStorageCloud> {
    let mut credentials = credentials(&global);
    if let Some(file) = credentials.tls.ca_file.take() {
        let config_error = |reason: String| Error::Config {
            file: file.display().to_string(),
            reason,
        };
        let pem = std::fs::read_to_string(&file)
            .map_err(|e| config_error(format!("[Global] ca-file cannot be read: {e}")))?;
        credentials.tls.ca_pem = Some(pem);
        return BlockStorageCloud::connect(credentials, USER_AGENT, AUTH_TIMEOUT).map_err(
            |e| match e {
                openstack_client::Error::InvalidArgument(reason) => {
                    config_error(format!("[Global] ca-file is not PEM: {reason}"))
                }
                other => Error::from(other),
            },
        );
    }
    Ok(BlockStorageCloud::connect(
        credentials,
        USER_AGENT,
        AUTH_TIMEOUT,
    )?)
}

/// The domain of a user or project: its own id or name, else `[Global]`'s domain, else
/// the `default` domain id. Exactly one of (id, name) is set.
fn domain(
    own_id: &Option<String>,
    own_name: &Option<String>,
    global: &Global,
) -> (Option<String>, Option<String>) {
    match (own_id, own_name, &global.domain_id, &global.domain_name) {
        (Some(id), ..) => (Some(id.clone()), None),
        (None, Some(name), ..) => (None, Some(name.clone())),
        (None, None, Some(id), _) => (Some(id.clone()), None),
        (None, None, None, Some(name)) => (None, Some(name.clone())),
        _ => (Some("default".into()), None),
    }
}

/// The Keystone credentials of `[Global]`.
pub fn credentials(global: &Global) -> Credentials {
    let (user_domain_id, user_domain_name) =
        domain(&global.user_domain_id, &global.user_domain_name, global);
    let method = match &global.application_credential_secret {
        Some(secret) => AuthMethod::ApplicationCredential {
            id: global.application_credential_id.clone(),
            name: global.application_credential_name.clone(),
            user_id: global.user_id.clone(),
            user_name: global.username.clone(),
            user_domain_id,
            user_domain_name,
            secret: secret.clone(),
        },
        None => AuthMethod::Password {
            user_id: global.user_id.clone(),
            user_name: global.username.clone(),
            user_domain_id,
            user_domain_name,
            password: global.password.clone().unwrap_or_else(|| Secret::new("")),
        },
    };
    let (project_domain_id, project_domain_name) = if global.project_name.is_some() {
        domain(
            &global.project_domain_id,
            &global.project_domain_name,
            global,
        )
    } else {
        (None, None)
    };
    Credentials {
        auth_url: global.auth_url.clone(),
        method,
        // No domain scope: a password identity without a project is unscoped.
        scope: Scope {
            project_id: global.project_id.clone(),
            project_name: global.project_name.clone(),
            project_domain_id,
            project_domain_name,
            ..Scope::default()
        },
        region: global.region.clone(),
        interface: global.interface.clone(),
        tls: TlsOptions {
            ca_file: global.ca_file.clone(),
            insecure: global.tls_insecure,
            ..TlsOptions::default()
        },
    }
}

#[cfg(test)]
mod tests {
    use openstack_client::keystone::auth_body;

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
        let body = auth_body(&credentials(&global()));
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
    fn without_any_domain_the_default_domain_id_is_used() {
        let body = auth_body(&credentials(&Global {
            domain_name: None,
            ..global()
        }));
        assert_eq!(
            body["auth"]["identity"]["password"]["user"]["domain"]["id"],
            "default"
        );
        assert_eq!(body["auth"]["scope"]["project"]["domain"]["id"], "default");
    }

    #[test]
    fn application_credentials_are_not_scoped() {
        let mut g = global();
        g.application_credential_id = Some("ac".into());
        g.application_credential_secret = Some(Secret::new("s"));
        let body = auth_body(&credentials(&g));
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
    fn a_bad_ca_file_is_a_config_error_naming_file_and_key() {
        let missing = connect(Global {
            ca_file: Some("/nonexistent/ca.pem".into()),
            ..global()
        })
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(
            missing.contains("/nonexistent/ca.pem") && missing.contains("[Global] ca-file"),
            "{missing}"
        );
        let dir = std::env::temp_dir().join(format!("cinder-ca-{}", std::process::id()));
        let written = std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(dir.join("ca.pem"), "not pem"));
        assert!(written.is_ok(), "{written:?}");
        let not_pem = connect(Global {
            ca_file: Some(dir.join("ca.pem")),
            ..global()
        })
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(not_pem.contains("is not PEM"), "{not_pem}");
    }
}
