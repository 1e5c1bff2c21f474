//! The volume capability kubelet sends in NodeStageVolume, NodePublishVolume and
//! NodeExpandVolume.
//!
//! kubelet (`pkg/volume/csi`, `csi_attacher.go` MountDevice and `csi_mounter.go` SetUpAt)
//! takes the PV's FIRST access mode, `ReadWriteOnce` when it lists none. The sidecars
//! (external-attacher, external-resizer; here `sidecar_common::volume::volume_capability`)
//! instead derive the most permissive mode of the whole list. The two rules genuinely
//! differ upstream, so a PV listing `[ReadWriteOnce, ReadWriteMany]` is published
//! `SINGLE_NODE_WRITER` on the node but `MULTI_NODE_MULTI_WRITER` to the controller; the
//! node agent follows kubelet.

use csi_proto::v1::VolumeCapability;
use csi_proto::v1::volume_capability::access_mode::Mode;
use csi_proto::v1::volume_capability::{AccessMode, AccessType, BlockVolume, MountVolume};
use k8s_openapi::api::core::v1::PersistentVolumeSpec;

/// kubelet's capability for a PV: the access mode of its first access mode
/// (`ReadWriteOnce` → `SINGLE_NODE_WRITER` when none or unknown, `ReadOnlyMany` →
/// `MULTI_NODE_READER_ONLY`, `ReadWriteMany` → `MULTI_NODE_MULTI_WRITER`,
/// `ReadWriteOncePod` → `SINGLE_NODE_SINGLE_WRITER`); a block volume for `volumeMode:
/// Block`, otherwise a mount with `csi.fsType` and `mountOptions`.
pub fn kubelet_volume_capability(spec: &PersistentVolumeSpec) -> VolumeCapability {
    let first = spec
        .access_modes
        .as_ref()
        .and_then(|modes| modes.first())
        .map(String::as_str);
    let mode = match first {
        Some("ReadOnlyMany") => Mode::MultiNodeReaderOnly,
        Some("ReadWriteMany") => Mode::MultiNodeMultiWriter,
        Some("ReadWriteOncePod") => Mode::SingleNodeSingleWriter,
        _ => Mode::SingleNodeWriter,
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
    VolumeCapability {
        access_mode: Some(AccessMode { mode: mode.into() }),
        access_type: Some(access_type),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use k8s_openapi::api::core::v1::CSIPersistentVolumeSource;
    use rstest::rstest;

    use super::*;

    fn spec(modes: &[&str], volume_mode: Option<&str>) -> PersistentVolumeSpec {
        PersistentVolumeSpec {
            access_modes: Some(modes.iter().map(|m| (*m).to_string()).collect()),
            volume_mode: volume_mode.map(str::to_string),
            mount_options: Some(vec!["nfsvers=4.1".into()]),
            csi: Some(CSIPersistentVolumeSource {
                driver: "d".into(),
                volume_handle: "h".into(),
                fs_type: Some("ext4".into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[rstest]
    #[case::rwo(&["ReadWriteOnce"], Mode::SingleNodeWriter)]
    #[case::rox(&["ReadOnlyMany"], Mode::MultiNodeReaderOnly)]
    #[case::rwx(&["ReadWriteMany"], Mode::MultiNodeMultiWriter)]
    #[case::rwop(&["ReadWriteOncePod"], Mode::SingleNodeSingleWriter)]
    #[case::first_not_most_permissive(&["ReadWriteOnce", "ReadWriteMany"], Mode::SingleNodeWriter)]
    #[case::first_wins(&["ReadWriteMany", "ReadWriteOnce"], Mode::MultiNodeMultiWriter)]
    #[case::none_is_rwo(&[], Mode::SingleNodeWriter)]
    fn the_access_mode_is_the_pvs_first(#[case] modes: &[&str], #[case] expected: Mode) {
        let capability = kubelet_volume_capability(&spec(modes, None));
        assert_eq!(capability.access_mode.unwrap().mode, i32::from(expected));
    }

    #[test]
    fn a_filesystem_volume_is_mounted_with_the_pvs_fs_type_and_options() {
        for volume_mode in [None, Some("Filesystem")] {
            match kubelet_volume_capability(&spec(&["ReadWriteOnce"], volume_mode)).access_type {
                Some(AccessType::Mount(m)) => {
                    assert_eq!(m.fs_type, "ext4");
                    assert_eq!(m.mount_flags, ["nfsvers=4.1"]);
                }
                other => panic!("{other:?}"),
            }
        }
        let bare = PersistentVolumeSpec::default();
        assert_eq!(
            kubelet_volume_capability(&bare).access_type,
            Some(AccessType::Mount(MountVolume::default()))
        );
    }

    #[test]
    fn a_block_volume_is_a_block_capability() {
        let capability = kubelet_volume_capability(&spec(&["ReadWriteOnce"], Some("Block")));
        assert_eq!(
            capability.access_type,
            Some(AccessType::Block(BlockVolume {}))
        );
    }
}
