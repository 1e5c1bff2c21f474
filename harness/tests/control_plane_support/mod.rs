//! Helpers shared by the control-plane tests.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::future::Future;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use harness::control_plane::{ControlPlane, cache_bin_dir};

/// Polls `check` until it yields a value; panics after `timeout` with what was last seen.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, String>>,
{
    let start = Instant::now();
    loop {
        let last_seen = match check().await {
            Ok(Some(value)) => return value,
            Ok(None) => String::from("not yet"),
            Err(e) => e,
        };
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}; last seen: {last_seen}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// kubectl: the one next to the control-plane binaries if there is one, else from PATH.
pub fn kubectl_path() -> PathBuf {
    let dirs = [
        std::env::var_os("KUBEBUILDER_ASSETS").map(PathBuf::from),
        Some(cache_bin_dir()),
    ];
    dirs.into_iter()
        .flatten()
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("kubectl"))
}

/// Runs kubectl with the admin kubeconfig; panics with its stderr if it fails.
pub fn kubectl(cp: &ControlPlane, args: &[&str]) -> String {
    let kubectl = kubectl_path();
    let out = Command::new(&kubectl)
        .arg("--kubeconfig")
        .arg(cp.kubeconfig())
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", kubectl.display()));
    assert!(
        out.status.success(),
        "{} {args:?} failed ({}): {}",
        kubectl.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Whether a process is still running (a zombie awaiting its reaper counts as gone).
pub fn is_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Waits until none of `pids` is running.
pub async fn wait_all_gone(what: &str, pids: &[u32]) {
    wait_for(what, Duration::from_secs(30), || async {
        let alive: Vec<u32> = pids.iter().copied().filter(|p| is_alive(*p)).collect();
        if alive.is_empty() {
            Ok(Some(()))
        } else {
            Err(format!("still alive: {alive:?}"))
        }
    })
    .await
}

/// The pids of running processes whose command line mentions `needle` (e.g. a run
/// directory: every component's flags name files in it).
pub fn processes_mentioning(needle: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle))
        })
        .filter(|pid| is_alive(*pid))
        .collect()
}
