//! The run's view of the cloud: Manila through the shared OpenStack client
//! (`openstack_client`), built from the fake cloud's credentials or from a
//! `clouds.yaml` of a real cloud. Tests read the shares behind their volumes; the runner
//! proves that the shares and snapshots of a test are gone after it.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use openstack_client::Error as ManilaError;
use openstack_client::manila::model::{Share, Snapshot};
use openstack_client::{Connector, Credentials, ManilaClient};

/// The cloud could not be reached or read.
#[derive(Debug, thiserror::Error)]
pub enum CloudError {
    /// The clouds.yaml file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The credentials are unusable, or Manila answered with an error.
    #[error("{what}: {source}")]
    Manila {
        /// What was being done.
        what: String,
        /// Manila's (or Keystone's) answer.
        #[source]
        source: ManilaError,
    },
}

/// How a clouds.yaml and cloud name are named in messages.
pub fn describe(path: &Path, cloud: &str) -> String {
    format!("{} (cloud {cloud})", path.display())
}

/// The flat `os-*` credentials (the driver's Secret) of cloud `cloud` in the clouds.yaml file
/// `path`, its `cacert` file (relative to the clouds.yaml's directory) inlined as
/// `os-certAuthority`.
pub fn flat_secret_from_clouds_yaml(
    path: &Path,
    cloud: &str,
) -> Result<BTreeMap<String, String>, CloudError> {
    let text = std::fs::read_to_string(path).map_err(|source| CloudError::Read {
        path: path.display().to_string(),
        source,
    })?;
    let origin = describe(path, cloud);
    let mut credentials =
        Credentials::from_clouds_yaml_str(&text, cloud, &origin).map_err(|e| {
            CloudError::Manila {
                what: format!("reading {origin}"),
                source: e,
            }
        })?;
    if credentials.tls.ca_pem.is_none()
        && let Some(ca_file) = credentials.tls.ca_file.take()
    {
        let ca_file = match path.parent() {
            Some(dir) if ca_file.is_relative() => dir.join(ca_file),
            _ => ca_file,
        };
        let pem = std::fs::read_to_string(&ca_file).map_err(|source| CloudError::Read {
            path: format!("{} (the cacert of {origin})", ca_file.display()),
            source,
        })?;
        credentials.tls.ca_pem = Some(pem);
    }
    Ok(credentials.to_flat_secret())
}

/// A Manila client for the run, with where its credentials came from.
#[derive(Clone)]
pub struct Cloud {
    client: Arc<ManilaClient>,
    source: String,
}

impl std::fmt::Debug for Cloud {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cloud")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl Cloud {
    /// A client for the flat `os-*` credentials `secret` (the fake cloud's), checked by a
    /// version request.
    pub async fn from_flat_secret(
        secret: HashMap<String, String>,
        source: &str,
    ) -> Result<Cloud, CloudError> {
        let client = Connector::new("openstack-csi-conformance".into())
            .connect(&secret)
            .await
            .map_err(|source_error| CloudError::Manila {
                what: format!("connecting to Manila with the credentials of {source}"),
                source: source_error,
            })?;
        Ok(Cloud {
            client,
            source: source.to_string(),
        })
    }

    /// A client for cloud `cloud` of the clouds.yaml file `path`.
    pub async fn from_clouds_yaml(path: &Path, cloud: &str) -> Result<Cloud, CloudError> {
        let secret = flat_secret_from_clouds_yaml(path, cloud)?;
        Self::from_flat_secret(secret.into_iter().collect(), &describe(path, cloud)).await
    }

    /// Where the credentials came from (never the credentials).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The share `id`, or `None` when Manila does not know it.
    pub async fn share(&self, id: &str) -> Result<Option<Share>, CloudError> {
        match self.client.share(id).await {
            Ok(share) => Ok(Some(share)),
            Err(ManilaError::NotFound(_)) => Ok(None),
            Err(source) => Err(CloudError::Manila {
                what: format!("reading share {id}"),
                source,
            }),
        }
    }

    /// The shares named `name`.
    pub async fn shares_named(&self, name: &str) -> Result<Vec<Share>, CloudError> {
        self.client
            .shares_named(name)
            .await
            .map_err(|source| CloudError::Manila {
                what: format!("listing shares named {name}"),
                source,
            })
    }

    /// The snapshot `id`, or `None` when Manila does not know it.
    pub async fn snapshot(&self, id: &str) -> Result<Option<Snapshot>, CloudError> {
        match self.client.snapshot(id).await {
            Ok(snapshot) => Ok(Some(snapshot)),
            Err(ManilaError::NotFound(_)) => Ok(None),
            Err(source) => Err(CloudError::Manila {
                what: format!("reading snapshot {id}"),
                source,
            }),
        }
    }
}
