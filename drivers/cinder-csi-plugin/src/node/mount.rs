//! The host commands and kernel tables the node service uses: `blkid`, `mkfs.*`, `mount`,
//! `umount`, `resize2fs`, `xfs_growfs`, and `/proc/self/mountinfo`.

use std::path::Path;

use tokio::process::Command;

use crate::error::{Error, Result};

/// File systems the node can make and grow.
pub const SUPPORTED_FS: &[&str] = &["ext4", "ext3", "ext2", "xfs"];

/// Runs `program args…`, returning stdout; a failure names the command, status and stderr.
async fn run(program: &str, args: &[&str]) -> Result<String> {
    let output = Command::new(program)
        .args(args)
        .output()
        .await
        .map_err(|e| Error::Command {
            command: format!("{program} {}", args.join(" ")),
            reason: format!("cannot run it: {e}"),
        })?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(Error::Command {
            command: format!("{program} {}", args.join(" ")),
            reason: format!(
                "{}: {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        })
    }
}

fn text(path: &Path) -> Result<&str> {
    path.to_str()
        .ok_or_else(|| Error::InvalidArgument(format!("path {} is not UTF-8", path.display())))
}

/// The file system on `device`, or `None` when it has none (blkid finds nothing).
pub async fn fs_type(device: &Path) -> Result<Option<String>> {
    let output = Command::new("blkid")
        .args(["-p", "-s", "TYPE", "-o", "value", text(device)?])
        .output()
        .await
        .map_err(|e| Error::Command {
            command: format!("blkid {}", device.display()),
            reason: format!("cannot run it: {e}"),
        })?;
    match output.status.code() {
        Some(0) => {
            let found = String::from_utf8_lossy(&output.stdout).trim().to_string();
            Ok((!found.is_empty()).then_some(found))
        }
        // blkid's "nothing identified".
        Some(2) => Ok(None),
        _ => Err(Error::Command {
            command: format!("blkid {}", device.display()),
            reason: format!(
                "{}: {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        }),
    }
}

/// Makes a `fs` file system on `device`.
pub async fn format(device: &Path, fs: &str) -> Result<()> {
    let device = text(device)?;
    let program = format!("mkfs.{fs}");
    match fs {
        "xfs" => run(&program, &["-f", "-q", device]).await?,
        _ => run(&program, &["-F", "-q", device]).await?,
    };
    Ok(())
}

/// Mounts `device` (of type `fs`) on `target` with `options`.
pub async fn mount(device: &Path, target: &Path, fs: &str, options: &[String]) -> Result<()> {
    let mut args = vec!["-t", fs];
    let joined = options.join(",");
    if !joined.is_empty() {
        args.extend(["-o", joined.as_str()]);
    }
    args.extend([text(device)?, text(target)?]);
    run("mount", &args).await.map(|_| ())
}

/// Bind-mounts `source` on `target`, read-only when asked.
pub async fn bind(source: &Path, target: &Path, read_only: bool) -> Result<()> {
    run("mount", &["--bind", text(source)?, text(target)?]).await?;
    if read_only {
        run("mount", &["-o", "remount,bind,ro", text(target)?]).await?;
    }
    Ok(())
}

/// Unmounts `target`.
pub async fn unmount(target: &Path) -> Result<()> {
    run("umount", &[text(target)?]).await.map(|_| ())
}

/// Grows the file system on `device` (mounted at `mount_path`) to the device's size.
pub async fn grow(device: &Path, fs: &str, mount_path: &Path) -> Result<()> {
    match fs {
        "xfs" => run("xfs_growfs", &[text(mount_path)?]).await?,
        "ext2" | "ext3" | "ext4" => run("resize2fs", &[text(device)?]).await?,
        other => {
            return Err(Error::FailedPrecondition(format!(
                "cannot grow a {other} file system (only ext2/3/4 and xfs)"
            )));
        }
    };
    Ok(())
}

/// What growing decisions need of an ext2/3/4 superblock (from `dumpe2fs -h`), in blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtGeometry {
    /// `Block count`: the file system's size.
    pub block_count: u64,
    /// `Block size` in bytes.
    pub block_size: u64,
    /// `First block` (1 with 1 KiB blocks, else 0).
    pub first_block: u64,
    /// `Blocks per group`.
    pub blocks_per_group: u64,
    /// `Inode blocks per group`: the inode table of each group.
    pub inode_blocks_per_group: u64,
}

impl ExtGeometry {
    /// Reads the fields from `dumpe2fs -h`'s `Key: value` lines.
    pub fn parse(text: &str) -> Result<ExtGeometry> {
        let field = |key: &str| -> Result<u64> {
            text.lines()
                .filter_map(|line| line.split_once(':'))
                .find(|(k, _)| k.trim() == key)
                .and_then(|(_, v)| v.trim().parse().ok())
                .ok_or_else(|| Error::Command {
                    command: "dumpe2fs -h".into(),
                    reason: format!("no numeric {key:?} in its output"),
                })
        };
        let geometry = ExtGeometry {
            block_count: field("Block count")?,
            block_size: field("Block size")?,
            first_block: field("First block")?,
            blocks_per_group: field("Blocks per group")?,
            inode_blocks_per_group: field("Inode blocks per group")?,
        };
        if geometry.block_size == 0 || geometry.blocks_per_group == 0 {
            return Err(Error::Command {
                command: "dumpe2fs -h".into(),
                reason: "a zero block size or blocks per group".into(),
            });
        }
        Ok(geometry)
    }

    /// The file system's size in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.block_count.saturating_mul(self.block_size)
    }

    /// Whether `resize2fs` may still grow the file system on a device of `device_bytes`.
    /// False only when it certainly would not: the device holds no further block, or only
    /// a last group that resize2fs leaves out because it would barely hold its own bitmaps
    /// and inode table (resize2fs drops a last group of fewer than its overhead + 50
    /// blocks; the overhead is at least 2 + the inode blocks per group). In doubt, true:
    /// resize2fs then decides, and answers "Nothing to do" itself.
    pub fn can_grow_to(&self, device_bytes: u64) -> bool {
        let mut device_blocks = device_bytes / self.block_size;
        // resize2fs rounds a device down to whole pages for blocks smaller than a page
        // (4 KiB assumed: a larger page only rounds down further).
        if self.block_size < 4096 {
            let per_page = 4096 / self.block_size;
            device_blocks -= device_blocks % per_page;
        }
        if device_blocks <= self.block_count {
            return false;
        }
        let data = device_blocks.saturating_sub(self.first_block);
        let last_group = data % self.blocks_per_group;
        let groups = data.div_ceil(self.blocks_per_group);
        let least_overhead = 2 + self.inode_blocks_per_group;
        let target = if groups > 1 && last_group != 0 && last_group < least_overhead + 50 {
            device_blocks - last_group
        } else {
            device_blocks
        };
        target > self.block_count
    }
}

/// Whether `fs` is one `resize2fs` grows (ext2, ext3, ext4).
pub fn is_ext(fs: &str) -> bool {
    matches!(fs, "ext2" | "ext3" | "ext4")
}

/// The geometry of the ext2/3/4 file system on `device` (mounted or not).
pub async fn ext_geometry(device: &Path) -> Result<ExtGeometry> {
    ExtGeometry::parse(&run("dumpe2fs", &["-h", text(device)?]).await?)
}

/// Grows the ext2/3/4 file system on `device`, which must not be mounted, to the device's
/// size: `e2fsck -f -p` first (resize2fs refuses an unchecked file system), then
/// `resize2fs`. Unlike growing a mounted one, this needs no `CAP_SYS_RESOURCE`.
pub async fn grow_offline(device: &Path) -> Result<()> {
    let device = text(device)?;
    let output = Command::new("e2fsck")
        .args(["-f", "-p", device])
        .output()
        .await
        .map_err(|e| Error::Command {
            command: format!("e2fsck -f -p {device}"),
            reason: format!("cannot run it: {e}"),
        })?;
    // 1: errors corrected; 2: corrected, reboot advised (about the root file system).
    if !matches!(output.status.code(), Some(0..=2)) {
        return Err(Error::Command {
            command: format!("e2fsck -f -p {device}"),
            reason: format!(
                "{}: {}{}",
                output.status,
                String::from_utf8_lossy(&output.stdout).trim(),
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        });
    }
    run("resize2fs", &[device]).await.map(|_| ())
}

/// Whether `device` is the source of any mount (in `/proc/self/mountinfo`).
pub fn device_is_mounted(device: &Path) -> Result<bool> {
    let device = std::fs::canonicalize(device)
        .map_err(|e| Error::Internal(format!("cannot resolve {}: {e}", device.display())))?;
    let table = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| Error::Internal(format!("reading /proc/self/mountinfo: {e}")))?;
    // The source is the second field after the " - " separator.
    Ok(table
        .lines()
        .filter_map(|line| line.split_once(" - "))
        .filter_map(|(_, rest)| rest.split(' ').nth(1))
        .any(|source| Path::new(&unescape(source)) == device))
}

/// Whether `path` is a mount point (listed in `/proc/self/mountinfo`).
pub fn is_mount_point(path: &Path) -> Result<bool> {
    let Ok(path) = std::fs::canonicalize(path) else {
        return Ok(false);
    };
    let table = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| Error::Internal(format!("reading /proc/self/mountinfo: {e}")))?;
    Ok(table
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .any(|point| Path::new(&unescape(point)) == path))
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 3 < bytes.len() {
            let digits = std::str::from_utf8(&bytes[i + 1..i + 4]).ok();
            if let Some(value) = digits.and_then(|d| u8::from_str_radix(d, 8).ok()) {
                out.push(value);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DUMPE2FS: &str = "Filesystem features:      has_journal ext_attr resize_inode\n\
        Block count:              262144\n\
        First block:              0\n\
        Block size:               4096\n\
        Reserved GDT blocks:      127\n\
        Blocks per group:         32768\n\
        Inode blocks per group:   512\n\
        Inode size:\t          256\n";

    fn geometry() -> ExtGeometry {
        ExtGeometry::parse(DUMPE2FS).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn dumpe2fs_fields_are_read() {
        assert_eq!(
            geometry(),
            ExtGeometry {
                block_count: 262144,
                block_size: 4096,
                first_block: 0,
                blocks_per_group: 32768,
                inode_blocks_per_group: 512,
            }
        );
        assert_eq!(geometry().size_bytes(), 1 << 30);
        let missing = ExtGeometry::parse("Block count: 12\n")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(missing.contains("Block size"), "{missing}");
    }

    #[test]
    fn growth_is_skipped_only_when_resize2fs_would_not_grow() {
        const MIB: u64 = 1 << 20;
        let fs = geometry();
        assert!(!fs.can_grow_to(1024 * MIB), "the same size");
        assert!(!fs.can_grow_to(512 * MIB), "a smaller device");
        assert!(fs.can_grow_to(2048 * MIB), "whole groups more");
        // A last group of 512 blocks cannot hold its 514 blocks of metadata + 50.
        assert!(!fs.can_grow_to(1026 * MIB));
        // One of 1280 blocks can (resize2fs grows 1 GiB to 1029 MiB).
        assert!(fs.can_grow_to(1029 * MIB));
        // A partial last group is filled first, however small the growth.
        let partial = ExtGeometry {
            block_count: 262144 - 1024,
            ..fs
        };
        assert!(partial.can_grow_to(1024 * MIB));
        // Less than a block more is nothing.
        assert!(!fs.can_grow_to(1024 * MIB + 4095));
    }

    #[test]
    fn small_blocks_round_the_device_down_to_whole_pages() {
        let fs = ExtGeometry {
            block_count: 65536,
            block_size: 1024,
            first_block: 1,
            blocks_per_group: 8192,
            inode_blocks_per_group: 256,
        };
        assert!(!fs.can_grow_to(65536 * 1024 + 3 * 1024));
        assert!(fs.can_grow_to(65536 * 1024 + 8192 * 1024));
    }

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape(r"/var/lib/with\040space"), "/var/lib/with space");
        assert_eq!(unescape("/plain"), "/plain");
    }

    #[test]
    fn root_is_a_mount_point_and_a_fresh_dir_is_not() -> Result<()> {
        assert!(is_mount_point(Path::new("/"))?);
        let dir = tempfile::tempdir().map_err(|e| Error::Internal(e.to_string()))?;
        assert!(!is_mount_point(dir.path())?);
        Ok(())
    }
}
