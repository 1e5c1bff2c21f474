//! Finding a Cinder volume's block device on the node, and its size.
//!
//! Nova attaches a volume as a virtio disk whose serial is the volume id cut to 20
//! characters; udev links it as `/dev/disk/by-id/virtio-<serial>` (and, on virtio-scsi, as
//! `scsi-0QEMU_QEMU_HARDDISK_<id>`). The directory is `/dev/disk/by-id` unless the
//! environment variable [`DISK_BY_ID_DIR_ENV`] names another: the harness and the tests
//! point it at a directory of symlinks to loop devices.

use std::io::{Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Where udev links disks by id.
pub const DEFAULT_DISK_BY_ID_DIR: &str = "/dev/disk/by-id";

/// The environment variable that overrides [`DEFAULT_DISK_BY_ID_DIR`].
pub const DISK_BY_ID_DIR_ENV: &str = "CINDER_CSI_DISK_BY_ID_DIR";

/// How many characters of the volume id a virtio serial keeps.
const VIRTIO_SERIAL_LEN: usize = 20;

/// The disk directory: `$CINDER_CSI_DISK_BY_ID_DIR`, else `/dev/disk/by-id`.
pub fn disk_by_id_dir_from_env() -> PathBuf {
    std::env::var_os(DISK_BY_ID_DIR_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_DISK_BY_ID_DIR))
}

/// The names a volume's disk may have under the disk directory, most likely first.
pub fn candidate_names(volume_id: &str) -> Vec<String> {
    let serial: String = volume_id.chars().take(VIRTIO_SERIAL_LEN).collect();
    vec![
        format!("virtio-{serial}"),
        format!("scsi-0QEMU_QEMU_HARDDISK_{serial}"),
        format!("scsi-0QEMU_QEMU_HARDDISK_{volume_id}"),
    ]
}

/// The device of `volume_id`: the first existing link under `disk_dir`, resolved to the
/// device node (`/dev/vdb`, `/dev/loop3`). NotFound names the paths tried.
pub fn find_device(disk_dir: &Path, volume_id: &str) -> Result<PathBuf> {
    let candidates: Vec<PathBuf> = candidate_names(volume_id)
        .into_iter()
        .map(|name| disk_dir.join(name))
        .collect();
    for candidate in &candidates {
        if let Ok(device) = std::fs::canonicalize(candidate) {
            return Ok(device);
        }
    }
    Err(Error::NotFound(format!(
        "the device of volume {volume_id} is not attached to this node: none of {} exists",
        candidates
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )))
}

/// The size in bytes of a block device (or a file standing in for one).
pub fn size_bytes(device: &Path) -> Result<u64> {
    let mut file = std::fs::File::open(device).map_err(|e| {
        Error::Internal(format!(
            "cannot open {} to read its size: {e}",
            device.display()
        ))
    })?;
    file.seek(SeekFrom::End(0))
        .map_err(|e| Error::Internal(format!("cannot read the size of {}: {e}", device.display())))
}

/// Asks the kernel to re-read a SCSI disk's size (`rescan-on-resize`). Devices without a
/// rescan attribute (virtio, loop) pick up a new size by themselves and are left alone.
pub fn rescan(device: &Path) -> Result<()> {
    let Some(name) = device.file_name() else {
        return Ok(());
    };
    let attribute = Path::new("/sys/class/block")
        .join(name)
        .join("device/rescan");
    if attribute.exists() {
        std::fs::write(&attribute, "1")
            .map_err(|e| Error::Internal(format!("rescanning {}: {e}", attribute.display())))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virtio_name_keeps_the_first_twenty_characters() {
        let names = candidate_names("4bbf4f2b-6c5a-4d8e-9f1e-0123456789ab");
        assert_eq!(names[0], "virtio-4bbf4f2b-6c5a-4d8e-9");
        assert_eq!(names[1], "scsi-0QEMU_QEMU_HARDDISK_4bbf4f2b-6c5a-4d8e-9");
    }

    #[test]
    fn short_ids_are_kept_whole() {
        assert_eq!(candidate_names("vol-1")[0], "virtio-vol-1");
    }

    #[test]
    fn find_device_resolves_the_link_and_names_the_paths_tried() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::Internal(e.to_string()))?;
        let device = dir.path().join("fake-device");
        std::fs::write(&device, b"").map_err(|e| Error::Internal(e.to_string()))?;
        let id = "0123456789abcdefghijKLMN";
        std::os::unix::fs::symlink(&device, dir.path().join("virtio-0123456789abcdefghij"))
            .map_err(|e| Error::Internal(e.to_string()))?;
        assert_eq!(
            find_device(dir.path(), id)?,
            std::fs::canonicalize(&device).map_err(|e| Error::Internal(e.to_string()))?
        );
        let missing = find_device(dir.path(), "other-volume")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(missing.contains("virtio-other-volume"), "{missing}");
        Ok(())
    }
}
