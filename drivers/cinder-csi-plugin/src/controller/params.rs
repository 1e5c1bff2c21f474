//! StorageClass parameters and requested sizes, parsed into typed values.

use std::collections::HashMap;

use crate::error::{Error, Result};

/// One GiB: Cinder sizes volumes in whole GiB.
pub const GIB: i64 = 1 << 30;

/// The StorageClass parameters this driver understands.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VolumeParameters {
    /// `type`: the Cinder volume type.
    pub volume_type: Option<String>,
    /// `availability`: the Cinder availability zone (wins over topology).
    pub availability: Option<String>,
    /// `fsType`: the file system the node makes (passed in the volume context).
    pub fs_type: Option<String>,
}

/// Prefix of the parameters the external-provisioner adds (`--extra-create-metadata`).
pub const PROVISIONER_PREFIX: &str = "csi.storage.k8s.io/";

impl TryFrom<&HashMap<String, String>> for VolumeParameters {
    type Error = Error;

    fn try_from(parameters: &HashMap<String, String>) -> Result<Self> {
        let mut parsed = VolumeParameters::default();
        for (key, value) in parameters {
            let value = Some(value.clone()).filter(|v| !v.is_empty());
            match key.as_str() {
                "type" => parsed.volume_type = value,
                "availability" => parsed.availability = value,
                "fsType" | "fstype" => {
                    if let Some(fs) = value.as_deref()
                        && !["ext2", "ext3", "ext4", "xfs"].contains(&fs)
                    {
                        return Err(Error::InvalidArgument(format!(
                            "StorageClass parameter fsType = {fs:?}: expected ext2, ext3, ext4 or xfs"
                        )));
                    }
                    parsed.fs_type = value;
                }
                key if key.starts_with(PROVISIONER_PREFIX) => {}
                other => {
                    return Err(Error::InvalidArgument(format!(
                        "unknown StorageClass parameter {other:?} (known: type, availability, fsType)"
                    )));
                }
            }
        }
        Ok(parsed)
    }
}

/// The size in GiB for a capacity range: the required bytes rounded up (1 GiB when none),
/// refused when above the limit.
pub fn size_gib(required_bytes: i64, limit_bytes: i64) -> Result<i64> {
    if required_bytes < 0 || limit_bytes < 0 {
        return Err(Error::InvalidArgument(
            "capacity_range must not be negative".into(),
        ));
    }
    let gib = if required_bytes == 0 {
        1
    } else {
        required_bytes / GIB + i64::from(required_bytes % GIB != 0)
    };
    if limit_bytes > 0 && gib.saturating_mul(GIB) > limit_bytes {
        return Err(Error::OutOfRange(format!(
            "Cinder sizes volumes in whole GiB: {required_bytes} bytes rounds up to {gib} GiB, \
             above the limit of {limit_bytes} bytes"
        )));
    }
    Ok(gib)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn known_parameters_parse() -> Result<()> {
        let parsed = VolumeParameters::try_from(&params(&[
            ("type", "fast"),
            ("availability", "nova"),
            ("fsType", "xfs"),
            ("csi.storage.k8s.io/pvc/name", "data"),
        ]))?;
        assert_eq!(
            parsed,
            VolumeParameters {
                volume_type: Some("fast".into()),
                availability: Some("nova".into()),
                fs_type: Some("xfs".into()),
            }
        );
        Ok(())
    }

    #[test]
    fn unknown_parameters_and_file_systems_are_named() {
        let unknown = VolumeParameters::try_from(&params(&[("size", "1")]))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(unknown.contains("\"size\""), "{unknown}");
        let fs = VolumeParameters::try_from(&params(&[("fsType", "zfs")]))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(fs.contains("zfs"), "{fs}");
    }

    #[test]
    fn sizes_round_up_to_whole_gib() -> Result<()> {
        assert_eq!(size_gib(0, 0)?, 1);
        assert_eq!(size_gib(1, 0)?, 1);
        assert_eq!(size_gib(GIB, 0)?, 1);
        assert_eq!(size_gib(GIB + 1, 0)?, 2);
        assert_eq!(size_gib(GIB, GIB)?, 1);
        assert!(matches!(
            size_gib(GIB + 1, GIB + 100),
            Err(Error::OutOfRange(_))
        ));
        assert!(matches!(size_gib(-1, 0), Err(Error::InvalidArgument(_))));
        Ok(())
    }
}
