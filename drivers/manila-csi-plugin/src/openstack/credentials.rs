//! OpenStack credentials from a CSI request's secrets: the flat `os-*` keys, or clouds.yaml
//! when `os-useClouds` is `true`.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::PathBuf;

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use crate::error::{Error, Result};

/// A secret value that never prints.
#[derive(Clone)]
pub struct Secret(SecretString);

impl Secret {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(SecretString::from(value.into()))
    }

    /// The value, for putting on the wire only.
    pub fn expose(&self) -> &str {
        self.0.expose_secret()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl PartialEq for Secret {
    fn eq(&self, other: &Self) -> bool {
        self.expose() == other.expose()
    }
}

/// How the user is identified to Keystone.
#[derive(Clone, Debug, PartialEq)]
pub enum AuthMethod {
    /// Password auth; user by id, or by name within a domain.
    Password {
        /// `os-userID`.
        user_id: Option<String>,
        /// `os-userName`.
        user_name: Option<String>,
        /// User domain (`os-userDomainID`, falling back to `os-domainID`).
        user_domain_id: Option<String>,
        /// User domain name (`os-userDomainName`, falling back to `os-domainName`).
        user_domain_name: Option<String>,
        /// `os-password`.
        password: Secret,
    },
    /// Application credential by id, or by name plus user.
    ApplicationCredential {
        /// `os-applicationCredentialID`.
        id: Option<String>,
        /// `os-applicationCredentialName`.
        name: Option<String>,
        /// User for a name lookup (`os-userID` / `os-userName` + domain).
        user_id: Option<String>,
        /// See `user_id`.
        user_name: Option<String>,
        /// See `user_id`.
        user_domain_id: Option<String>,
        /// See `user_id`.
        user_domain_name: Option<String>,
        /// `os-applicationCredentialSecret`.
        secret: Secret,
    },
}

/// The token scope.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scope {
    /// `os-projectID`.
    pub project_id: Option<String>,
    /// `os-projectName`.
    pub project_name: Option<String>,
    /// Project domain id (`os-projectDomainID`, falling back to `os-domainID`).
    pub project_domain_id: Option<String>,
    /// Project domain name (`os-projectDomainName`, falling back to `os-domainName`).
    pub project_domain_name: Option<String>,
    /// `os-trustID`: scope to a trust instead of a project.
    pub trust_id: Option<String>,
}

/// TLS settings for talking to the cloud.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TlsOptions {
    /// `os-certAuthorityPath`: PEM bundle file.
    pub ca_file: Option<PathBuf>,
    /// `os-certAuthority`: inline PEM bundle.
    pub ca_pem: Option<String>,
    /// `os-TLSInsecure`: skip certificate verification.
    pub insecure: bool,
}

/// Everything needed to reach Manila for one set of secrets.
#[derive(Clone, Debug, PartialEq)]
pub struct Credentials {
    /// Keystone URL (`os-authURL`), e.g. `https://keystone:5000/v3`.
    pub auth_url: String,
    /// How to authenticate.
    pub method: AuthMethod,
    /// What to scope the token to.
    pub scope: Scope,
    /// Catalog region (`os-region`); empty matches any.
    pub region: Option<String>,
    /// Catalog interface (`os-endpointType`), default `public`.
    pub interface: String,
    /// TLS settings.
    pub tls: TlsOptions,
}

impl Credentials {
    /// A stable key identifying these credentials (for the client cache). It contains the
    /// secrets, so it is itself kept in a [`Secret`].
    pub fn cache_key(&self) -> Secret {
        let (kind, secret) = match &self.method {
            AuthMethod::Password { password, .. } => ("password", password.expose()),
            AuthMethod::ApplicationCredential { secret, .. } => ("appcred", secret.expose()),
        };
        Secret::new(format!("{self:?}|{kind}|{secret}"))
    }
}

impl TryFrom<&HashMap<String, String>> for Credentials {
    type Error = Error;

