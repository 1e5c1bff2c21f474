//! The cloud side of a reconcile: the credentials (the `cloud-credentials` Secret's
//! clouds.yaml and the optional CA bundle of the `cloud-provider-config` ConfigMap), and
//! whether Manila can be used, with its share types.
//!
//! Two kinds of problem are kept apart, as upstream does. Credentials that are missing,
//! malformed or rejected, and a CA that does not verify the cloud, are the cluster admin's to
//! fix: a [`CredentialsError`] (the operator reports Degraded). A cloud without Manila, or
//! one whose Manila cannot be reached, forbids access or has no share types, is a fact about
//! the cloud: [`ManilaStatus::Disabled`] (never Degraded, and an installed driver stays).
//!
//! The OpenStack client is the shared one (`openstack_client`), fed with the
//! flat `os-*` secret the operator also writes for the driver, so both read credentials the
//! same way.

use std::collections::HashMap;
use std::fmt;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;
use kube::api::Api;
use openstack_client::Error as CloudError;
use openstack_client::{Connector, Credentials};

use crate::config::OperatorConfig;

/// The User-Agent of the operator's OpenStack requests.
const USER_AGENT: &str = concat!("manila-csi-driver-operator/", env!("CARGO_PKG_VERSION"));

/// Credentials that cannot be used: missing, malformed or rejected (→ `Degraded`). Messages
/// name the Secret or ConfigMap and key, never a secret value.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    /// The credentials Secret does not exist.
    #[error("Secret {namespace}/{name} does not exist: it must hold clouds.yaml (key {key})")]
    SecretMissing {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The key it must have.
        key: String,
    },
    /// The Secret lacks the clouds.yaml key (or it is empty or not UTF-8).
    #[error("Secret {namespace}/{name} has no usable key {key} (it has: {present})")]
    KeyMissing {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The missing key.
        key: String,
        /// The keys it has.
        present: String,
    },
    /// clouds.yaml cannot be used: not YAML, the cloud is not in it, or it lacks a field.
    #[error("{0}")]
    Invalid(String),
    /// The CA bundle of the ConfigMap is not a PEM certificate bundle.
    #[error("ConfigMap {namespace}/{name} key {key}: {reason}")]
    CaInvalid {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// Keystone refused the credentials.
    #[error("the credentials of Secret {secret} were rejected: {reason}")]
    Rejected {
        /// `namespace/name` of the Secret.
        secret: String,
        /// Keystone's answer.
        reason: String,
    },
    /// TLS to the cloud failed: the server certificate did not verify with the CA bundle.
    #[error(
        "TLS to {service} at {url} failed ({reason}); check the CA bundle (ConfigMap {ca_source}) and the cloud's certificate"
    )]
    Tls {
        /// `Keystone` or `Manila`.
        service: String,
        /// The URL tried.
        url: String,
        /// The TLS library's reason (e.g. `invalid peer certificate: UnknownIssuer`).
        reason: String,
        /// `namespace/name key` of the CA bundle.
        ca_source: String,
    },
    /// A Kubernetes API call failed.
    #[error("{action}: {source}")]
    Kube {
        /// What was being read.
        action: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

/// What the credentials Secret and the CA ConfigMap hold, parsed. `Debug` shows no secret.
#[derive(Clone)]
pub struct CloudInputs {
    /// The parsed credentials (CA inline when the ConfigMap has one).
    pub credentials: Credentials,
    /// `namespace/name` of the credentials Secret, for messages.
    pub secret_source: String,
    /// `namespace/name key` of the CA bundle, for messages.
    pub ca_source: String,
}

impl fmt::Debug for CloudInputs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CloudInputs")
            .field("auth_url", &self.credentials.auth_url)
            .field("secret_source", &self.secret_source)
            .field("custom_ca", &self.credentials.tls.ca_pem.is_some())
            .finish_non_exhaustive()
    }
}

/// One Manila share type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareType {
    /// Its name.
    pub name: String,
    /// Its ID.
    pub id: String,
    /// `driver_handles_share_servers=True`: shares need a share network.
    pub dhss: bool,
}

/// Why Manila cannot be used (→ `ManilaControllerDisabled=True`, never Degraded).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DisabledReason {
    /// No shared-file-system service in the Keystone catalog.
    NotInCatalog,
    /// The cloud could not be reached.
    Unreachable,
    /// Manila answered 403.
    Forbidden,
    /// Manila has no share types.
    NoShareTypes,
}

impl DisabledReason {
    /// The condition reason.
    pub fn as_str(self) -> &'static str {
        match self {
            DisabledReason::NotInCatalog => "ManilaNotInCatalog",
            DisabledReason::Unreachable => "ManilaUnreachable",
            DisabledReason::Forbidden => "ManilaForbidden",
            DisabledReason::NoShareTypes => "NoShareTypes",
        }
    }
}

