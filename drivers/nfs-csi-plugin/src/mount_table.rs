//! Which paths are mount points, from `/proc/self/mountinfo`.

use std::path::{Path, PathBuf};

use crate::error::{NodeError, Result};

const MOUNTINFO: &str = "/proc/self/mountinfo";

/// Whether `path` is a mount point in this process's mount namespace. A path that does
/// not exist is not one.
pub fn is_mount_point(path: &Path) -> Result<bool> {
    let Ok(canonical) = path.canonicalize() else {
        return Ok(false);
    };
    let table =
        std::fs::read_to_string(MOUNTINFO).map_err(|e| NodeError::io("read", MOUNTINFO, e))?;
    Ok(mount_points(&table).any(|point| point == canonical))
}

/// The mount points listed in a mountinfo text (field 5, octal escapes decoded).
fn mount_points(table: &str) -> impl Iterator<Item = PathBuf> + '_ {
    table
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|field| PathBuf::from(unescape(field)))
}

/// Decodes the kernel's `\ooo` escapes (space, tab, newline, backslash).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(digits) => {
                let value = digits
                    .iter()
                    .fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
                out.push(u8::try_from(value).unwrap_or(b'?'));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn mount_points_are_read_from_field_five_with_escapes_decoded() {
        let table = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
                     40 22 0:5 /x /mnt/with\\040space rw - tmpfs tmpfs rw\n\
                     41 22 0:5 /x /mnt/back\\134slash rw - tmpfs tmpfs rw\n";
        let points: Vec<PathBuf> = mount_points(table).collect();
        assert_eq!(
            points,
            vec![
                PathBuf::from("/"),
                PathBuf::from("/mnt/with space"),
                PathBuf::from("/mnt/back\\slash")
            ]
        );
    }

    #[test]
    fn root_is_a_mount_point_and_a_missing_path_is_not() {
        assert!(is_mount_point(Path::new("/")).unwrap());
        assert!(!is_mount_point(Path::new("/no/such/path/here")).unwrap());
    }
}
