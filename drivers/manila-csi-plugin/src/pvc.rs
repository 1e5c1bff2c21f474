//! `--pvc-annotations`: the claim's annotations as share options, as upstream reads them.
//!
//! The controller reads the PersistentVolumeClaim named by the request's
//! `csi.storage.k8s.io/pvc/name` and `csi.storage.k8s.io/pvc/namespace` parameters (the
//! provisioner's `--extra-create-metadata`) from the Kubernetes API, through `--kubeconfig`,
//! else `--master`, else the in-cluster configuration, and takes:
//!
//! - `manila.csi.openstack.org/affinity`: shares (names or ids, comma list) the new share
//!   goes next to (scheduler hint `same_host`, microversion 2.65);
//! - `manila.csi.openstack.org/anti-affinity`: shares it keeps away from (`different_host`);
//! - `manila.csi.openstack.org/group-id`: the share group the share is created in (a share
//!   group id; it overrides the StorageClass's `groupID`, as upstream).

use std::collections::BTreeMap;

pub use kube_support::claims::ClaimReader;

use crate::error::{Error, Result};

/// The affinity annotation.
pub const AFFINITY: &str = "manila.csi.openstack.org/affinity";
/// The anti-affinity annotation.
pub const ANTI_AFFINITY: &str = "manila.csi.openstack.org/anti-affinity";
/// The share group annotation.
pub const GROUP_ID: &str = "manila.csi.openstack.org/group-id";
/// The parameter naming the claim (extra-create-metadata).
pub const PVC_NAME: &str = "csi.storage.k8s.io/pvc/name";
/// The parameter naming the claim's namespace (extra-create-metadata).
pub const PVC_NAMESPACE: &str = "csi.storage.k8s.io/pvc/namespace";

/// What the claim's annotations ask of the share.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaimHints {
    /// Share names or ids for `same_host`.
    pub affinity: Vec<String>,
    /// Share names or ids for `different_host`.
    pub anti_affinity: Vec<String>,
    /// The share group id.
    pub group_id: Option<String>,
}

impl ClaimHints {
    /// The hints in `annotations`; a group id that is not a share group id (a UUID) is
    /// InvalidArgument naming the annotation.
    pub fn from_annotations(claim: &str, annotations: &BTreeMap<String, String>) -> Result<Self> {
        let group_id = match annotations.get(GROUP_ID).map(|g| g.trim()) {
            None | Some("") => None,
            Some(group) if openstack_client::manila::is_manila_id(group) => Some(group.to_string()),
            Some(group) => {
                return Err(Error::InvalidArgument(format!(
                    "claim {claim}: annotation {GROUP_ID}={group:?}: not a Manila share group id (a UUID)"
                )));
            }
        };
        let list = |key: &str| -> Vec<String> {
            annotations
                .get(key)
                .map(|v| {
                    v.split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        Ok(ClaimHints {
            affinity: list(AFFINITY),
            anti_affinity: list(ANTI_AFFINITY),
            group_id,
        })
    }

    /// Whether the claim asks for nothing.
    pub fn is_empty(&self) -> bool {
        self.affinity.is_empty() && self.anti_affinity.is_empty() && self.group_id.is_none()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn annotations_become_hints() {
        let annotations = BTreeMap::from([
            (AFFINITY.to_string(), "a, b".to_string()),
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
        let group = BTreeMap::from([(GROUP_ID.to_string(), "g".to_string())]);
        let error = ClaimHints::from_annotations("ns/pvc", &group).unwrap_err();
        assert!(
            error.to_string().contains(GROUP_ID) && error.to_string().contains("\"g\""),
            "{error}"
        );
        let id = "0a1b2c3d-4e5f-4a6b-8c7d-8e9fa0b1c2d3";
        let group = BTreeMap::from([(GROUP_ID.to_string(), format!(" {id} "))]);
        let hints = ClaimHints::from_annotations("ns/pvc", &group).unwrap();
        assert_eq!(hints.group_id.as_deref(), Some(id));
        assert!(!hints.is_empty());
    }
}
