//! What CSI calls need from a PersistentVolume: its CSI source and the one volume capability
//! upstream's sidecars derive from it (ControllerPublish, ControllerExpandVolume).

use csi_proto::v1::VolumeCapability;
use csi_proto::v1::volume_capability::{
    AccessMode, AccessType, BlockVolume, MountVolume, access_mode::Mode,
};
use k8s_openapi::api::core::v1::{CSIPersistentVolumeSource, PersistentVolumeSpec};

use crate::error::{Error, Result};

/// The CSI source of a PV spec, if it is one of `driver`'s.
pub fn csi_source<'a>(
    spec: &'a PersistentVolumeSpec,
    driver: &str,
) -> Option<&'a CSIPersistentVolumeSource> {
    spec.csi.as_ref().filter(|csi| csi.driver == driver)
}

/// The single capability upstream derives from a PV: the most permissive of its access
/// modes (RWX, then ROX, then RWOP, then RWO), mount with its fsType and mount options, or
/// block for `volumeMode: Block`.
pub fn volume_capability(spec: &PersistentVolumeSpec) -> Result<VolumeCapability> {
    let modes = spec.access_modes.clone().unwrap_or_default();
    let has = |m: &str| modes.iter().any(|x| x == m);
    let mode = if has("ReadWriteMany") {
        Mode::MultiNodeMultiWriter
    } else if has("ReadOnlyMany") {
        Mode::MultiNodeReaderOnly
    } else if has("ReadWriteOncePod") {
        Mode::SingleNodeSingleWriter
    } else if has("ReadWriteOnce") {
        Mode::SingleNodeWriter
    } else {
        return Err(Error::UnsupportedAccessModes(modes));
    };
    let access_type = if spec.volume_mode.as_deref() == Some("Block") {
        AccessType::Block(BlockVolume {})
    } else {
        AccessType::Mount(MountVolume {
            fs_type: spec
                .csi
                .as_ref()
                .and_then(|c| c.fs_type.clone())
                .unwrap_or_default(),
            mount_flags: spec.mount_options.clone().unwrap_or_default(),
            volume_mount_group: String::new(),
        })
    };
    Ok(VolumeCapability {
        access_type: Some(access_type),
        access_mode: Some(AccessMode { mode: mode as i32 }),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn spec(modes: &[&str], block: bool) -> PersistentVolumeSpec {
        PersistentVolumeSpec {
            access_modes: Some(modes.iter().map(|m| m.to_string()).collect()),
            volume_mode: block.then(|| "Block".to_string()),
            mount_options: Some(vec!["nfsvers=4.1".into()]),
            csi: Some(CSIPersistentVolumeSource {
                driver: "d".into(),
                volume_handle: "v".into(),
                fs_type: Some("ext4".into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_most_permissive_mode_wins_and_mount_details_come_from_the_pv() {
        let capability =
            volume_capability(&spec(&["ReadWriteOnce", "ReadWriteMany"], false)).unwrap();
        assert_eq!(
            capability.access_mode.unwrap().mode,
            Mode::MultiNodeMultiWriter as i32
        );
        let Some(AccessType::Mount(mount)) = capability.access_type else {
            panic!("not a mount capability");
        };
        assert_eq!(mount.fs_type, "ext4");
        assert_eq!(mount.mount_flags, ["nfsvers=4.1"]);
        let rwo = volume_capability(&spec(&["ReadWriteOnce"], true)).unwrap();
        assert_eq!(rwo.access_mode.unwrap().mode, Mode::SingleNodeWriter as i32);
        assert!(matches!(rwo.access_type, Some(AccessType::Block(_))));
    }

    #[test]
    fn no_access_mode_is_named() {
        let error = volume_capability(&spec(&[], false))
            .unwrap_err()
            .to_string();
        assert!(error.contains("no supported access mode"), "{error}");
    }
}
