//! `--pvc-annotations`: the claim's affinity annotations as Cinder scheduler hints, as
//! upstream reads them.
//!
//! The controller reads the PersistentVolumeClaim named by the request's
//! `csi.storage.k8s.io/pvc/name` and `csi.storage.k8s.io/pvc/namespace` parameters (the
//! provisioner's `--extra-create-metadata`) from the Kubernetes API, through `--kubeconfig`,
//! else `--master`, else the in-cluster configuration, and takes:
//!
//! - `cinder.csi.openstack.org/affinity`: volumes (names or ids, comma list) the new volume
//!   goes next to (scheduler hint `same_host`);
//! - `cinder.csi.openstack.org/anti-affinity`: volumes it keeps away from
//!   (`different_host`).
//!
//! [`ClaimReader`] is a small copy of the Manila driver's (`manila_csi_plugin::pvc`): moving
//! it to `csi-proto` would give the protocol crate, which every driver builds, the kube
//! client's dependencies.

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::Api;

use crate::error::{Error, Result};

/// The affinity annotation.
pub const AFFINITY: &str = "cinder.csi.openstack.org/affinity";
/// The anti-affinity annotation.
pub const ANTI_AFFINITY: &str = "cinder.csi.openstack.org/anti-affinity";
/// The parameter naming the claim (extra-create-metadata).
pub const PVC_NAME: &str = "csi.storage.k8s.io/pvc/name";
/// The parameter naming the claim's namespace (extra-create-metadata).
pub const PVC_NAMESPACE: &str = "csi.storage.k8s.io/pvc/namespace";

/// The longest volume name Cinder takes.
const MAX_NAME: usize = 255;

/// What the claim's annotations ask of the volume: volume names or ids, unresolved.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaimHints {
    /// For `same_host`.
    pub affinity: Vec<String>,
    /// For `different_host`.
    pub anti_affinity: Vec<String>,
}

impl ClaimHints {
    /// The hints in `annotations`: each a comma list of volume names or ids, entries
    /// trimmed, empty entries skipped (as upstream). An entry Cinder could not name (longer
    /// than 255 characters, or with control characters) is InvalidArgument naming the
    /// annotation.
    pub fn from_annotations(claim: &str, annotations: &BTreeMap<String, String>) -> Result<Self> {
        let list = |key: &str| -> Result<Vec<String>> {
            let Some(value) = annotations.get(key) else {
                return Ok(Vec::new());
            };
            let mut entries: Vec<String> = Vec::new();
            for entry in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                if entry.chars().count() > MAX_NAME || entry.chars().any(char::is_control) {
                    return Err(Error::InvalidArgument(format!(
                        "claim {claim}: annotation {key}={value:?}: {entry:?} is not a volume name or id (a comma-separated list of them is expected)"
                    )));
                }
                if !entries.iter().any(|e| e == entry) {
                    entries.push(entry.to_string());
                }
            }
            Ok(entries)
        };
        Ok(ClaimHints {
            affinity: list(AFFINITY)?,
            anti_affinity: list(ANTI_AFFINITY)?,
        })
    }

    /// Whether the claim asks for nothing.
    pub fn is_empty(&self) -> bool {
        self.affinity.is_empty() && self.anti_affinity.is_empty()
    }
}

/// Whether `text` is a UUID (8-4-4-4-12 hex digits): such an entry is looked up as a volume
/// id first, then as a name.
pub fn is_uuid(text: &str) -> bool {
    text.len() == 36
        && text.split('-').map(str::len).eq([8, 4, 4, 4, 12])
        && text.chars().all(|c| c == '-' || c.is_ascii_hexdigit())
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

impl ClaimReader {
    /// A client from `kubeconfig` (with `master` overriding its server), else `master`
    /// alone, else the in-cluster configuration, as upstream's `BuildConfigFromFlags`.
    pub async fn connect(master: Option<&str>, kubeconfig: Option<&Path>) -> Result<Self> {
        let failed = |what: String| {
            Error::FailedPrecondition(format!("--pvc-annotations: Kubernetes client: {what}"))
        };
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
    ) -> Result<BTreeMap<String, String>> {
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), namespace);
        match claims.get(name).await {
            Ok(claim) => Ok(claim.metadata.annotations.unwrap_or_default()),
            Err(kube::Error::Api(status)) if status.code == 404 => Err(Error::NotFound(format!(
                "--pvc-annotations: claim {namespace}/{name} not found"
            ))),
            Err(e) => Err(Error::Unavailable(format!(
                "--pvc-annotations: reading claim {namespace}/{name}: {e}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test]
    async fn without_cluster_access_the_flag_fails_clearly() {
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

    #[test]
    fn uuids_are_told_from_names() {
        assert!(is_uuid("1b4e28ba-2fa1-11ec-8d3d-0242ac130003"));
        assert!(!is_uuid(
            "pv-k8s--cluster-1b5f47bf-0119-442e-8529-254c36e43644"
        ));
        assert!(!is_uuid("1b4e28ba2fa111ec8d3d0242ac130003"));
        assert!(!is_uuid("1b4e28ba-2fa1-11ec-8d3d-0242ac13000g"));
    }

    #[test]
    fn annotations_become_hints() {
        let annotations = BTreeMap::from([
            (AFFINITY.to_string(), " a, b,,a ".to_string()),
            (ANTI_AFFINITY.to_string(), "c".to_string()),
            ("other".to_string(), "x".to_string()),
        ]);
        let hints = ClaimHints::from_annotations("ns/pvc", &annotations).unwrap();
        assert_eq!(hints.affinity, ["a", "b"]);
        assert_eq!(hints.anti_affinity, ["c"]);
        assert!(
            ClaimHints::from_annotations("ns/pvc", &BTreeMap::new())
                .unwrap()
                .is_empty()
        );
        for bad in ["a,b\nc".to_string(), "x".repeat(256)] {
            let annotations = BTreeMap::from([(ANTI_AFFINITY.to_string(), bad)]);
            let error = ClaimHints::from_annotations("ns/pvc", &annotations).unwrap_err();
            assert!(
                matches!(error, Error::InvalidArgument(_))
                    && error.to_string().contains(ANTI_AFFINITY)
                    && error.to_string().contains("ns/pvc"),
                "{error}"
            );
        }
    }
}
