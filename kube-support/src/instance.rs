//! Who and where this replica is: the name events (`source.host`) and the leader Lease's
//! holder identity are built from, and the namespace of its pod.

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

/// The namespace of the pod this runs in, from the service-account mount (`None` outside a
/// pod).
pub fn namespace() -> Option<String> {
    std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
        .ok()
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
}
