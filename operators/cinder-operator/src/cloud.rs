//! The cloud check of a reconcile: authenticate against Keystone with the clouds.yaml
//! credentials and the ConfigMap's CA bundle (never clouds.yaml's `cacert`, a path on
//! another machine), read Nova's compute and Cinder's volume availability zones, and decide
//! on topology ([`crate::zones`]). A CA that does not verify the cloud (or no CA for a cloud
//! whose certificate needs one) is a [`CloudError::Tls`] naming the certificate problem, the
//! URL and the ConfigMap key to fix, for a condition.

use std::time::Duration;

use openstack_client::{BlockStorageCloud, Credentials, Error as ClientError};

use crate::cloud_conf::Sources;
use crate::zones::{self, TopologyDecision};

/// The User-Agent of the operator's OpenStack requests.
const USER_AGENT: &str = concat!("cinder-csi-driver-operator/", env!("CARGO_PKG_VERSION"));

/// Why the cloud could not be checked. Messages name the Secret or ConfigMap, never a secret.
#[derive(Debug, thiserror::Error)]
pub enum CloudError {
    /// clouds.yaml cannot be used (see [`crate::cloud_conf::TranslationError`]).
    #[error("Secret {secret} key {key}: {reason}")]
    Credentials {
        /// `namespace/name`.
        secret: String,
        /// The key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// Keystone refused the credentials.
    #[error("the credentials of Secret {secret} key {key} were rejected: {reason}")]
    Rejected {
        /// `namespace/name`.
        secret: String,
        /// The key.
        key: String,
        /// Keystone's answer.
        reason: String,
    },
    /// TLS to the cloud failed: its certificate did not verify with the CA bundle.
    #[error(
        "TLS to {service} at {url} failed ({reason}); check the CA bundle (ConfigMap {config_map} key {key}) and the cloud's certificate"
    )]
    Tls {
        /// `Keystone`, `Cinder` or `Nova`.
        service: String,
        /// The URL tried.
        url: String,
        /// The TLS library's reason (e.g. `invalid peer certificate: UnknownIssuer`).
        reason: String,
        /// `namespace/name` of the ConfigMap.
        config_map: String,
        /// The CA bundle key.
        key: String,
    },
    /// Anything else: the cloud unreachable, an API error, an unexpected answer.
    #[error("{0}")]
    Cloud(String),
}

/// Authenticates, reads both zone lists and decides on topology.
pub async fn check(
    clouds_yaml: &str,
    ca_bundle: Option<&str>,
    sources: &Sources,
) -> Result<TopologyDecision, CloudError> {
    let credentials_error = |reason: String| CloudError::Credentials {
        secret: sources.secret.clone(),
        key: sources.clouds_key.clone(),
        reason,
    };
    let origin = format!("Secret {} key {}", sources.secret, sources.clouds_key);
    let mut credentials =
        Credentials::from_clouds_yaml_str(clouds_yaml, &sources.cloud_name, &origin)
            .map_err(|e| credentials_error(e.to_string()))?;
    credentials.tls.ca_file = None;
    credentials.tls.ca_pem = ca_bundle
        .filter(|pem| !pem.trim().is_empty())
        .map(str::to_owned);
    let cloud = BlockStorageCloud::connect(credentials, USER_AGENT, Duration::from_secs(30))
        .map_err(|e| classify(e, sources))?;
    let compute = cloud
        .compute_availability_zones()
        .await
        .map_err(|e| classify(e, sources))?;
    let volume = cloud
        .volume_availability_zones()
        .await
        .map_err(|e| classify(e, sources))?;
    let available = |list: Vec<openstack_client::block_storage::AvailabilityZone>| {
        list.into_iter()
            .filter(|z| z.available)
            .map(|z| z.name)
            .collect::<Vec<_>>()
    };
    Ok(zones::decide(available(compute), available(volume)))
}

fn classify(error: ClientError, sources: &Sources) -> CloudError {
    match error {
        ClientError::Unauthenticated(reason) => CloudError::Rejected {
            secret: sources.secret.clone(),
            key: sources.clouds_key.clone(),
            reason,
        },
        ClientError::Unreachable {
            service,
            url,
            reason,
        } if is_tls_problem(&reason) => CloudError::Tls {
            service: service.into(),
            url,
            reason: tls_reason(&reason),
            config_map: sources.config_map.clone(),
            key: sources.ca_key.clone(),
        },
        ClientError::InvalidArgument(reason) => CloudError::Credentials {
            secret: sources.secret.clone(),
            key: sources.clouds_key.clone(),
            reason,
        },
        other => CloudError::Cloud(other.to_string()),
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
        None => reason.to_owned(),
    }
}
