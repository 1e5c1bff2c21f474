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
//! Reading the claim is shared ([`kube_support::claims::ClaimReader`]); the annotation names
//! and their parsing are this driver's.

use std::collections::BTreeMap;

pub use kube_support::claims::ClaimReader;

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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

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
