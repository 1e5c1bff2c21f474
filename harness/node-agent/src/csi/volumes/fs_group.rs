//! Phase 5, after NodePublishVolume: the pod's `fsGroup` on the published volume, when the
//! CSIDriver's `fsGroupPolicy` lets kubelet change it (`csi_mounter.go` `supportsFSGroup`,
//! then `SetVolumeOwnership`, see [`ownership`](crate::ownership)):
//!
//! - never for a pod without `fsGroup` or a read-only volume (the claim's or the PV's
//!   `readOnly`);
//! - `None`: never;
//! - `File`: always;
//! - `ReadWriteOnceWithFSType` (the default, also without a CSIDriver object): only when the
//!   PV has an `fsType` and `ReadWriteOnce` among its access modes — so NFS-like volumes
//!   (no `fsType`, shared) are left alone.

use std::path::Path;

use k8s_openapi::api::core::v1::Pod;

use super::resolve::ResolvedVolume;
use crate::csi::error::{Error, Result};
use crate::ownership::{FsGroup, set_volume_ownership};

/// The CSIDriver's `spec.fsGroupPolicy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) enum FsGroupPolicy {
    /// `ReadWriteOnceWithFSType` (the default).
    #[default]
    ReadWriteOnceWithFsType,
    /// `File`.
    File,
    /// `None`.
    None,
}

impl FsGroupPolicy {
    /// The policy named `value`; the default when unset (the API server refuses other names).
    pub fn parse(value: Option<&str>) -> FsGroupPolicy {
        match value {
            Some("File") => FsGroupPolicy::File,
            Some("None") => FsGroupPolicy::None,
            _ => FsGroupPolicy::ReadWriteOnceWithFsType,
        }
    }

    /// Whether kubelet changes the ownership of `volume` for a pod with an `fsGroup`.
    pub fn applies_to(self, volume: &ResolvedVolume) -> bool {
        if volume.read_only {
            return false;
        }
        match self {
            FsGroupPolicy::None => false,
            FsGroupPolicy::File => true,
            FsGroupPolicy::ReadWriteOnceWithFsType => {
                let has_fs_type = volume.csi.fs_type.as_deref().is_some_and(|t| !t.is_empty());
                let rwo = volume
                    .spec
                    .access_modes
                    .iter()
                    .flatten()
                    .any(|m| m == "ReadWriteOnce");
                has_fs_type && rwo
            }
        }
    }
}

/// Applies `pod`'s `fsGroup` to `volume`, published at `host_target`, when `policy` says so;
/// a failure is kubelet's `applyFSGroup failed for vol <handle>`.
pub(super) fn apply(
    pod: &Pod,
    volume: &ResolvedVolume,
    policy: FsGroupPolicy,
    host_target: &Path,
) -> Result<()> {
    let Some(fs_group) = FsGroup::of_pod(pod) else {
        return Ok(());
    };
    if !policy.applies_to(volume) {
        tracing::debug!(pv = %volume.pv_name, ?policy, "fsGroup not applied to the volume");
        return Ok(());
    }
    let changed = set_volume_ownership::<Error>(host_target, fs_group, false).map_err(|e| {
        Error::ApplyFsGroup {
            handle: volume.csi.volume_handle.clone(),
            cause: Box::new(e),
        }
    })?;
    tracing::info!(pv = %volume.pv_name, gid = fs_group.gid, changed, "fsGroup applied to the volume");
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use k8s_openapi::api::core::v1::{CSIPersistentVolumeSource, PersistentVolumeSpec};

    use super::*;

    fn volume(fs_type: Option<&str>, modes: &[&str], read_only: bool) -> ResolvedVolume {
        ResolvedVolume {
            volume_name: "data".into(),
            pv_name: "pv-1".into(),
            spec: PersistentVolumeSpec {
                access_modes: Some(modes.iter().map(|m| m.to_string()).collect()),
                ..PersistentVolumeSpec::default()
            },
            csi: CSIPersistentVolumeSource {
                fs_type: fs_type.map(String::from),
                ..CSIPersistentVolumeSource::default()
            },
            read_only,
        }
    }

    #[test]
    fn the_default_policy_needs_an_fs_type_and_read_write_once() {
        let policy = FsGroupPolicy::parse(None);
        assert_eq!(policy, FsGroupPolicy::ReadWriteOnceWithFsType);
        assert!(policy.applies_to(&volume(Some("ext4"), &["ReadWriteOnce"], false)));
        assert!(policy.applies_to(&volume(
            Some("ext4"),
            &["ReadOnlyMany", "ReadWriteOnce"],
            false
        )));
        assert!(!policy.applies_to(&volume(None, &["ReadWriteOnce"], false)));
        assert!(!policy.applies_to(&volume(Some(""), &["ReadWriteOnce"], false)));
        assert!(!policy.applies_to(&volume(Some("ext4"), &["ReadWriteMany"], false)));
        assert!(!policy.applies_to(&volume(Some("ext4"), &["ReadWriteOnce"], true)));
    }

    #[test]
    fn file_always_applies_and_none_never_but_not_to_read_only_volumes() {
        let file = FsGroupPolicy::parse(Some("File"));
        assert!(file.applies_to(&volume(None, &["ReadWriteMany"], false)));
        assert!(!file.applies_to(&volume(None, &["ReadWriteMany"], true)));
        let none = FsGroupPolicy::parse(Some("None"));
        assert!(!none.applies_to(&volume(Some("ext4"), &["ReadWriteOnce"], false)));
    }
}