/// Whether Manila can be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ManilaStatus {
    /// Manila answers; its share types.
    Available(Vec<ShareType>),
    /// Manila cannot be used, and why.
    Disabled {
        /// Why.
        reason: DisabledReason,
        /// Which service, URL or answer.
        message: String,
    },
}

/// Reads the credentials Secret and the optional CA ConfigMap.
pub async fn read_inputs(
    client: &Client,
    config: &OperatorConfig,
) -> Result<CloudInputs, CredentialsError> {
    let namespace = config.namespace.as_str();
    let secret_source = format!("{namespace}/{}", config.credentials_secret);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = secrets
        .get_opt(&config.credentials_secret)
        .await
        .map_err(|source| CredentialsError::Kube {
            action: format!("reading Secret {secret_source}"),
            source,
        })?
        .ok_or_else(|| CredentialsError::SecretMissing {
            namespace: namespace.into(),
            name: config.credentials_secret.clone(),
            key: config.clouds_yaml_key.clone(),
        })?;
    let data = secret.data.unwrap_or_default();
    let clouds_yaml = data
        .get(&config.clouds_yaml_key)
        .and_then(|bytes| String::from_utf8(bytes.0.clone()).ok())
        .filter(|text| !text.trim().is_empty())
        .ok_or_else(|| CredentialsError::KeyMissing {
            namespace: namespace.into(),
            name: config.credentials_secret.clone(),
            key: config.clouds_yaml_key.clone(),
            present: data.keys().cloned().collect::<Vec<_>>().join(", "),
        })?;
    let ca_source = format!(
        "{namespace}/{} key {}",
        config.ca_config_map, config.ca_bundle_key
    );
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let ca = maps
        .get_opt(&config.ca_config_map)
        .await
        .map_err(|source| CredentialsError::Kube {
            action: format!("reading ConfigMap {namespace}/{}", config.ca_config_map),
            source,
        })?
        .and_then(|map| map.data.and_then(|d| d.get(&config.ca_bundle_key).cloned()))
        .filter(|pem| !pem.trim().is_empty());
    let source = format!("Secret {secret_source} key {}", config.clouds_yaml_key);
    inputs_from(&clouds_yaml, &config.cloud_name, &source, ca, config).map(|credentials| {
        CloudInputs {
            credentials,
            secret_source,
            ca_source,
        }
    })
}

/// Parses clouds.yaml (`source` names it in messages) and puts the CA bundle inline.
pub fn inputs_from(
    clouds_yaml: &str,
    cloud_name: &str,
    source: &str,
    ca_pem: Option<String>,
    config: &OperatorConfig,
) -> Result<Credentials, CredentialsError> {
    let mut credentials = Credentials::from_clouds_yaml_str(clouds_yaml, cloud_name, source)
        .map_err(|e| CredentialsError::Invalid(e.to_string()))?;
    // The CA comes from the ConfigMap: a `cacert` path of clouds.yaml names a file of some
    // other machine, not of this pod.
    credentials.tls.ca_file = None;
    if let Some(pem) = ca_pem {
        check_pem(&pem).map_err(|reason| CredentialsError::CaInvalid {
            namespace: config.namespace.clone(),
            name: config.ca_config_map.clone(),
            key: config.ca_bundle_key.clone(),
            reason,
        })?;
        // Trimmed as the driver trims secret values, so both hold the same bundle.
        credentials.tls.ca_pem = Some(pem.trim().to_string());
    }
    Ok(credentials)
}

/// A PEM bundle holds at least one certificate block.
fn check_pem(pem: &str) -> Result<(), String> {
    let begin = pem.matches("-----BEGIN CERTIFICATE-----").count();
    let end = pem.matches("-----END CERTIFICATE-----").count();
    if begin == 0 {
        return Err("not a PEM certificate bundle (no BEGIN CERTIFICATE block)".into());
    }
    if begin != end {
        return Err(format!(
            "not a well-formed PEM bundle ({begin} BEGIN CERTIFICATE but {end} END CERTIFICATE lines)"
        ));
    }
    Ok(())
}

/// Authenticates, finds Manila in the catalog and lists its share types.
pub async fn probe_manila(inputs: &CloudInputs) -> Result<ManilaStatus, CredentialsError> {
    let flat: HashMap<String, String> = inputs.credentials.to_flat_secret().into_iter().collect();
    let connector = Connector::new(USER_AGENT.into());
    let result = async {
        let client = connector.connect(&flat).await?;
        client.share_types().await
    }
    .await;
    match result {
        Ok(types) if types.is_empty() => Ok(ManilaStatus::Disabled {
            reason: DisabledReason::NoShareTypes,
            message: "Manila has no share types".into(),
        }),
        Ok(types) => Ok(ManilaStatus::Available(
            types
                .into_iter()
                .map(|t| ShareType {
                    dhss: t.spec_enabled("driver_handles_share_servers"),
                    name: t.name,
                    id: t.id,
                })
                .collect(),
        )),
        Err(error) => classify(error, inputs),
    }
}

