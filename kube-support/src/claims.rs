//! A PersistentVolumeClaim's annotations, as a CSI controller reads them for
//! `--pvc-annotations` (the claim named by CreateVolume's `csi.storage.k8s.io/pvc/name` and
//! `…/pvc/namespace` parameters). The client is built as upstream's `BuildConfigFromFlags`
//! builds it; errors name the flag or the claim at fault. What the annotations mean is the
//! driver's business.

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::Api;

/// Why a claim's annotations could not be read. Every message starts with
/// `--pvc-annotations:`.
#[derive(Clone, Debug, thiserror::Error)]
pub enum ClaimError {
    /// No Kubernetes client could be built from the flags (a driver's FailedPrecondition).
    #[error("--pvc-annotations: Kubernetes client: {0}")]
    Client(String),
    /// The claim does not exist (a driver's NotFound).
    #[error("--pvc-annotations: claim {namespace}/{name} not found")]
    NotFound {
        /// The claim's namespace.
        namespace: String,
        /// The claim's name.
        name: String,
    },
    /// The API server could not be asked, or refused (a driver's Unavailable).
    #[error("--pvc-annotations: reading claim {namespace}/{name}: {reason}")]
    Read {
        /// The claim's namespace.
        namespace: String,
        /// The claim's name.
        name: String,
        /// The client's error.
        reason: String,
    },
}

/// Reads claims from the Kubernetes API.
#[derive(Clone)]
pub struct ClaimReader {
    client: kube::Client,
}

impl std::fmt::Debug for ClaimReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClaimReader").finish_non_exhaustive()
    }
}

/// A driver's flags for reading claims: `--pvc-annotations` (read the claim's
/// `<driver>/affinity` and `/anti-affinity` annotations in CreateVolume and send them as
/// scheduler hints; needs the provisioner's `--extra-create-metadata`), `--master` and
/// `--kubeconfig`, as upstream's drivers name them.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct ClaimFlags {
    /// Read the claim's affinity annotations in CreateVolume and send them as scheduler hints.
    #[arg(long = "pvc-annotations", num_args = 0..=1, default_missing_value = "true",
          default_value_t = false, action = clap::ArgAction::Set)]
    pub pvc_annotations: bool,

    /// Kubernetes API server address for `--pvc-annotations` (overrides the kubeconfig's).
    #[arg(long)]
    pub master: Option<String>,

    /// Kubeconfig file for `--pvc-annotations` (else `--master`, else in-cluster).
    #[arg(long)]
    pub kubeconfig: Option<std::path::PathBuf>,
}

impl ClaimFlags {
    /// A claim reader when `--pvc-annotations` is on (see [`ClaimReader::connect`]).
    pub async fn reader(&self) -> Result<Option<ClaimReader>, ClaimError> {
        if !self.pvc_annotations {
            return Ok(None);
        }
        let reader = ClaimReader::connect(self.master.as_deref(), self.kubeconfig.as_deref());
        Ok(Some(reader.await?))
    }
}

impl ClaimReader {
    /// A client from `kubeconfig` (with `master` overriding its server), else `master`
    /// alone, else the in-cluster configuration, as upstream's `BuildConfigFromFlags`.
    pub async fn connect(
        master: Option<&str>,
        kubeconfig: Option<&Path>,
    ) -> Result<Self, ClaimError> {
        let failed = ClaimError::Client;
        let master = master.filter(|m| !m.is_empty());
        let mut config = match (kubeconfig, master) {
            (Some(path), _) => {
                let file = kube::config::Kubeconfig::read_from(path)
                    .map_err(|e| failed(format!("--kubeconfig {}: {e}", path.display())))?;
                kube::Config::from_custom_kubeconfig(
                    file,
                    &kube::config::KubeConfigOptions::default(),
                )
                .await
                .map_err(|e| failed(format!("--kubeconfig {}: {e}", path.display())))?
            }
            (None, Some(master)) => kube::Config::new(
                master
                    .parse()
                    .map_err(|e| failed(format!("--master {master:?}: {e}")))?,
            ),
            (None, None) => kube::Config::incluster()
                .map_err(|e| failed(format!("in-cluster configuration: {e}")))?,
        };
        if let (Some(_), Some(master)) = (kubeconfig, master) {
            config.cluster_url = master
                .parse()
                .map_err(|e| failed(format!("--master {master:?}: {e}")))?;
        }
        let client = kube::Client::try_from(config).map_err(|e| failed(e.to_string()))?;
        Ok(ClaimReader { client })
    }

    /// The annotations of claim `namespace/name`.
    pub async fn annotations(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<BTreeMap<String, String>, ClaimError> {
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), namespace);
        match claims.get(name).await {
            Ok(claim) => Ok(claim.metadata.annotations.unwrap_or_default()),
            Err(kube::Error::Api(status)) if status.code == 404 => Err(ClaimError::NotFound {
                namespace: namespace.to_string(),
                name: name.to_string(),
            }),
            Err(e) => Err(ClaimError::Read {
                namespace: namespace.to_string(),
                name: name.to_string(),
                reason: e.to_string(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test]
    async fn without_cluster_access_the_flag_fails_clearly() {
        // Not in a pod: no in-cluster configuration, as upstream's client finds none.
        if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
            return;
        }
        let error = ClaimReader::connect(None, None).await.unwrap_err();
        assert!(error.to_string().contains("--pvc-annotations"), "{error}");
        let error = ClaimReader::connect(Some("not a url"), None)
            .await
            .unwrap_err();
        assert!(error.to_string().contains("--master"), "{error}");
        let error = ClaimReader::connect(None, Some(Path::new("/nonexistent/kubeconfig")))
            .await
            .unwrap_err();
        assert!(
            error.to_string().contains("/nonexistent/kubeconfig"),
            "{error}"
        );
    }
}
