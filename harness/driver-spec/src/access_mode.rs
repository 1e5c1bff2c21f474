//! The access modes of `DriverInfo.RequiredAccessModes`, spelt as Kubernetes spells
//! `PersistentVolumeAccessMode`.

use std::fmt;
use std::str::FromStr;

use super::reader::{Check, Field, unknown};

/// A PersistentVolume access mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AccessMode {
    /// `ReadWriteOnce`: read-write by one node.
    ReadWriteOnce,
    /// `ReadOnlyMany`: read-only by many nodes.
    ReadOnlyMany,
    /// `ReadWriteMany`: read-write by many nodes.
    ReadWriteMany,
    /// `ReadWriteOncePod`: read-write by one pod.
    ReadWriteOncePod,
}

impl AccessMode {
    /// Every access mode.
    pub const ALL: [AccessMode; 4] = [
        AccessMode::ReadWriteOnce,
        AccessMode::ReadOnlyMany,
        AccessMode::ReadWriteMany,
        AccessMode::ReadWriteOncePod,
    ];

    /// The Kubernetes spelling, as in `spec.accessModes`.
    pub fn as_str(self) -> &'static str {
        match self {
            AccessMode::ReadWriteOnce => "ReadWriteOnce",
            AccessMode::ReadOnlyMany => "ReadOnlyMany",
            AccessMode::ReadWriteMany => "ReadWriteMany",
            AccessMode::ReadWriteOncePod => "ReadWriteOncePod",
        }
    }

    /// Reads `DriverInfo.RequiredAccessModes`: a list of access modes; when absent or empty,
    /// `[ReadWriteOnce]`, the suites' default.
    pub(super) fn read_list(field: Option<&Field>) -> Check<Vec<AccessMode>> {
        let names = AccessMode::ALL.map(AccessMode::as_str);
        let mut modes = Vec::new();
        for item in field.map(Field::items).transpose()?.unwrap_or_default() {
            let name = item.str()?;
            let mode = name
                .parse()
                .map_err(|_| item.issue(unknown("access mode", name, &names)))?;
            modes.push(mode);
        }
        if modes.is_empty() {
            modes.push(AccessMode::ReadWriteOnce);
        }
        Ok(modes)
    }
}

impl fmt::Display for AccessMode {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is no access mode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown access mode {0:?}")]
pub struct UnknownAccessMode(pub String);

impl FromStr for AccessMode {
    type Err = UnknownAccessMode;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        AccessMode::ALL
            .into_iter()
            .find(|mode| mode.as_str() == name)
            .ok_or_else(|| UnknownAccessMode(name.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for mode in AccessMode::ALL {
            assert_eq!(mode.as_str().parse::<AccessMode>(), Ok(mode));
            assert_eq!(mode.to_string(), mode.as_str());
        }
        assert_eq!(
            "RWO".parse::<AccessMode>(),
            Err(UnknownAccessMode("RWO".into()))
        );
    }
}
