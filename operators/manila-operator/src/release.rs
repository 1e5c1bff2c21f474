//! The releases the operator can install: the current one (N) and the previous one (N-1),
//! which the upgrade suite installs first and the current operator then adopts and migrates.
//!
//! N-1 reflects what upstream's older operators really did differently, and nothing else (a
//! unit test of `assets::templates` renders both and checks that the differences are exactly
//! these):
//!
//! - the controller is not highly available: one replica, `Recreate`, no leader election in
//!   the sidecars, no pod anti-affinity and no PodDisruptionBudget (N: two replicas, rolling
//!   one at a time, every sidecar with `--leader-election`, spread over nodes, a budget of
//!   `maxUnavailable: 1`);
//! - no `csi-resizer` in the controller Deployment, and no resizer RBAC;
//! - one ClusterRole and binding `openstack-manila-csi-controllerplugin` shared by every
//!   controller sidecar, instead of a least-privilege ClusterRole per sidecar;
//! - the CA bundle mounted from the `cloud-provider-config` ConfigMap into the driver's pods
//!   (controller and Manila node plugin) at [`PREVIOUS_CA_DIR`], and named in the driver
//!   Secret by `os-certAuthorityPath`, instead of inline as `os-certAuthority`
//!   (`secret_sync`);
//! - StorageClasses without the `controller-expand` secret parameters and without
//!   `allowVolumeExpansion` (`storage_classes`).

use std::fmt;
use std::str::FromStr;

/// Which release's objects to render; the operator's `--release` flag (`OPERATOR_RELEASE`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Release {
    /// The previous release, N-1: the older layout (see the module docs), for upgrade tests.
    Previous,
    /// This operator's release, N.
    #[default]
    Current,
}

/// The version the current release reports (`status.version`, the ClusterOperator's
/// versions): the crate's.
pub const CURRENT_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The version the previous release reports: the crate's version with the pre-release suffix
/// `-previous`. Under SemVer a pre-release sorts before its release (`0.1.0-previous` <
/// `0.1.0`), so N-1 < N as for a real older release, while the string still says which build
/// produced it (N-1 is not an older binary but this one run with `--release previous`).
pub const PREVIOUS_VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "-previous");

/// Where N-1 mounts the CA ConfigMap in the driver's containers (upstream's older operators
/// used this directory for the cloud provider's CA).
pub const PREVIOUS_CA_DIR: &str = "/usr/share/pki/ca-trust-source";
/// The CA bundle's file name in [`PREVIOUS_CA_DIR`].
pub const PREVIOUS_CA_FILE_NAME: &str = "cloud-provider-ca-bundle.pem";

impl Release {
    /// Every release, oldest first.
    pub const ALL: [Release; 2] = [Release::Previous, Release::Current];

    /// The version string it reports.
    pub fn version(self) -> &'static str {
        match self {
            Release::Previous => PREVIOUS_VERSION,
            Release::Current => CURRENT_VERSION,
        }
    }

    /// Its name, as `--release` takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Release::Previous => "previous",
            Release::Current => "current",
        }
    }

    /// Whether the driver Secret names a mounted CA file (`os-certAuthorityPath`) rather than
    /// holding the CA inline (`os-certAuthority`).
    pub fn mounts_ca(self) -> bool {
        self == Release::Previous
    }

    /// The path of the CA bundle in the driver's containers, when the release mounts it.
    pub fn ca_path(self) -> Option<String> {
        self.mounts_ca()
            .then(|| format!("{PREVIOUS_CA_DIR}/{PREVIOUS_CA_FILE_NAME}"))
    }

    /// Whether its StorageClasses allow expansion (with the `controller-expand` secret).
    pub fn expands_volumes(self) -> bool {
        self == Release::Current
    }
}

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A release name that is not one.
#[derive(Debug, thiserror::Error)]
#[error("unknown release {0:?}: expected previous or current")]
pub struct UnknownRelease(String);

impl FromStr for Release {
    type Err = UnknownRelease;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim().to_ascii_lowercase().as_str() {
            "previous" => Ok(Release::Previous),
            "current" => Ok(Release::Current),
            _ => Err(UnknownRelease(text.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn names_versions_and_parsing() {
        assert_eq!(Release::default(), Release::Current);
        assert_eq!(Release::Current.version(), env!("CARGO_PKG_VERSION"));
        assert_eq!(
            Release::Previous.version(),
            format!("{}-previous", env!("CARGO_PKG_VERSION"))
        );
        for release in Release::ALL {
            assert_eq!(release.as_str().parse::<Release>().unwrap(), release);
            assert_eq!(release.to_string(), release.as_str());
        }
        assert_eq!(" Previous ".parse::<Release>().unwrap(), Release::Previous);
        assert_eq!(
            "n-1".parse::<Release>().unwrap_err().to_string(),
            "unknown release \"n-1\": expected previous or current"
        );
        assert_eq!(
            Release::Previous.ca_path().as_deref(),
            Some("/usr/share/pki/ca-trust-source/cloud-provider-ca-bundle.pem")
        );
        assert_eq!(Release::Current.ca_path(), None);
    }
}
