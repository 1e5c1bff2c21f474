//! The pieces of a CreateVolume request that come from the claim and its StorageClass:
//! volume capabilities (one per access mode), capacity and the driver's parameters.

use std::collections::{BTreeMap, HashMap};

use csi_proto::v1::volume_capability::{
    AccessMode, AccessType, BlockVolume, MountVolume, access_mode::Mode,
};
use csi_proto::v1::{CapacityRange, VolumeCapability};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube_support::quantity::parse_bytes;
use sidecar_common::secrets::is_reserved_parameter;

use crate::{Error, Result};

/// StorageClass parameter naming the filesystem type.
pub const FSTYPE_PARAMETER: &str = "csi.storage.k8s.io/fstype";
/// `--extra-create-metadata` keys.
pub const PVC_NAME_KEY: &str = "csi.storage.k8s.io/pvc/name";
/// See [`PVC_NAME_KEY`].
pub const PVC_NAMESPACE_KEY: &str = "csi.storage.k8s.io/pvc/namespace";
/// See [`PVC_NAME_KEY`].
pub const PV_NAME_KEY: &str = "csi.storage.k8s.io/pv/name";

/// A Kubernetes access mode as CSI's.
pub fn csi_access_mode(mode: &str) -> Result<Mode> {
    match mode {
        "ReadWriteMany" => Ok(Mode::MultiNodeMultiWriter),
        "ReadWriteOnce" => Ok(Mode::SingleNodeWriter),
        "ReadOnlyMany" => Ok(Mode::MultiNodeReaderOnly),
        "ReadWriteOncePod" => Ok(Mode::SingleNodeSingleWriter),
        other => Err(Error::Invalid(format!("unsupported access mode {other:?}"))),
    }
}

/// Whether the claim asks for a raw block device.
pub fn is_block(claim: &PersistentVolumeClaim) -> bool {
    claim.spec.as_ref().and_then(|s| s.volume_mode.as_deref()) == Some("Block")
}

/// One capability per access mode of the claim, mount (with `fs_type` and the class's
/// mount options) or block.
pub fn volume_capabilities(
    claim: &PersistentVolumeClaim,
    fs_type: &str,
    mount_options: &[String],
) -> Result<Vec<VolumeCapability>> {
    let modes = claim
        .spec
        .as_ref()
        .and_then(|s| s.access_modes.clone())
        .unwrap_or_default();
    if modes.is_empty() {
        return Err(Error::Invalid("the claim has no access modes".into()));
    }
    let access_type = if is_block(claim) {
        AccessType::Block(BlockVolume {})
    } else {
        AccessType::Mount(MountVolume {
            fs_type: fs_type.to_string(),
            mount_flags: mount_options.to_vec(),
            volume_mount_group: String::new(),
        })
    };
    modes
        .iter()
        .map(|mode| {
            Ok(VolumeCapability {
                access_type: Some(access_type.clone()),
                access_mode: Some(AccessMode {
                    mode: csi_access_mode(mode)? as i32,
                }),
            })
        })
        .collect()
}

/// The requested size (and limit) of the claim.
pub fn capacity(claim: &PersistentVolumeClaim) -> Result<CapacityRange> {
    let resources = claim.spec.as_ref().and_then(|s| s.resources.as_ref());
    let request = resources
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .ok_or_else(|| {
            Error::Invalid("the claim requests no storage (spec.resources.requests.storage)".into())
        })?;
    let limit = resources
        .and_then(|r| r.limits.as_ref())
        .and_then(|l| l.get("storage"));
    Ok(CapacityRange {
        required_bytes: parse_bytes(&request.0)?,
        limit_bytes: limit.map(|l| parse_bytes(&l.0)).transpose()?.unwrap_or(0),
    })
}

