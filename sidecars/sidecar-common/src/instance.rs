//! Who this replica is: the name events (`source.host`) and the leader Lease's holder
//! identity are built from.

/// This replica's name: `$POD_NAME` (set by the downward API), else the host name (in a
/// pod: the pod's name too), else `$HOSTNAME`, else `fallback`.
pub fn name(fallback: &str) -> String {
    let from_env = |key: &str| std::env::var(key).ok().filter(|v| !v.is_empty());
    from_env("POD_NAME")
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
        })
        .or_else(|| from_env("HOSTNAME"))
        .unwrap_or_else(|| fallback.to_string())
}
