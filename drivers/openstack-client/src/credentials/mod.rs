//! OpenStack credentials from a CSI request's secrets: the flat `os-*` keys, or clouds.yaml
//! when `os-useClouds` is `true`.

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use crate::clouds;
pub use crate::clouds::Environment;
use crate::error::{Error, Result};
pub use crate::secret::Secret;

/// How the user is identified to Keystone. A trustee (`os-trusteeID`,
/// `os-trusteePassword`) is a [`AuthMethod::Password`] user by id, with the token scoped to
/// the trust ([`Scope::trust_id`]).
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
    /// An existing Keystone token (`os-token`), exchanged for one with the secret's scope.
    Token {
        /// `os-token`.
        token: Secret,
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
    /// `os-domainID`: the domain to scope to when there is neither project nor trust.
    pub domain_id: Option<String>,
    /// `os-domainName`: see `domain_id`.
    pub domain_name: Option<String>,
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
    /// `os-clientCertPath`: PEM client certificate presented in the TLS handshake.
    pub client_cert: Option<PathBuf>,
    /// `os-clientKeyPath`: PEM private key of `client_cert`.
    pub client_key: Option<PathBuf>,
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
            AuthMethod::Token { token } => ("token", token.expose()),
        };
        Secret::new(format!("{self:?}|{kind}|{secret}"))
    }
}

impl TryFrom<&HashMap<String, String>> for Credentials {
    type Error = Error;

    /// The credentials of a request's secrets; clouds.yaml is searched in the process's
    /// environment (see [`Credentials::from_secrets`]).
    fn try_from(secrets: &HashMap<String, String>) -> Result<Self> {
        Credentials::from_secrets(secrets, &Environment::process())
    }
}

impl Credentials {
    /// The credentials of a request's secrets: the flat `os-*` keys, or with
    /// `os-useClouds: "true"` the cloud `os-cloud` (else `OS_CLOUD`) of the clouds.yaml
    /// `os-cloudsFile` (else found as [`Environment::search_path`] says), with the secret's
    /// own `os-*` keys over the file's settings.
    pub fn from_secrets(secrets: &HashMap<String, String>, env: &Environment) -> Result<Self> {
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
        if !parse_secret_bool("os-useClouds", get("os-useClouds"))? {
            return from_flat(&get);
        }
        let cloud_name = get("os-cloud")
            .or_else(|| env.cloud.clone())
            .ok_or_else(|| {
                Error::InvalidArgument(
                    "secret os-cloud is missing (os-useClouds is true) and OS_CLOUD is not set"
                        .into(),
                )
            })?;
        let path = clouds::locate(get("os-cloudsFile"), env)?;
        let text = clouds::read(&path)?;
        let source = format!("clouds.yaml {}", path.display());
        let mut merged = clouds::flat_keys(&text, &cloud_name, &source)?;
        for (key, value) in secrets {
            if key.starts_with("os-") && !value.trim().is_empty() {
                merged.insert(key.clone(), value.clone());
            }
        }
        from_merged(&merged, &cloud_name, &source)
    }
}