    fn try_from(secrets: &HashMap<String, String>) -> Result<Self> {
        if secrets.is_empty() {
            return Err(Error::InvalidArgument(
                "secrets are required: the request carries no OpenStack credentials (os-* keys)"
                    .into(),
            ));
        }
        let get = |key: &str| {
            secrets
                .get(key)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        if get("os-useClouds").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            return from_clouds_yaml(&get);
        }
        let tls = TlsOptions {
            ca_file: get("os-certAuthorityPath").map(PathBuf::from),
            ca_pem: get("os-certAuthority"),
            insecure: parse_secret_bool("os-TLSInsecure", get("os-TLSInsecure"))?,
        };
        let auth_url = get("os-authURL")
            .ok_or_else(|| Error::InvalidArgument("secret os-authURL is missing".into()))?;
        let domain_id = get("os-domainID");
        let domain_name = get("os-domainName");
        let user_domain_id = get("os-userDomainID").or_else(|| domain_id.clone());
        let user_domain_name = get("os-userDomainName").or_else(|| domain_name.clone());
        let method = if let Some(secret) = get("os-applicationCredentialSecret") {
            let id = get("os-applicationCredentialID");
            let name = get("os-applicationCredentialName");
            if id.is_none() && name.is_none() {
                return Err(Error::InvalidArgument(
                    "secret os-applicationCredentialSecret is set but neither os-applicationCredentialID nor os-applicationCredentialName is".into(),
                ));
            }
            AuthMethod::ApplicationCredential {
                id,
                name,
                user_id: get("os-userID"),
                user_name: get("os-userName"),
                user_domain_id,
                user_domain_name,
                secret: Secret::new(secret),
            }
        } else {
            let password = get("os-password").ok_or_else(|| {
                Error::InvalidArgument(
                    "secret os-password is missing (or os-applicationCredentialSecret for application credentials)".into(),
                )
            })?;
            let user_id = get("os-userID");
            let user_name = get("os-userName");
            if user_id.is_none() && user_name.is_none() {
                return Err(Error::InvalidArgument(
                    "secrets os-userID and os-userName are both missing".into(),
                ));
            }
            AuthMethod::Password {
                user_id,
                user_name,
                user_domain_id,
                user_domain_name,
                password: Secret::new(password),
            }
        };
        Ok(Credentials {
            auth_url,
            method,
            scope: Scope {
                project_id: get("os-projectID").or_else(|| get("os-tenantID")),
                project_name: get("os-projectName").or_else(|| get("os-tenantName")),
                project_domain_id: get("os-projectDomainID").or(domain_id),
                project_domain_name: get("os-projectDomainName").or(domain_name),
                trust_id: get("os-trustID"),
            },
            region: get("os-region"),
            interface: get("os-endpointType").unwrap_or_else(|| "public".into()),
            tls,
        })
    }
}

fn parse_secret_bool(key: &str, value: Option<String>) -> Result<bool> {
    match value.as_deref().map(str::to_ascii_lowercase).as_deref() {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(_) => Err(Error::InvalidArgument(format!(
            "secret {key} must be true or false"
        ))),
    }
}

#[derive(Deserialize)]
struct CloudsFile {
    clouds: BTreeMap<String, Cloud>,
}

#[derive(Deserialize, Default)]
struct Cloud {
    #[serde(default)]
    auth: CloudAuth,
    region_name: Option<String>,
    interface: Option<String>,
    endpoint_type: Option<String>,
    cacert: Option<PathBuf>,
    verify: Option<bool>,
}

#[derive(Deserialize, Default)]
struct CloudAuth {
    auth_url: Option<String>,
    username: Option<String>,
    user_id: Option<String>,
    password: Option<String>,
    project_id: Option<String>,
    project_name: Option<String>,
    tenant_id: Option<String>,
    tenant_name: Option<String>,
    domain_id: Option<String>,
    domain_name: Option<String>,
    user_domain_id: Option<String>,
    user_domain_name: Option<String>,
    project_domain_id: Option<String>,
    project_domain_name: Option<String>,
    application_credential_id: Option<String>,
    application_credential_name: Option<String>,
    application_credential_secret: Option<String>,
    trust_id: Option<String>,
}

