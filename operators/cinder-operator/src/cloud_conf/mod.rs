//! The configuration translation: the credentials Secret's clouds.yaml and the user's
//! `cloud-provider-config` ConfigMap (INI `config`, `ca-bundle.pem`, both optional) become
//! the driver's `cloud.conf`, kept with the CA bundle in the driver **Secret** (it carries
//! the password), which the driver pods mount at [`CONFIG_DIR`].
//!
//! `[Global]` holds the credentials of the clouds.yaml cloud (the driver's key names:
//! `auth-url`, `username`/`user-id`, `password` or `application-credential-*`,
//! `tenant-*`, `domain-*`, `region`, `interface`, `tls-insecure`), plus `ca-file` naming
//! the mounted bundle when the ConfigMap has one; the user's other `[Global]` keys stay
//! unless clouds.yaml sets the same key. The user's sections are filtered as
//! [`crate::user_config`] says. `[BlockStorage] ignore-volume-az` is derived from the
//! topology decision (`true` when topology is off, so volumes do not carry a zone the nodes
//! do not have) unless the user set it.
//!
//! Every error names the Secret or ConfigMap and its key, never a secret value.

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;

use openstack_client::credentials::{AuthMethod, Credentials, TlsOptions};

use crate::config::{CA_BUNDLE_FILE, CLOUD_CONF_KEY, OperatorConfig};
use crate::user_config::{self, Section, UserConfigError};

/// Where the inputs come from, for messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sources {
    /// `namespace/name` of the credentials Secret.
    pub secret: String,
    /// The clouds.yaml key in it.
    pub clouds_key: String,
    /// The cloud used.
    pub cloud_name: String,
    /// `namespace/name` of the user's ConfigMap.
    pub config_map: String,
    /// The INI key in it.
    pub config_key: String,
    /// The CA bundle key in it.
    pub ca_key: String,
    /// The CA's path in the driver pods.
    pub ca_file: String,
}

impl From<&OperatorConfig> for Sources {
    fn from(config: &OperatorConfig) -> Self {
        Sources {
            secret: format!("{}/{}", config.namespace, config.credentials_secret),
            clouds_key: config.clouds_yaml_key.clone(),
            cloud_name: config.cloud_name.clone(),
            config_map: format!("{}/{}", config.namespace, config.config_map),
            config_key: config.config_key.clone(),
            ca_key: config.ca_bundle_key.clone(),
            ca_file: config.ca_file_path(),
        }
    }
}

/// Why no `cloud.conf` can be written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TranslationError {
    /// clouds.yaml is not YAML, lacks the cloud, or the cloud lacks credentials.
    #[error("Secret {secret} key {key}: {reason}")]
    CloudsYaml {
        /// `namespace/name`.
        secret: String,
        /// The key.
        key: String,
        /// What is wrong (never a secret value).
        reason: String,
    },
    /// The cloud authenticates in a way `cloud.conf` cannot say.
    #[error(
        "Secret {secret} key {key}: cloud {cloud} uses {what}, which the Cinder driver's cloud.conf cannot express; use a password or an application credential"
    )]
    Unsupported {
        /// `namespace/name`.
        secret: String,
        /// The key.
        key: String,
        /// The cloud.
        cloud: String,
        /// `a token`, `a trust`, `a client certificate`.
        what: &'static str,
    },
    /// The user's INI configuration cannot be used.
    #[error("ConfigMap {config_map} key {key}: {source}")]
    UserConfig {
        /// `namespace/name`.
        config_map: String,
        /// The key.
        key: String,
        /// What is wrong.
        #[source]
        source: UserConfigError,
    },
    /// The CA bundle is not a PEM certificate bundle.
    #[error("ConfigMap {config_map} key {key}: not a PEM certificate bundle: {reason}")]
    CaInvalid {
        /// `namespace/name`.
        config_map: String,
        /// The key.
        key: String,
        /// The parser's reason.
        reason: String,
    },
}

