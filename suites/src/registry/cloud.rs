//! The run's view of the cloud through the shared OpenStack client (`openstack_client`):
//! Manila for the Manila driver, Cinder for the Cinder driver, built from the fake cloud's
//! credentials or from a `clouds.yaml` of a real cloud. Tests read the shares (or volumes)
//! behind their claims; the runner proves that the volumes and snapshots of a test are gone
//! after it, whichever service holds them ([`Cloud::volume`], [`Cloud::snapshot_status`]).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use openstack_client::Error as ApiError;
use openstack_client::clouds::Environment;
use openstack_client::manila::model::{Share, Snapshot};
use openstack_client::{BlockStorageCloud, Connector, Credentials, ManilaClient};

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
    /// The credentials are unusable, or the service answered with an error.
    #[error("{what}: {source}")]
    Api {
        /// What was being done.
        what: String,
        /// The service's (or Keystone's) answer.
        #[source]
        source: ApiError,
    },
    /// A Manila call on the Cinder driver's cloud (a test of the Manila driver's own).
    #[error("{0}: the run's cloud is Cinder's, not Manila's")]
    NotManila(String),
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
        Credentials::from_clouds_yaml_str(&text, cloud, &origin).map_err(|e| CloudError::Api {
            what: format!("reading {origin}"),
            source: e,
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

/// A volume behind a claim as the run's cloud shows it: a Manila share or a Cinder volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudVolume {
    /// Its id (the CSI volume handle).
    pub id: String,
    /// Its status (`available`, `in-use`, `deleting`, …).
    pub status: String,
    /// Its size in GiB.
    pub size_gib: i64,
    /// Its availability zone.
    pub zone: Option<String>,
    /// The servers it is attached to (Cinder).
    pub attached_to: Vec<String>,
}

impl std::fmt::Display for CloudVolume {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}, {} GiB", self.id, self.status, self.size_gib)?;
        if let Some(zone) = &self.zone {
            write!(f, ", zone {zone}")?;
        }
        if !self.attached_to.is_empty() {
            write!(f, ", attached to {}", self.attached_to.join(", "))?;
        }
        write!(f, ")")
    }
}

#[derive(Clone)]
enum Service {
    Manila(Arc<ManilaClient>),
    Cinder(Arc<BlockStorageCloud>),
}

/// The run's client of the cloud (Manila or Cinder), with where its credentials came from.
#[derive(Clone)]
pub struct Cloud {
    service: Service,
    source: String,
}

impl std::fmt::Debug for Cloud {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cloud")
            .field("source", &self.source)
            .field("cinder", &self.is_cinder())
            .finish_non_exhaustive()
    }
}

impl Cloud {
    /// A Manila client for the flat `os-*` credentials `secret` (the fake cloud's), checked
    /// by a version request.
    pub async fn from_flat_secret(
        secret: HashMap<String, String>,
        source: &str,
    ) -> Result<Cloud, CloudError> {
        let client = Connector::new("openstack-csi-conformance".into())
            .connect(&secret)
            .await
            .map_err(|source_error| CloudError::Api {
                what: format!("connecting to Manila with the credentials of {source}"),
                source: source_error,
            })?;
        Ok(Cloud {
            service: Service::Manila(client),
            source: source.to_string(),
        })
    }

    /// A Cinder client for the flat `os-*` credentials `secret`, checked by listing the
    /// volume availability zones.
    pub async fn cinder_from_flat_secret(
        secret: HashMap<String, String>,
        source: &str,
    ) -> Result<Cloud, CloudError> {
        let api = |what: &str| {
            let what = format!("{what} with the credentials of {source}");
            move |source_error| CloudError::Api {
                what,
                source: source_error,
            }
        };
        let credentials = Credentials::from_secrets(&secret, &Environment::default())
            .map_err(api("reading the credentials"))?;
        let client = BlockStorageCloud::connect(
            credentials,
            "openstack-csi-conformance",
            std::time::Duration::from_secs(30),
        )
        .map_err(api("connecting to Cinder"))?;
        client
            .volume_availability_zones()
            .await
            .map_err(api("listing Cinder's availability zones"))?;
        Ok(Cloud {
            service: Service::Cinder(Arc::new(client)),
            source: source.to_string(),
        })
    }

    /// A Manila client for cloud `cloud` of the clouds.yaml file `path`.
    pub async fn from_clouds_yaml(path: &Path, cloud: &str) -> Result<Cloud, CloudError> {
        let secret = flat_secret_from_clouds_yaml(path, cloud)?;
        Self::from_flat_secret(secret.into_iter().collect(), &describe(path, cloud)).await
    }