fn from_clouds_yaml(get: &dyn Fn(&str) -> Option<String>) -> Result<Credentials> {
    let path = get("os-cloudsFile").ok_or_else(|| {
        Error::InvalidArgument("secret os-cloudsFile is missing (os-useClouds is true)".into())
    })?;
    let cloud_name = get("os-cloud").ok_or_else(|| {
        Error::InvalidArgument("secret os-cloud is missing (os-useClouds is true)".into())
    })?;
    let text = std::fs::read_to_string(&path).map_err(|e| {
        Error::InvalidArgument(format!("secret os-cloudsFile: cannot read {path}: {e}"))
    })?;
    parse_clouds_yaml(
        &text,
        &cloud_name,
        &format!("secret os-cloudsFile {path}"),
        get,
    )
}

impl Credentials {
    /// The credentials of cloud `cloud_name` in the clouds.yaml `text`; `source` names where
    /// the text came from in error messages (e.g. `Secret ns/name key clouds.yaml`), which
    /// never contain a secret.
    pub fn from_clouds_yaml_str(text: &str, cloud_name: &str, source: &str) -> Result<Self> {
        parse_clouds_yaml(text, cloud_name, source, &|_| None)
    }

    /// The flat `os-*` secret keys that [`Credentials::try_from`] turns back into these
    /// credentials (the CA inline as `os-certAuthority`; a CA file is read by the caller).
    pub fn to_flat_secret(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        let mut put = |key: &str, value: Option<&String>| {
            if let Some(value) = value.filter(|v| !v.is_empty()) {
                out.insert(key.to_string(), value.clone());
            }
        };
        put("os-authURL", Some(&self.auth_url));
        match &self.method {
            AuthMethod::Password {
                user_id,
                user_name,
                user_domain_id,
                user_domain_name,
                password,
            } => {
                put("os-userID", user_id.as_ref());
                put("os-userName", user_name.as_ref());
                put("os-userDomainID", user_domain_id.as_ref());
                put("os-userDomainName", user_domain_name.as_ref());
                put("os-password", Some(&password.expose().to_string()));
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
                put("os-applicationCredentialID", id.as_ref());
                put("os-applicationCredentialName", name.as_ref());
                put("os-userID", user_id.as_ref());
                put("os-userName", user_name.as_ref());
                put("os-userDomainID", user_domain_id.as_ref());
                put("os-userDomainName", user_domain_name.as_ref());
                put(
                    "os-applicationCredentialSecret",
                    Some(&secret.expose().to_string()),
                );
            }
        }
        put("os-projectID", self.scope.project_id.as_ref());
        put("os-projectName", self.scope.project_name.as_ref());
        put("os-projectDomainID", self.scope.project_domain_id.as_ref());
        put(
            "os-projectDomainName",
            self.scope.project_domain_name.as_ref(),
        );
        put("os-trustID", self.scope.trust_id.as_ref());
        put("os-region", self.region.as_ref());
        put("os-endpointType", Some(&self.interface));
        put("os-certAuthority", self.tls.ca_pem.as_ref());
        if self.tls.insecure {
            out.insert("os-TLSInsecure".into(), "true".into());
        }
        out
    }
}

