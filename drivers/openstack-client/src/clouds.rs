//! clouds.yaml for `os-useClouds: "true"`: where the file is found (as gophercloud's
//! clientconfig finds it), and the cloud's settings turned into the flat `os-*` keys, which
//! the request's own `os-*` keys then override (as upstream fills only what the secret left
//! empty).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{Error, Result};

/// What the clouds.yaml search reads from the process: a few environment variables and the
/// directories. Passed in rather than read globally, so that tests can give their own.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Environment {
    /// `OS_CLIENT_CONFIG_FILE`: the clouds.yaml to use when it exists.
    pub client_config_file: Option<PathBuf>,
    /// `OS_CLOUD`: the cloud when the secret has no `os-cloud`.
    pub cloud: Option<String>,
    /// `HOME`: `~/.config/openstack/clouds.yaml` is searched under it.
    pub home: Option<PathBuf>,
    /// The current directory: `./clouds.yaml` is searched in it.
    pub current_dir: Option<PathBuf>,
    /// The system directory, `/etc/openstack`.
    pub system_dir: PathBuf,
}

impl Environment {
    /// The process's environment and current directory, and `/etc/openstack`.
    pub fn process() -> Self {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        Environment {
            client_config_file: var("OS_CLIENT_CONFIG_FILE").map(PathBuf::from),
            cloud: var("OS_CLOUD").and_then(|v| v.into_string().ok()),
            home: var("HOME").map(PathBuf::from),
            current_dir: std::env::current_dir().ok(),
            system_dir: PathBuf::from("/etc/openstack"),
        }
    }

    /// The places clouds.yaml is looked for, in order (gophercloud's clientconfig):
    /// `OS_CLIENT_CONFIG_FILE`, `./clouds.yaml`, `~/.config/openstack/clouds.yaml`,
    /// `/etc/openstack/clouds.yaml`. The first that exists is used.
    pub fn search_path(&self) -> Vec<PathBuf> {
        let mut paths = Vec::new();
        paths.extend(self.client_config_file.clone());
        paths.extend(self.current_dir.as_ref().map(|d| d.join("clouds.yaml")));
        paths.extend(
            self.home
                .as_ref()
                .map(|h| h.join(".config/openstack/clouds.yaml")),
        );
        paths.push(self.system_dir.join("clouds.yaml"));
        paths
    }
}

