//! Processes of a test: `kubectl` against a control plane, and whether processes are gone.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use control_plane::{ControlPlane, cache_bin_dir};

use crate::wait::wait_for;

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

/// Runs kubectl with the admin kubeconfig of `cp` and returns its stdout; fails the test
/// with kubectl's stderr if it fails.
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
    String::from_utf8_lossy(&out.stdout).into_owned()
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

/// Waits (up to 30 s) until none of `pids` is running.
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