    /// Where the credentials came from (never the credentials).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether this is the Cinder driver's cloud.
    pub fn is_cinder(&self) -> bool {
        matches!(self.service, Service::Cinder(_))
    }

    /// What the service calls a volume (`share`, `volume`), for messages.
    pub fn volume_noun(&self) -> &'static str {
        match self.service {
            Service::Manila(_) => "share",
            Service::Cinder(_) => "volume",
        }
    }

    fn manila(&self, what: &str) -> Result<&ManilaClient, CloudError> {
        match &self.service {
            Service::Manila(client) => Ok(client),
            Service::Cinder(_) => Err(CloudError::NotManila(what.to_string())),
        }
    }

    /// The volume (share or Cinder volume) `id`, or `None` when the cloud does not know it.
    pub async fn volume(&self, id: &str) -> Result<Option<CloudVolume>, CloudError> {
        let what = || format!("reading {} {id}", self.volume_noun());
        match &self.service {
            Service::Manila(_) => Ok(self.share(id).await?.map(|share| share_view(&share))),
            Service::Cinder(client) => match client.volume(id).await {
                Ok(volume) => Ok(Some(volume_view(&volume))),
                Err(e) if e.is_not_found() => Ok(None),
                Err(source) => Err(CloudError::Api {
                    what: what(),
                    source,
                }),
            },
        }
    }

    /// The volumes (shares or Cinder volumes) named `name`.
    pub async fn volumes_named(&self, name: &str) -> Result<Vec<CloudVolume>, CloudError> {
        match &self.service {
            Service::Manila(_) => Ok(self
                .shares_named(name)
                .await?
                .iter()
                .map(share_view)
                .collect()),
            Service::Cinder(client) => client
                .volumes(Some(name))
                .await
                .map(|volumes| volumes.iter().map(volume_view).collect())
                .map_err(|source| CloudError::Api {
                    what: format!("listing volumes named {name}"),
                    source,
                }),
        }
    }

    /// The status of the snapshot `id` (Manila's or Cinder's), or `None` when the cloud does
    /// not know it.
    pub async fn snapshot_status(&self, id: &str) -> Result<Option<String>, CloudError> {
        match &self.service {
            Service::Manila(_) => Ok(self.snapshot(id).await?.map(|s| s.status)),
            Service::Cinder(client) => match client.snapshot(id).await {
                Ok(snapshot) => Ok(Some(snapshot.status)),
                Err(e) if e.is_not_found() => Ok(None),
                Err(source) => Err(CloudError::Api {
                    what: format!("reading snapshot {id}"),
                    source,
                }),
            },
        }
    }

    /// The share `id`, or `None` when Manila does not know it.
    pub async fn share(&self, id: &str) -> Result<Option<Share>, CloudError> {
        let what = format!("reading share {id}");
        match self.manila(&what)?.share(id).await {
            Ok(share) => Ok(Some(share)),
            Err(ApiError::NotFound(_)) => Ok(None),
            Err(source) => Err(CloudError::Api { what, source }),
        }
    }

    /// The shares named `name`.
    pub async fn shares_named(&self, name: &str) -> Result<Vec<Share>, CloudError> {
        let what = format!("listing shares named {name}");
        self.manila(&what)?
            .shares_named(name)
            .await
            .map_err(|source| CloudError::Api { what, source })
    }

    /// The Manila snapshot `id`, or `None` when Manila does not know it.
    pub async fn snapshot(&self, id: &str) -> Result<Option<Snapshot>, CloudError> {
        let what = format!("reading snapshot {id}");
        match self.manila(&what)?.snapshot(id).await {
            Ok(snapshot) => Ok(Some(snapshot)),
            Err(ApiError::NotFound(_)) => Ok(None),
            Err(source) => Err(CloudError::Api { what, source }),
        }
    }
}

fn share_view(share: &Share) -> CloudVolume {
    CloudVolume {
        id: share.id.clone(),
        status: share.status.clone(),
        size_gib: i64::try_from(share.size).unwrap_or(i64::MAX),
        zone: share.availability_zone.clone(),
        attached_to: Vec::new(),
    }
}

fn volume_view(volume: &openstack_client::cinder::Volume) -> CloudVolume {
    CloudVolume {
        id: volume.id.clone(),
        status: volume.status.clone(),
        size_gib: volume.size,
        zone: volume.availability_zone.clone(),
        attached_to: volume
            .attachments
            .iter()
            .map(|a| a.server_id.clone())
            .collect(),
    }
}