/// The clouds.yaml to read: `os-cloudsFile` when given (it must be readable), else the first
/// existing file of [`Environment::search_path`].
pub(crate) fn locate(clouds_file: Option<String>, env: &Environment) -> Result<PathBuf> {
    if let Some(path) = clouds_file {
        return Ok(PathBuf::from(path));
    }
    let candidates = env.search_path();
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or_else(|| {
            Error::InvalidArgument(format!(
                "os-useClouds is true but no clouds.yaml was found: the secret has no os-cloudsFile and none of these exists: {}",
                candidates
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
}

/// Reads the clouds.yaml at `path` (an error names the file).
pub(crate) fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| {
        Error::InvalidArgument(format!(
            "os-useClouds: cannot read clouds.yaml {}: {e}",
            path.display()
        ))
    })
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
    cacert: Option<String>,
    cert: Option<String>,
    key: Option<String>,
    verify: Option<bool>,
}

#[derive(Deserialize, Default)]
struct CloudAuth {
    auth_url: Option<String>,
    username: Option<String>,
    user_id: Option<String>,
    password: Option<String>,
    token: Option<String>,
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

/// The flat `os-*` keys of cloud `cloud_name` in the clouds.yaml `text` (from `source`,
/// named in errors, which never contain a secret).
pub(crate) fn flat_keys(
    text: &str,
    cloud_name: &str,
    source: &str,
) -> Result<HashMap<String, String>> {
    let mut file: CloudsFile = serde_yaml::from_str(text)
        .map_err(|e| Error::InvalidArgument(format!("{source} is not a valid clouds.yaml: {e}")))?;
    let cloud = file.clouds.remove(cloud_name).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "cloud {cloud_name:?} is not in {source} (it has: {})",
            file.clouds.keys().cloned().collect::<Vec<_>>().join(", ")
        ))
    })?;
    let auth = cloud.auth;
    let mut out = HashMap::new();
    let mut put = |key: &str, value: Option<String>| {
        if let Some(value) = value.filter(|v| !v.trim().is_empty()) {
            out.insert(key.to_string(), value);
        }
    };
    put("os-authURL", auth.auth_url);
    put("os-userName", auth.username);
    put("os-userID", auth.user_id);
    put("os-password", auth.password);
    put("os-token", auth.token);
    put("os-projectID", auth.project_id.or(auth.tenant_id));
    put("os-projectName", auth.project_name.or(auth.tenant_name));
    put("os-domainID", auth.domain_id);
    put("os-domainName", auth.domain_name);
    put("os-userDomainID", auth.user_domain_id);
    put("os-userDomainName", auth.user_domain_name);
    put("os-projectDomainID", auth.project_domain_id);
    put("os-projectDomainName", auth.project_domain_name);
    put("os-applicationCredentialID", auth.application_credential_id);
    put(
        "os-applicationCredentialName",
        auth.application_credential_name,
    );
    put(
        "os-applicationCredentialSecret",
        auth.application_credential_secret,
    );
    put("os-trustID", auth.trust_id);
    put("os-region", cloud.region_name);
    put("os-endpointType", cloud.interface.or(cloud.endpoint_type));
    put("os-certAuthorityPath", cloud.cacert);
    put("os-clientCertPath", cloud.cert);
    put("os-clientKeyPath", cloud.key);
    if cloud.verify == Some(false) {
        put("os-TLSInsecure", Some("true".into()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn env_in(root: &Path) -> Environment {
        Environment {
            client_config_file: None,
            cloud: None,
            home: Some(root.join("home")),
            current_dir: Some(root.join("cwd")),
            system_dir: root.join("etc"),
        }
    }

    fn touch(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "clouds: {}\n").unwrap();
    }

    #[test]
    fn clouds_yaml_is_searched_in_clientconfig_order() {
        let dir = tempfile::Builder::new()
            .prefix("clouds-search-")
            .tempdir()
            .unwrap();
        let root = dir.path();
        let mut env = env_in(root);
        let system = root.join("etc/clouds.yaml");
        let home = root.join("home/.config/openstack/clouds.yaml");
        let cwd = root.join("cwd/clouds.yaml");
        let explicit = root.join("explicit.yaml");

        let error = locate(None, &env).unwrap_err().to_string();
        for path in [&cwd, &home, &system] {
            assert!(error.contains(&path.display().to_string()), "{error}");
        }
        touch(&system);
        assert_eq!(locate(None, &env).unwrap(), system);
        touch(&home);
        assert_eq!(locate(None, &env).unwrap(), home);
        touch(&cwd);
        assert_eq!(locate(None, &env).unwrap(), cwd);
        // OS_CLIENT_CONFIG_FILE wins when it exists, and is skipped when it does not.
        env.client_config_file = Some(explicit.clone());
        assert_eq!(locate(None, &env).unwrap(), cwd);
        touch(&explicit);
        assert_eq!(locate(None, &env).unwrap(), explicit);
        // os-cloudsFile wins over everything.
        assert_eq!(
            locate(Some("/given/clouds.yaml".into()), &env).unwrap(),
            PathBuf::from("/given/clouds.yaml")
        );
    }

    #[test]
    fn cloud_settings_become_flat_keys() {
        let text = "clouds:\n  c:\n    auth:\n      auth_url: http://k/v3\n      token: tok\n      trust_id: t1\n      tenant_name: demo\n    region_name: R2\n    endpoint_type: internalURL\n    cacert: /ca.pem\n    cert: /c.pem\n    key: /k.pem\n    verify: false\n";
        let flat = flat_keys(text, "c", "test").unwrap();
        let get = |k: &str| flat.get(k).map(String::as_str);
        assert_eq!(get("os-token"), Some("tok"));
        assert_eq!(get("os-trustID"), Some("t1"));
        assert_eq!(get("os-projectName"), Some("demo"));
        assert_eq!(get("os-region"), Some("R2"));
        assert_eq!(get("os-endpointType"), Some("internalURL"));
        assert_eq!(get("os-certAuthorityPath"), Some("/ca.pem"));
        assert_eq!(get("os-clientCertPath"), Some("/c.pem"));
        assert_eq!(get("os-clientKeyPath"), Some("/k.pem"));
        assert_eq!(get("os-TLSInsecure"), Some("true"));
    }
}