/// What the translation reads.
#[derive(Clone, Copy)]
pub struct Inputs<'a> {
    /// The clouds.yaml text.
    pub clouds_yaml: &'a str,
    /// The user's INI configuration, when the ConfigMap has one.
    pub user_config: Option<&'a str>,
    /// The CA bundle (PEM), when the ConfigMap has one.
    pub ca_bundle: Option<&'a str>,
    /// Whether topology is on (see [`crate::zones`]).
    pub topology: bool,
}

impl fmt::Debug for Inputs<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inputs")
            .field("clouds_yaml", &"[redacted]")
            .field("user_config", &self.user_config.map(|_| "[given]"))
            .field("ca_bundle", &self.ca_bundle.map(|_| "[given]"))
            .field("topology", &self.topology)
            .finish()
    }
}

/// The driver Secret's content. `Debug` shows no value.
#[derive(Clone, PartialEq, Eq)]
pub struct DriverConfig {
    /// The INI text of `cloud.conf`.
    pub cloud_conf: String,
    /// The CA bundle, stored next to it.
    pub ca_bundle: Option<String>,
}

impl fmt::Debug for DriverConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DriverConfig")
            .field("cloud_conf", &"[redacted]")
            .field("ca_bundle", &self.ca_bundle.is_some())
            .finish()
    }
}

impl DriverConfig {
    /// The driver Secret's `stringData`: [`CLOUD_CONF_KEY`] and, with a CA, [`CA_BUNDLE_FILE`].
    pub fn secret_data(&self) -> BTreeMap<String, String> {
        let mut data = BTreeMap::from([(CLOUD_CONF_KEY.to_owned(), self.cloud_conf.clone())]);
        if let Some(ca) = &self.ca_bundle {
            data.insert(CA_BUNDLE_FILE.to_owned(), ca.clone());
        }
        data
    }

    /// A short hash of everything the driver reads (credentials, configuration and the CA's
    /// contents; [`operator_kit::templates::data_hash`] of the Secret's data), for the pod
    /// templates' annotation: any change restarts the driver pods.
    pub fn hash(&self) -> String {
        operator_kit::templates::data_hash(&self.secret_data())
    }
}

/// Translates `inputs` into the driver's configuration.
pub fn translate(inputs: &Inputs<'_>, sources: &Sources) -> Result<DriverConfig, TranslationError> {
    let credentials = credentials(inputs.clouds_yaml, sources)?;
    let user = match inputs.user_config {
        Some(text) => user_config::read(text).map_err(|source| TranslationError::UserConfig {
            config_map: sources.config_map.clone(),
            key: sources.config_key.clone(),
            source,
        })?,
        None => Vec::new(),
    };
    let ca_bundle = inputs
        .ca_bundle
        .filter(|pem| !pem.trim().is_empty())
        .map(|pem| check_ca(pem, sources).map(|()| pem.to_owned()))
        .transpose()?;

    let mut global = Section::named("Global");
    let mut block_storage = Section::named("BlockStorage");
    let mut others = Vec::new();
    for section in user {
        match section.name.as_str() {
            "Global" => global = section,
            "BlockStorage" => block_storage = section,
            _ => others.push(section),
        }
    }
    for (key, value) in global_keys(&credentials) {
        global.set(key, value);
    }
    if ca_bundle.is_some() {
        global.set("ca-file", sources.ca_file.clone());
    }
    if block_storage.get("ignore-volume-az").is_none() {
        block_storage.set(
            "ignore-volume-az",
            if inputs.topology { "false" } else { "true" },
        );
    }
    let mut sections = vec![global, block_storage];
    sections.extend(others);
    Ok(DriverConfig {
        cloud_conf: write(&sections),
        ca_bundle,
    })
}