/// Sorts a cloud error into a credentials problem or a reason Manila is disabled.
fn classify(error: CloudError, inputs: &CloudInputs) -> Result<ManilaStatus, CredentialsError> {
    let disabled = |reason, message: String| Ok(ManilaStatus::Disabled { reason, message });
    match error {
        CloudError::Unauthenticated(reason) => Err(CredentialsError::Rejected {
            secret: inputs.secret_source.clone(),
            reason,
        }),
        CloudError::Unreachable {
            service,
            url,
            reason,
        } if is_tls_problem(&reason) => Err(CredentialsError::Tls {
            service: service.into(),
            url,
            reason: tls_reason(&reason),
            ca_source: inputs.ca_source.clone(),
        }),
        CloudError::InvalidArgument(message) => Err(CredentialsError::Invalid(format!(
            "{message} (from Secret {} and ConfigMap {})",
            inputs.secret_source, inputs.ca_source
        ))),
        CloudError::NotInCatalog(message) => disabled(DisabledReason::NotInCatalog, message),
        CloudError::Api {
            service: "Manila",
            status: 403,
            method,
            path,
            message,
        } => disabled(
            DisabledReason::Forbidden,
            format!("Manila answered {method} {path} with 403 Forbidden: {message}"),
        ),
        other => disabled(DisabledReason::Unreachable, other.to_string()),
    }
}

fn is_tls_problem(reason: &str) -> bool {
    let lower = reason.to_ascii_lowercase();
    ["certificate", "unknownissuer", "tls", "handshake"]
        .iter()
        .any(|needle| lower.contains(needle))
}

/// The innermost part of a transport error chain: what the TLS library said.
fn tls_reason(reason: &str) -> String {
    let parts: Vec<&str> = reason.split(": ").collect();
    match parts.iter().position(|part| is_tls_problem(part)) {
        Some(first) => parts[first..].join(": "),
        None => reason.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const CLOUDS: &str = "clouds:\n  openstack:\n    auth:\n      auth_url: https://keystone.example:5000/v3\n      username: demo\n      password: hunter2\n      project_name: demo\n      user_domain_name: Default\n      project_domain_name: Default\n    region_name: RegionOne\n    cacert: /etc/ssl/elsewhere.pem\n";

    fn config() -> OperatorConfig {
        OperatorConfig::new("manila-csi")
    }

    #[test]
    fn the_ca_of_the_config_map_replaces_a_cacert_path() {
        let ca = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        let credentials = inputs_from(
            CLOUDS,
            "openstack",
            "Secret x/y key clouds.yaml",
            Some(ca.into()),
            &config(),
        )
        .unwrap();
        assert_eq!(credentials.tls.ca_file, None);
        assert_eq!(credentials.tls.ca_pem.as_deref(), Some(ca.trim()));
    }

    #[test]
    fn a_ca_that_is_not_pem_names_the_config_map_and_key() {
        let error = inputs_from(CLOUDS, "openstack", "s", Some("nope".into()), &config())
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("ConfigMap manila-csi/cloud-provider-config key ca-bundle.pem"),
            "{error}"
        );
    }

    #[test]
    fn an_unknown_cloud_names_the_known_ones_and_the_source() {
        let error = inputs_from(
            CLOUDS,
            "other",
            "Secret ns/cloud-credentials key clouds.yaml",
            None,
            &config(),
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("\"other\""), "{error}");
        assert!(error.contains("openstack"), "{error}");
        assert!(
            error.contains("Secret ns/cloud-credentials key clouds.yaml"),
            "{error}"
        );
        assert!(!error.contains("hunter2"), "{error}");
    }

    #[test]
    fn malformed_yaml_is_named() {
        let error = inputs_from(
            "clouds: [x: y: z",
            "openstack",
            "Secret ns/c key clouds.yaml",
            None,
            &config(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            error.contains("Secret ns/c key clouds.yaml is not a valid clouds.yaml"),
            "{error}"
        );
    }

    #[test]
    fn tls_reasons_are_the_innermost_tls_part() {
        let reason = "error sending request for url (https://k/v3/auth/tokens): client error (Connect): invalid peer certificate: UnknownIssuer";
        assert!(is_tls_problem(reason));
        assert_eq!(
            tls_reason(reason),
            "invalid peer certificate: UnknownIssuer"
        );
        assert!(!is_tls_problem(
            "tcp connect error: Connection refused (os error 111)"
        ));
    }

    #[test]
    fn debug_shows_no_secret() {
        let credentials = inputs_from(CLOUDS, "openstack", "s", None, &config()).unwrap();
        let inputs = CloudInputs {
            credentials,
            secret_source: "ns/c".into(),
            ca_source: "ns/m key k".into(),
        };
        let printed = format!("{inputs:?}");
        assert!(!printed.contains("hunter2"), "{printed}");
    }
}
