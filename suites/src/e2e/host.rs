//! What this host lets the drivers do: some machines (containers without
//! `CAP_SYS_RESOURCE` in their bounding set) refuse to grow a mounted ext4 file system, so
//! online expansion of a Cinder volume cannot work there whatever the driver does. Tests
//! that need it are skipped with [`GROW_MOUNTED_EXT4`] as the reason.

/// `CAP_SYS_RESOURCE`'s bit in a capability set.
const CAP_SYS_RESOURCE: u32 = 24;

/// Why a mounted ext4 cannot grow on this host.
pub const GROW_MOUNTED_EXT4: &str = "growing a mounted ext4 (resize2fs, EXT4_IOC_RESIZE_FS) needs CAP_SYS_RESOURCE, which this machine's capability bounding set lacks";

/// Whether a mounted ext4 can grow on this host (see the module docs); `true` when the
/// bounding set cannot be read (the attempt then shows what happens).
pub fn can_grow_mounted_ext4() -> bool {
    bounding_set_has(CAP_SYS_RESOURCE).unwrap_or(true)
}

/// Whether capability `bit` is in this process's bounding set (`CapBnd` in
/// `/proc/self/status`), which no process of this machine's container can exceed.
fn bounding_set_has(bit: u32) -> Option<bool> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    bounding_set_in(&status, bit)
}

fn bounding_set_in(status: &str, bit: u32) -> Option<bool> {
    let hex = status
        .lines()
        .find_map(|line| line.strip_prefix("CapBnd:"))?;
    let mask = u64::from_str_radix(hex.trim(), 16).ok()?;
    Some(mask & (1 << bit) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bounding_set_is_read_from_proc_status() {
        let full = "Name:\tx\nCapBnd:\t000001ffffffffff\n";
        let without = "CapBnd:\t000001fffeffffff\n";
        assert_eq!(bounding_set_in(full, CAP_SYS_RESOURCE), Some(true));
        assert_eq!(bounding_set_in(without, CAP_SYS_RESOURCE), Some(false));
        assert_eq!(bounding_set_in("Name:\tx\n", CAP_SYS_RESOURCE), None);
    }
}