/// Parses clouds.yaml `text` (from `source`) for `cloud_name`; `get` gives secret keys that
/// override the file's settings (region, interface, TLS).
fn parse_clouds_yaml(
    text: &str,
    cloud_name: &str,
    source: &str,
    get: &dyn Fn(&str) -> Option<String>,
) -> Result<Credentials> {
    let path = source;
    let mut file: CloudsFile = serde_yaml::from_str(text)
        .map_err(|e| Error::InvalidArgument(format!("{source} is not a valid clouds.yaml: {e}")))?;
    let cloud = file.clouds.remove(cloud_name).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "cloud {cloud_name:?} is not in {source} (it has: {})",
            file.clouds.keys().cloned().collect::<Vec<_>>().join(", ")
        ))
    })?;
    let auth = cloud.auth;
    let auth_url = auth.auth_url.ok_or_else(|| {
        Error::InvalidArgument(format!("{path}: cloud {cloud_name:?} has no auth.auth_url"))
    })?;
    let user_domain_id = auth.user_domain_id.or_else(|| auth.domain_id.clone());
    let user_domain_name = auth.user_domain_name.or_else(|| auth.domain_name.clone());
    let method = if let Some(secret) = auth.application_credential_secret {
        AuthMethod::ApplicationCredential {
            id: auth.application_credential_id,
            name: auth.application_credential_name,
            user_id: auth.user_id,
            user_name: auth.username,
            user_domain_id,
            user_domain_name,
            secret: Secret::new(secret),
        }
    } else {
        let password = auth.password.ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{path}: cloud {cloud_name:?} has neither auth.password nor auth.application_credential_secret"
            ))
        })?;
        AuthMethod::Password {
            user_id: auth.user_id,
            user_name: auth.username,
            user_domain_id,
            user_domain_name,
            password: Secret::new(password),
        }
    };
    // Secrets may still override the TLS settings of the file.
    let insecure = match get("os-TLSInsecure") {
        Some(value) => parse_secret_bool("os-TLSInsecure", Some(value))?,
        None => cloud.verify == Some(false),
    };
    Ok(Credentials {
        auth_url,
        method,
        scope: Scope {
            project_id: auth.project_id.or(auth.tenant_id),
            project_name: auth.project_name.or(auth.tenant_name),
            project_domain_id: auth.project_domain_id.or(auth.domain_id),
            project_domain_name: auth.project_domain_name.or(auth.domain_name),
            trust_id: auth.trust_id,
        },
        region: get("os-region").or(cloud.region_name),
        interface: get("os-endpointType")
            .or(cloud.interface)
            .or(cloud.endpoint_type)
            .unwrap_or_else(|| "public".into()),
        tls: TlsOptions {
            ca_file: get("os-certAuthorityPath")
                .map(PathBuf::from)
                .or(cloud.cacert),
            ca_pem: get("os-certAuthority"),
            insecure,
        },
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn empty_secrets_are_invalid() {
        let error = Credentials::try_from(&HashMap::new()).unwrap_err();
        assert!(
            error.to_string().contains("secrets are required"),
            "{error}"
        );
    }

    #[test]
    fn flat_keys_with_password() {
        let credentials = Credentials::try_from(&map(&[
            ("os-authURL", "http://k/v3"),
            ("os-userName", "demo"),
            ("os-password", "hunter2"),
            ("os-projectName", "demo"),
            ("os-domainName", "Default"),
            ("os-region", "RegionOne"),
        ]))
        .unwrap();
        assert_eq!(credentials.interface, "public");
        assert_eq!(
            credentials.scope.project_domain_name.as_deref(),
            Some("Default")
        );
        let printed = format!("{credentials:?}");
        assert!(!printed.contains("hunter2"), "{printed}");
    }

    #[test]
    fn missing_auth_url_is_named() {
        let error = Credentials::try_from(&map(&[("os-password", "x")])).unwrap_err();
        assert!(error.to_string().contains("os-authURL"), "{error}");
    }

    #[test]
    fn clouds_yaml_mode() {
        let dir = tempfile::Builder::new()
            .prefix("credentials-")
            .tempdir()
            .unwrap();
        let path = dir.path().join("clouds.yaml");
        std::fs::write(
            &path,
            "clouds:\n  fake:\n    auth:\n      auth_url: http://k/v3\n      username: u\n      password: p\n      project_name: demo\n      user_domain_name: Default\n      project_domain_name: Default\n    region_name: RegionOne\n    interface: internal\n",
        )
        .unwrap();
        let credentials = Credentials::try_from(&map(&[
            ("os-useClouds", "true"),
            ("os-cloudsFile", path.to_str().unwrap()),
            ("os-cloud", "fake"),
        ]))
        .unwrap();
        assert_eq!(credentials.auth_url, "http://k/v3");
        assert_eq!(credentials.interface, "internal");
        assert_eq!(credentials.region.as_deref(), Some("RegionOne"));
        let missing = Credentials::try_from(&map(&[
            ("os-useClouds", "true"),
            ("os-cloudsFile", path.to_str().unwrap()),
            ("os-cloud", "other"),
        ]))
        .unwrap_err();
        assert!(missing.to_string().contains("\"other\""), "{missing}");
    }
}
