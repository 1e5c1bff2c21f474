//! What the configuration translation reads from the cluster: clouds.yaml from the
//! credentials Secret (required), the INI `config` and the `ca-bundle.pem` of the user's
//! ConfigMap (both optional, as is the ConfigMap). Errors name the object and key; `Debug`
//! shows no value.

use std::fmt;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;
use kube::api::Api;
use operator_kit::apply::api_message;

use crate::cloud_conf::Inputs;
use crate::config::OperatorConfig;

/// The inputs could not be read.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The credentials Secret or its clouds.yaml key is missing or not text.
    #[error("{0}")]
    Missing(String),
    /// The API refused a read.
    #[error("reading {what}: {}", api_message(source))]
    Kube {
        /// `Secret ns/name` or `ConfigMap ns/name`.
        what: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

/// The raw inputs of the translation. `Debug` shows no value.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct RawInputs {
    /// clouds.yaml, from the credentials Secret.
    pub clouds_yaml: String,
    /// The ConfigMap's INI configuration, when it has one.
    pub user_config: Option<String>,
    /// The ConfigMap's CA bundle, when it has one.
    pub ca_bundle: Option<String>,
}

impl fmt::Debug for RawInputs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawInputs")
            .field("clouds_yaml", &"[redacted]")
            .field("user_config", &self.user_config.as_ref().map(|_| "[given]"))
            .field("ca_bundle", &self.ca_bundle.as_ref().map(|_| "[given]"))
            .finish()
    }
}

impl RawInputs {
    /// The translation's inputs, with the topology decision.
    pub fn translation(&self, topology: bool) -> Inputs<'_> {
        Inputs {
            clouds_yaml: &self.clouds_yaml,
            user_config: self.user_config.as_deref(),
            ca_bundle: self.ca_bundle.as_deref(),
            topology,
        }
    }
}

/// Reads the credentials Secret and the optional ConfigMap of `config`.
pub async fn read(client: &Client, config: &OperatorConfig) -> Result<RawInputs, InputError> {
    let namespace = &config.namespace;
    let secret_name = format!("Secret {namespace}/{}", config.credentials_secret);
    let secret = Api::<Secret>::namespaced(client.clone(), namespace)
        .get_opt(&config.credentials_secret)
        .await
        .map_err(|source| InputError::Kube {
            what: secret_name.clone(),
            source,
        })?;
    let clouds_yaml = clouds_yaml(secret.as_ref(), &secret_name, &config.clouds_yaml_key)?;
    let map_name = format!("ConfigMap {namespace}/{}", config.config_map);
    let map = Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .get_opt(&config.config_map)
        .await
        .map_err(|source| InputError::Kube {
            what: map_name,
            source,
        })?;
    let value = |key: &str| {
        map.as_ref()
            .and_then(|m| m.data.as_ref())
            .and_then(|d| d.get(key))
            .filter(|v| !v.trim().is_empty())
            .cloned()
    };
    Ok(RawInputs {
        clouds_yaml,
        user_config: value(&config.config_key),
        ca_bundle: value(&config.ca_bundle_key),
    })
}

/// clouds.yaml from the Secret (`data` or `stringData`), or why not.
pub fn clouds_yaml(secret: Option<&Secret>, name: &str, key: &str) -> Result<String, InputError> {
    let Some(secret) = secret else {
        return Err(InputError::Missing(format!(
            "{name} not found: it must hold clouds.yaml under key {key}"
        )));
    };
    if let Some(bytes) = secret.data.as_ref().and_then(|d| d.get(key)) {
        return String::from_utf8(bytes.0.clone())
            .map_err(|_| InputError::Missing(format!("{name} key {key}: not UTF-8 text")));
    }
    if let Some(text) = secret.string_data.as_ref().and_then(|d| d.get(key)) {
        return Ok(text.clone());
    }
    Err(InputError::Missing(format!("{name} has no key {key}")))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;

    use super::*;

    const NAME: &str = "Secret ns/cloud-credentials";

    #[test]
    fn a_missing_secret_or_key_names_both() {
        assert_eq!(
            clouds_yaml(None, NAME, "clouds.yaml")
                .unwrap_err()
                .to_string(),
            "Secret ns/cloud-credentials not found: it must hold clouds.yaml under key clouds.yaml"
        );
        let other_key = Secret {
            data: Some(BTreeMap::from([(
                "other".to_string(),
                ByteString(b"x".to_vec()),
            )])),
            ..Default::default()
        };
        assert_eq!(
            clouds_yaml(Some(&other_key), NAME, "clouds.yaml")
                .unwrap_err()
                .to_string(),
            "Secret ns/cloud-credentials has no key clouds.yaml"
        );
        let good = Secret {
            data: Some(BTreeMap::from([(
                "clouds.yaml".to_string(),
                ByteString(b"clouds: {}".to_vec()),
            )])),
            ..Default::default()
        };
        assert_eq!(
            clouds_yaml(Some(&good), NAME, "clouds.yaml").unwrap(),
            "clouds: {}"
        );
    }

    #[test]
    fn debug_shows_no_value() {
        let inputs = RawInputs {
            clouds_yaml: "password: hunter2".into(),
            user_config: Some("[Global]".into()),
            ca_bundle: None,
        };
        let text = format!("{inputs:?}");
        assert!(!text.contains("hunter2"), "{text}");
    }
}
