//! `vol_data.json`, the file kubelet writes next to a staging directory (`driverName`,
//! `volumeHandle`) and a publish directory (also `specVolID`, `nodeName`, `attachmentID`,
//! `volumeLifecycleMode`) so that unmounting and reconstruction know the volume without the
//! API; and the directory helpers that read and clean those places.

use std::path::{Path, PathBuf};

use kube_support::error::IoContext;
use serde::{Deserialize, Serialize};

use super::paths::unique_volume_name;
use super::state::VolumeIdentity;
use crate::csi::error::{Error, Result};

/// The name of the volume metadata files next to staging and publish directories.
pub const VOL_DATA_FILE: &str = "vol_data.json";

/// What `vol_data.json` holds (kubelet's keys).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct VolData {
    pub driver_name: String,
    pub volume_handle: String,
    #[serde(
        default,
        rename = "specVolID",
        skip_serializing_if = "String::is_empty"
    )]
    pub spec_vol_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub node_name: String,
    #[serde(
        default,
        rename = "attachmentID",
        skip_serializing_if = "String::is_empty"
    )]
    pub attachment_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub volume_lifecycle_mode: String,
}

impl VolData {
    /// Reads and parses `path`.
    pub fn read(path: &Path) -> Result<VolData> {
        let text = std::fs::read(path).map_err(Error::io("reading", path))?;
        serde_json::from_slice(&text).map_err(|source| Error::VolData {
            action: "parsing",
            path: path.to_owned(),
            source,
        })
    }

    /// Writes `path`, creating its directory.
    pub fn write(&self, path: &Path) -> Result<()> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(Error::io("creating", parent))?;
        }
        let text = serde_json::to_vec(self).map_err(|source| Error::VolData {
            action: "encoding",
            path: path.to_owned(),
            source,
        })?;
        std::fs::write(path, text).map_err(Error::io("writing", path))
    }

    /// The unique volume name.
    pub fn unique_name(&self) -> String {
        unique_volume_name(&self.driver_name, &self.volume_handle)
    }

    /// The volume, whose PV is `pv` (the directory name the file was found in), a block
    /// volume when `block`.
    pub fn identity(&self, pv: &str, block: bool) -> VolumeIdentity {
        VolumeIdentity {
            driver: self.driver_name.clone(),
            handle: self.volume_handle.clone(),
            pv: pv.to_string(),
            block,
        }
    }
}

/// The directories in `dir`: (name, path), sorted; none when it cannot be read.
pub(super) fn subdirs(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(String, PathBuf)> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .collect();
    found.sort();
    found
}

/// Removes an unmounted volume directory `mount_dir` (a staging or publish directory), the
/// `vol_data.json` next to it and their parent directory, all three tried; returns the first
/// failure. Missing ones are fine.
/// The names of the entries of `dir`, sorted; none when it cannot be read.
pub(super) fn entries(dir: &Path) -> Vec<String> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = read
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

pub(super) fn remove_volume_dirs(mount_dir: &Path) -> Result<()> {
    let Some(parent) = mount_dir.parent() else {
        return remove_dir_if_present(mount_dir);
    };
    let results = [
        remove_dir_if_present(mount_dir),
        remove_file_if_present(&parent.join(VOL_DATA_FILE)),
        remove_dir_if_present(parent),
    ];
    results.into_iter().collect()
}

/// Removes the empty directory `dir`; a missing one is fine.
pub(super) fn remove_dir_if_present(dir: &Path) -> Result<()> {
    match std::fs::remove_dir(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io("removing", dir)(e)),
        _ => Ok(()),
    }
}

/// Removes `file`; a missing one is fine.
pub(super) fn remove_file_if_present(file: &Path) -> Result<()> {
    match std::fs::remove_file(file) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io("removing", file)(e)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use serde_json::json;

    use super::*;

    #[test]
    fn vol_data_uses_kubelets_keys() {
        let data = VolData {
            driver_name: "d".into(),
            volume_handle: "h".into(),
            spec_vol_id: "pv".into(),
            node_name: "n".into(),
            attachment_id: String::new(),
            volume_lifecycle_mode: "Persistent".into(),
        };
        let text = serde_json::to_value(&data).unwrap();
        assert_eq!(
            text,
            json!({"driverName": "d", "volumeHandle": "h", "specVolID": "pv", "nodeName": "n", "volumeLifecycleMode": "Persistent"})
        );
    }

    #[test]
    fn vol_data_round_trips_and_bad_files_are_named() {
        let dir = tempfile::Builder::new()
            .prefix("vol-data-")
            .tempdir()
            .unwrap();
        let path = dir.path().join("pv-1").join(VOL_DATA_FILE);
        let data = VolData {
            driver_name: "d".into(),
            volume_handle: "h".into(),
            ..VolData::default()
        };
        data.write(&path).unwrap();
        assert_eq!(VolData::read(&path).unwrap(), data);
        assert_eq!(data.unique_name(), "kubernetes.io/csi/d^h");

        std::fs::write(&path, b"{").unwrap();
        let error = crate::error_chain(&VolData::read(&path).unwrap_err());
        assert!(
            error.starts_with(&format!("parsing {}: ", path.display())),
            "{error}"
        );
        let missing = dir.path().join("absent").join(VOL_DATA_FILE);
        let error = crate::error_chain(&VolData::read(&missing).unwrap_err());
        assert!(
            error.starts_with(&format!("reading {}: ", missing.display())),
            "{error}"
        );
    }

    #[test]
    fn removing_what_is_not_there_is_fine() {
        let dir = tempfile::Builder::new()
            .prefix("vol-data-")
            .tempdir()
            .unwrap();
        remove_dir_if_present(&dir.path().join("absent")).unwrap();
        remove_file_if_present(&dir.path().join("absent.json")).unwrap();
        std::fs::create_dir_all(dir.path().join("full/x")).unwrap();
        let error = remove_dir_if_present(&dir.path().join("full")).unwrap_err();
        assert!(error.to_string().starts_with("removing "), "{error}");
        assert_eq!(
            subdirs(dir.path()),
            [("full".to_string(), dir.path().join("full"))]
        );
        assert_eq!(entries(dir.path()), ["full"]);
        assert!(entries(&dir.path().join("absent")).is_empty());
    }

    #[test]
    fn a_volume_directory_goes_with_its_vol_data_and_parent() {
        let dir = tempfile::Builder::new()
            .prefix("vol-data-")
            .tempdir()
            .unwrap();
        let mount = dir.path().join("pv-1/mount");
        std::fs::create_dir_all(&mount).unwrap();
        std::fs::write(dir.path().join("pv-1").join(VOL_DATA_FILE), b"{}").unwrap();
        remove_volume_dirs(&mount).unwrap();
        assert!(!dir.path().join("pv-1").exists());

        // A directory that cannot go does not keep the metadata next to it.
        std::fs::create_dir_all(mount.join("left")).unwrap();
        std::fs::write(dir.path().join("pv-1").join(VOL_DATA_FILE), b"{}").unwrap();
        let error = remove_volume_dirs(&mount).unwrap_err();
        assert!(
            error.to_string() == format!("removing {}", mount.display()),
            "{error}"
        );
        assert!(!dir.path().join("pv-1").join(VOL_DATA_FILE).exists());
    }
}