/// The flat parse of clouds.yaml keys (with the secret's over them); errors name the file.
fn from_merged(
    merged: &HashMap<String, String>,
    cloud_name: &str,
    source: &str,
) -> Result<Credentials> {
    let get = |key: &str| {
        merged
            .get(key)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    from_flat(&get).map_err(|e| match e {
        Error::InvalidArgument(message) => Error::InvalidArgument(format!(
            "cloud {cloud_name:?} of {source} (with the secret's os-* keys over it): {message}"
        )),
        other => other,
    })
}

/// The credentials of the flat `os-*` keys that `get` gives (trimmed, never empty).
fn from_flat(get: &dyn Fn(&str) -> Option<String>) -> Result<Credentials> {
    let both = |first: &str, second: &str| -> Result<Option<(String, String)>> {
        match (get(first), get(second)) {
            (None, None) => Ok(None),
            (Some(a), Some(b)) => Ok(Some((a, b))),
            (Some(_), None) => Err(Error::InvalidArgument(format!(
                "secret {second} is required with {first}"
            ))),
            (None, Some(_)) => Err(Error::InvalidArgument(format!(
                "secret {first} is required with {second}"
            ))),
        }
    };
    let client_pair = both("os-clientCertPath", "os-clientKeyPath")?;
    let tls = TlsOptions {
        ca_file: get("os-certAuthorityPath").map(PathBuf::from),
        ca_pem: get("os-certAuthority"),
        insecure: parse_secret_bool("os-TLSInsecure", get("os-TLSInsecure"))?,
        client_cert: client_pair.as_ref().map(|(cert, _)| PathBuf::from(cert)),
        client_key: client_pair.map(|(_, key)| PathBuf::from(key)),
    };
    let auth_url = get("os-authURL")
        .ok_or_else(|| Error::InvalidArgument("secret os-authURL is missing".into()))?;
    let domain_id = get("os-domainID");
    let domain_name = get("os-domainName");
    let user_domain_id = get("os-userDomainID").or_else(|| domain_id.clone());
    let user_domain_name = get("os-userDomainName").or_else(|| domain_name.clone());
    let trustee = both("os-trusteeID", "os-trusteePassword")?;
    let trust_id = get("os-trustID");
    let method = if let Some((trustee_id, password)) = trustee {
        if trust_id.is_none() {
            return Err(Error::InvalidArgument(
                "secret os-trustID is required with os-trusteeID".into(),
            ));
        }
        AuthMethod::Password {
            user_id: Some(trustee_id),
            user_name: None,
            user_domain_id,
            user_domain_name,
            password: Secret::new(password),
        }
    } else if let Some(secret) = get("os-applicationCredentialSecret") {
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
    } else if let Some(password) = get("os-password") {
        let user_id = get("os-userID");
        let user_name = get("os-userName");
        if user_id.is_none() && user_name.is_none() {
            return Err(Error::InvalidArgument(
                "secrets os-userID and os-userName are both missing (os-password needs one)".into(),
            ));
        }
        AuthMethod::Password {
            user_id,
            user_name,
            user_domain_id,
            user_domain_name,
            password: Secret::new(password),
        }
    } else if let Some(token) = get("os-token") {
        AuthMethod::Token {
            token: Secret::new(token),
        }
    } else {
        return Err(Error::InvalidArgument(
            "secret os-password is missing (or os-applicationCredentialSecret for application credentials, os-token for a token, os-trusteeID and os-trusteePassword for a trust)".into(),
        ));
    };
    Ok(Credentials {
        auth_url,
        method,
        scope: Scope {
            project_id: get("os-projectID").or_else(|| get("os-tenantID")),
            project_name: get("os-projectName").or_else(|| get("os-tenantName")),
            project_domain_id: get("os-projectDomainID").or_else(|| domain_id.clone()),
            project_domain_name: get("os-projectDomainName").or_else(|| domain_name.clone()),
            trust_id,
            domain_id,
            domain_name,
        },
        region: get("os-region"),
        interface: get("os-endpointType").unwrap_or_else(|| "public".into()),
        tls,
    })
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

impl Credentials {
    /// The credentials of cloud `cloud_name` in the clouds.yaml `text`; `source` names where
    /// the text came from in error messages (e.g. `Secret ns/name key clouds.yaml`), which
    /// never contain a secret.
    pub fn from_clouds_yaml_str(text: &str, cloud_name: &str, source: &str) -> Result<Self> {
        let flat = clouds::flat_keys(text, cloud_name, source)?;
        from_merged(&flat, cloud_name, source)
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
            AuthMethod::Token { token } => {
                put("os-token", Some(&token.expose().to_string()));
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
        put("os-domainID", self.scope.domain_id.as_ref());
        put("os-domainName", self.scope.domain_name.as_ref());
        put("os-region", self.region.as_ref());
        put("os-endpointType", Some(&self.interface));
        put("os-certAuthority", self.tls.ca_pem.as_ref());
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        put("os-clientCertPath", path(&self.tls.client_cert).as_ref());
        put("os-clientKeyPath", path(&self.tls.client_key).as_ref());
        if self.tls.insecure {
            out.insert("os-TLSInsecure".into(), "true".into());
        }
        out
    }
}
