//! The memory of a cluster of the harness, for the benches: the resident memory of every
//! process whose command line names the cluster's run directory (control-plane components,
//! node agents, sandbox helpers; for the containers backend also each container's init,
//! whose command names its log there; for the kind backend each node container's init, whose
//! environment names its kubelet's log there) and all their descendants (the pods'
//! processes, kubelet, containerd),
//! sampled every 100 ms.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// Resident memory of every process belonging to the cluster, KiB: the processes whose
/// command line names the run directory (components, node agents, sandbox helpers), this
/// bench's descendants, and all their descendants (the pods' processes).
pub fn cluster_rss_kib(run_dir: &Path) -> u64 {
    let me = std::process::id();
    let needle = run_dir.to_string_lossy().into_owned();
    let mut parents: BTreeMap<u32, u32> = BTreeMap::new();
    let mut roots: BTreeSet<u32> = BTreeSet::from([me]);
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let ppid = stat
            .rfind(')')
            .and_then(|i| stat[i + 2..].split(' ').nth(1))
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        parents.insert(pid, ppid);
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        // A kind node container's init names the run directory in its environment only.
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(&needle)
            || String::from_utf8_lossy(&environ).contains(&needle)
        {
            roots.insert(pid);
        }
    }
    let belongs = |mut pid: u32| {
        for _ in 0..64 {
            if roots.contains(&pid) {
                return true;
            }
            match parents.get(&pid) {
                Some(&parent) if parent > 1 => pid = parent,
                _ => return false,
            }
        }
        false
    };
    parents
        .keys()
        .filter(|&&pid| pid != me && belongs(pid))
        .map(|pid| rss_kib(*pid))
        .sum()
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Samples the cluster's memory every 100 ms until dropped; keeps the peak.
pub struct MemorySampler {
    peak_kib: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MemorySampler {
    pub fn start(run_dir: PathBuf) -> Self {
        let peak_kib = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (peak_kib, stop) = (peak_kib.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    peak_kib.fetch_max(cluster_rss_kib(&run_dir), Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
        };
        Self {
            peak_kib,
            stop,
            thread: Some(thread),
        }
    }

    pub fn peak_mib(&mut self) -> f64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.peak_kib.load(Ordering::Relaxed) as f64 / 1024.0
    }
}