fn credentials(clouds_yaml: &str, sources: &Sources) -> Result<Credentials, TranslationError> {
    let source = format!("Secret {} key {}", sources.secret, sources.clouds_key);
    let credentials = Credentials::from_clouds_yaml_str(clouds_yaml, &sources.cloud_name, &source)
        .map_err(|e| TranslationError::CloudsYaml {
            secret: sources.secret.clone(),
            key: sources.clouds_key.clone(),
            reason: e.to_string(),
        })?;
    let unsupported = |what| TranslationError::Unsupported {
        secret: sources.secret.clone(),
        key: sources.clouds_key.clone(),
        cloud: sources.cloud_name.clone(),
        what,
    };
    if matches!(credentials.method, AuthMethod::Token { .. }) {
        return Err(unsupported("a token"));
    }
    if credentials.scope.trust_id.is_some() {
        return Err(unsupported("a trust"));
    }
    if credentials.tls.client_cert.is_some() || credentials.tls.client_key.is_some() {
        return Err(unsupported("a client certificate"));
    }
    Ok(credentials)
}

/// The `[Global]` keys of `credentials`, in the driver's names (the CA comes from the
/// ConfigMap, never from clouds.yaml's `cacert`, a path on another machine).
fn global_keys(credentials: &Credentials) -> Vec<(&'static str, String)> {
    let mut out = vec![("auth-url", credentials.auth_url.clone())];
    let mut put = |key: &'static str, value: &Option<String>| {
        if let Some(value) = value.as_ref().filter(|v| !v.is_empty()) {
            out.push((key, value.clone()));
        }
    };
    match &credentials.method {
        AuthMethod::Password {
            user_id,
            user_name,
            user_domain_id,
            user_domain_name,
            password,
        } => {
            put("user-id", user_id);
            put("username", user_name);
            put("user-domain-id", user_domain_id);
            put("user-domain-name", user_domain_name);
            put("password", &Some(password.expose().to_owned()));
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
            put("application-credential-id", id);
            put("application-credential-name", name);
            put("user-id", user_id);
            put("username", user_name);
            put("user-domain-id", user_domain_id);
            put("user-domain-name", user_domain_name);
            put(
                "application-credential-secret",
                &Some(secret.expose().to_owned()),
            );
        }
        // Refused before: `credentials` answers an error for a token.
        AuthMethod::Token { .. } => {}
    }
    let scope = &credentials.scope;
    put("tenant-id", &scope.project_id);
    put("tenant-name", &scope.project_name);
    put("tenant-domain-id", &scope.project_domain_id);
    put("tenant-domain-name", &scope.project_domain_name);
    put("domain-id", &scope.domain_id);
    put("domain-name", &scope.domain_name);
    put("region", &credentials.region);
    // `public` is the driver's default: only another interface is written, so a user's
    // `[Global] interface` stays when clouds.yaml names none.
    if credentials.interface != "public" {
        out.push(("interface", credentials.interface.clone()));
    }
    if credentials.tls.insecure {
        out.push(("tls-insecure", "true".into()));
    }
    out
}

fn check_ca(pem: &str, sources: &Sources) -> Result<(), TranslationError> {
    let tls = TlsOptions {
        ca_pem: Some(pem.to_owned()),
        ..TlsOptions::default()
    };
    openstack_client::http::build_client(&tls, "cinder-csi-driver-operator")
        .map(|_| ())
        .map_err(|e| TranslationError::CaInvalid {
            config_map: sources.config_map.clone(),
            key: sources.ca_key.clone(),
            reason: e.to_string(),
        })
}

/// Writes `sections` as INI, every value double-quoted with `\`, `"` and control characters
/// escaped, which the driver's parser (and upstream's gcfg) read back verbatim.
fn write(sections: &[Section]) -> String {
    let mut out = String::new();
    for section in sections.iter().filter(|s| !s.entries.is_empty()) {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&format!("[{}]\n", section.name));
        for (key, value) in &section.entries {
            out.push_str(&format!("{key} = \"{}\"\n", escape(value)));
        }
    }
    out
}

fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out
}
