//! StorageClass and VolumeSnapshotClass parameters and requested sizes, parsed into typed values.

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

/// The VolumeSnapshotClass parameters this driver understands (upstream's names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotParameters {
    /// `force-create`: Cinder's `force`, which lets it snapshot an `in-use` volume.
    /// Upstream defaults to false; this driver defaults to true (see the README).
    pub force: bool,
    /// Parameters neither this driver nor the external-snapshotter knows: ignored, as
    /// upstream ignores them, and named in a warning.
    pub ignored: Vec<String>,
}

impl Default for SnapshotParameters {
    fn default() -> Self {
        SnapshotParameters {
            force: true,
            ignored: Vec::new(),
        }
    }
}

/// Go's `strconv.ParseBool`, which upstream reads `force-create` with.
fn go_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

impl TryFrom<&HashMap<String, String>> for SnapshotParameters {
    type Error = Error;

    fn try_from(parameters: &HashMap<String, String>) -> Result<Self> {
        let mut parsed = SnapshotParameters::default();
        for (key, value) in parameters {
            match key.as_str() {
                // Upstream: empty means `snapshot`; `backup` makes a Cinder backup, which
                // needs the backup API this driver does not have.
                "type" => match value.as_str() {
                    "" | "snapshot" => {}
                    "backup" => {
                        return Err(Error::InvalidArgument(
                            "VolumeSnapshotClass parameter type = \"backup\": Cinder backups \
                             are not supported by this driver; use type = \"snapshot\" (the \
                             default)"
                                .into(),
                        ));
                    }
                    other => {
                        return Err(Error::InvalidArgument(format!(
                            "VolumeSnapshotClass parameter type = {other:?}: expected \
                             \"snapshot\" (the default; \"backup\" is not supported by this \
                             driver)"
                        )));
                    }
                },
                "force-create" => {
                    parsed.force = go_bool(value).ok_or_else(|| {
                        Error::InvalidArgument(format!(
                            "VolumeSnapshotClass parameter force-create = {value:?}: expected \
                             true or false"
                        ))
                    })?;
                }
                key if key.starts_with(PROVISIONER_PREFIX) => {}
                other => parsed.ignored.push(other.to_string()),
            }
        }
        parsed.ignored.sort();
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
    fn snapshot_parameters_default_to_a_forced_snapshot() -> Result<()> {
        assert_eq!(
            SnapshotParameters::try_from(&params(&[]))?,
            SnapshotParameters::default()
        );
        let parsed = SnapshotParameters::try_from(&params(&[
            ("type", "snapshot"),
            ("csi.storage.k8s.io/volumesnapshot/name", "snap"),
        ]))?;
        assert!(parsed.force && parsed.ignored.is_empty(), "{parsed:?}");
        assert!(SnapshotParameters::try_from(&params(&[("type", "")]))?.force);
        Ok(())
    }

    #[test]
    fn force_create_reads_go_booleans() -> Result<()> {
        for (text, force) in [("true", true), ("1", true), ("False", false), ("f", false)] {
            let parsed = SnapshotParameters::try_from(&params(&[("force-create", text)]))?;
            assert_eq!(parsed.force, force, "{text}");
        }
        let error = SnapshotParameters::try_from(&params(&[("force-create", "yes")]))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            error.contains("force-create") && error.contains("yes"),
            "{error}"
        );
        Ok(())
    }

    #[test]
    fn backups_and_other_types_are_refused() {
        let backup = SnapshotParameters::try_from(&params(&[("type", "backup")]))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            backup.contains("backups are not supported by this driver"),
            "{backup}"
        );
        let other = SnapshotParameters::try_from(&params(&[("type", "clone")]))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(other.contains("\"clone\""), "{other}");
    }

    #[test]
    fn unknown_snapshot_parameters_are_ignored_and_named() -> Result<()> {
        let parsed = SnapshotParameters::try_from(&params(&[
            ("incremental", "true"),
            ("availability", "nova"),
        ]))?;
        assert_eq!(parsed.ignored, vec!["availability", "incremental"]);
        Ok(())
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