/// The class parameters the driver sees: all but `csi.storage.k8s.io/*`, plus the claim and
/// PV names with `--extra-create-metadata`.
pub fn driver_parameters(
    class_parameters: &BTreeMap<String, String>,
    extra_metadata: Option<(&str, &str, &str)>,
) -> HashMap<String, String> {
    let mut parameters: HashMap<String, String> = class_parameters
        .iter()
        .filter(|(k, _)| !is_reserved_parameter(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if let Some((pvc_name, pvc_namespace, pv_name)) = extra_metadata {
        parameters.insert(PVC_NAME_KEY.into(), pvc_name.into());
        parameters.insert(PVC_NAMESPACE_KEY.into(), pvc_namespace.into());
        parameters.insert(PV_NAME_KEY.into(), pv_name.into());
    }
    parameters
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use k8s_openapi::api::core::v1::{PersistentVolumeClaimSpec, VolumeResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use rstest::rstest;

    fn claim(modes: &[&str], size: &str, block: bool) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(modes.iter().map(|m| m.to_string()).collect()),
                resources: Some(VolumeResourceRequirements {
                    requests: Some([("storage".to_string(), Quantity(size.into()))].into()),
                    ..Default::default()
                }),
                volume_mode: block.then(|| "Block".to_string()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[rstest]
    #[case("ReadWriteMany", Mode::MultiNodeMultiWriter)]
    #[case("ReadWriteOnce", Mode::SingleNodeWriter)]
    #[case("ReadOnlyMany", Mode::MultiNodeReaderOnly)]
    #[case("ReadWriteOncePod", Mode::SingleNodeSingleWriter)]
    fn access_modes_map_as_upstream(#[case] k8s: &str, #[case] csi: Mode) {
        assert_eq!(csi_access_mode(k8s).unwrap(), csi);
    }

    #[test]
    fn one_capability_per_access_mode_with_fs_type_and_mount_options() {
        let caps = volume_capabilities(
            &claim(&["ReadWriteMany", "ReadOnlyMany"], "1Gi", false),
            "ext4",
            &["noatime".into()],
        )
        .unwrap();
        assert_eq!(caps.len(), 2);
        let Some(AccessType::Mount(mount)) = &caps[0].access_type else {
            panic!("{caps:?}")
        };
        assert_eq!(
            (mount.fs_type.as_str(), mount.mount_flags.as_slice()),
            ("ext4", &["noatime".to_string()][..])
        );
        assert_eq!(
            caps[1].access_mode.unwrap().mode,
            Mode::MultiNodeReaderOnly as i32
        );
        let block = volume_capabilities(&claim(&["ReadWriteOnce"], "1Gi", true), "", &[]).unwrap();
        assert!(matches!(block[0].access_type, Some(AccessType::Block(_))));
    }

    #[test]
    fn capacity_comes_from_the_request() {
        assert_eq!(
            capacity(&claim(&["ReadWriteOnce"], "2Gi", false))
                .unwrap()
                .required_bytes,
            2 << 30
        );
        let error = capacity(&PersistentVolumeClaim::default())
            .unwrap_err()
            .to_string();
        assert!(error.contains("requests no storage"), "{error}");
    }

    #[test]
    fn reserved_parameters_are_dropped_and_extra_metadata_added() {
        let class = BTreeMap::from([
            ("type".to_string(), "default".to_string()),
            (
                "csi.storage.k8s.io/provisioner-secret-name".to_string(),
                "s".to_string(),
            ),
            ("csi.storage.k8s.io/fstype".to_string(), "ext4".to_string()),
        ]);
        let plain = driver_parameters(&class, None);
        assert_eq!(
            plain,
            HashMap::from([("type".to_string(), "default".to_string())])
        );
        let extra = driver_parameters(&class, Some(("data", "apps", "pvc-1")));
        assert_eq!(extra[PVC_NAME_KEY], "data");
        assert_eq!(extra[PVC_NAMESPACE_KEY], "apps");
        assert_eq!(extra[PV_NAME_KEY], "pvc-1");
        assert_eq!(extra.len(), 4);
    }
}
