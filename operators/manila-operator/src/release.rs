//! What the Manila operator's previous release (N-1) does differently from the current one
//! (N). The choice of release and the versions they report are the library's
//! ([`operator_kit::release`]); this module says what N-1 means for Manila, and nothing else
//! (a unit test of `assets::templates` renders both and checks that the differences are
//! exactly these):
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

pub use operator_kit::release::Release;
use operator_kit::release::Versions;

/// The versions the Manila operator's releases report: this crate's version, and that with
/// `-previous` for N-1.
pub const VERSIONS: Versions = operator_kit::versions!();
/// The version the current release reports.
pub const CURRENT_VERSION: &str = VERSIONS.current;
/// The version the previous release reports (`<crate version>-previous`).
pub const PREVIOUS_VERSION: &str = VERSIONS.previous;

/// Where N-1 mounts the CA ConfigMap in the driver's containers (upstream's older operators
/// used this directory for the cloud provider's CA).
pub const PREVIOUS_CA_DIR: &str = "/usr/share/pki/ca-trust-source";
/// The CA bundle's file name in [`PREVIOUS_CA_DIR`].
pub const PREVIOUS_CA_FILE_NAME: &str = "cloud-provider-ca-bundle.pem";

/// Whether the driver Secret names a mounted CA file (`os-certAuthorityPath`) rather than
/// holding the CA inline (`os-certAuthority`).
pub fn mounts_ca(release: Release) -> bool {
    release == Release::Previous
}

/// The path of the CA bundle in the driver's containers, when `release` mounts it.
pub fn ca_path(release: Release) -> Option<String> {
    mounts_ca(release).then(|| format!("{PREVIOUS_CA_DIR}/{PREVIOUS_CA_FILE_NAME}"))
}

/// Whether `release`'s StorageClasses allow expansion (with the `controller-expand` secret).
pub fn expands_volumes(release: Release) -> bool {
    release == Release::Current
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_this_crates_and_only_n_minus_1_mounts_the_ca() {
        assert_eq!(CURRENT_VERSION, env!("CARGO_PKG_VERSION"));
        assert_eq!(
            PREVIOUS_VERSION,
            format!("{}-previous", env!("CARGO_PKG_VERSION"))
        );
        assert_eq!(VERSIONS.of(Release::Previous), PREVIOUS_VERSION);
        assert_eq!(
            ca_path(Release::Previous).as_deref(),
            Some("/usr/share/pki/ca-trust-source/cloud-provider-ca-bundle.pem")
        );
        assert_eq!(ca_path(Release::Current), None);
        assert!(expands_volumes(Release::Current) && !expands_volumes(Release::Previous));
    }
}
