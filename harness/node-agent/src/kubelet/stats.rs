//! `GET /stats/summary`: kubelet's stats Summary (`stats/v1alpha1`) with what this node can
//! measure: the node's file system (the run directory's), and for every pod its volumes:
//! emptyDir volumes (the file system they are on, and the bytes and inodes below them, as
//! kubelet's `du`), and CSI volumes through NodeGetVolumeStats for drivers with the
//! `GET_VOLUME_STATS` capability, named after the pod's volume with their `pvcRef`. CPU
//! (cumulative `usageCoreNanoSeconds`) and memory (`workingSetBytes`, `rssBytes`) from
//! `/proc`: the machine's for the node, and for a pod and each of its containers the sum over
//! their live processes (a container's main process and its descendants; the pod's: every
//! process of its PID namespace). Without cgroups, that is all there is: no rates, no page
//! cache, no limits.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::Api;
use serde_json::{Value, json};

use super::Server;
use crate::layout::pod_dir;

impl Server {
    /// The Summary now.
    pub(crate) async fn summary(&self) -> Value {
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        let pods: Vec<std::sync::Arc<Pod>> = self
            .pods
            .read()
            .map(|pods| pods.values().cloned().collect())
            .unwrap_or_default();
        let processes = Processes::scan();
        let mut pod_stats = Vec::new();
        for pod in pods {
            pod_stats.push(self.pod_stats(&pod, &now, &processes).await);
        }
        let mut node = json!({
            "nodeName": self.node,
            "systemContainers": [],
            "cpu": {"time": now, "usageCoreNanoSeconds": machine_cpu_nanos()},
            "memory": machine_memory(&now),
        });
        if let Some(fs) = fs_stats(&self.run_dir, &now) {
            node["fs"] = fs.clone();
            node["runtime"] = json!({"imageFs": fs});
        }
        json!({"node": node, "pods": pod_stats})
    }

    async fn pod_stats(&self, pod: &Pod, now: &str, processes: &Processes) -> Value {
        let meta = &pod.metadata;
        let (namespace, name, uid) = (
            meta.namespace.clone().unwrap_or_default(),
            meta.name.clone().unwrap_or_default(),
            meta.uid.clone().unwrap_or_default(),
        );
        let status = pod.status.as_ref();
        // The sandbox's and the containers' processes, as the runtime recorded them.
        let sandbox = self.runtime.sandbox(&uid).ok().flatten();
        let attempts = sandbox
            .as_ref()
            .and_then(|s| s.containers().ok())
            .unwrap_or_default();
        let containers: Vec<Value> = status
            .and_then(|s| s.container_statuses.as_ref())
            .into_iter()
            .flatten()
            .map(|c| {
                let started = c
                    .state
                    .as_ref()
                    .and_then(|s| s.running.as_ref())
                    .and_then(|r| r.started_at.as_ref())
                    .map(|t| t.0.to_string());
                let mut entry = json!({"name": c.name, "startTime": started});
                let current = attempts
                    .iter()
                    .rfind(|a| a.name() == c.name && a.is_running());
                if let Some(current) = current {
                    let usage = processes.tree(current.process().pid);
                    entry["cpu"] = usage.cpu(now);
                    entry["memory"] = usage.memory(now);
                }
                entry
            })
            .collect();
        let mut volumes = Vec::new();
        let volume_specs = pod
            .spec
            .as_ref()
            .and_then(|s| s.volumes.clone())
            .unwrap_or_default();
        let dir = pod_dir(&self.run_dir, &namespace, &name, &uid);
        for volume in volume_specs.iter().filter(|v| v.empty_dir.is_some()) {
            let path = dir.join("volumes").join(&volume.name);
            if let Some(mut stats) = fs_stats(&path, now) {
                let (bytes, inodes) = usage(&path);
                stats["usedBytes"] = json!(bytes);
                stats["inodesUsed"] = json!(inodes);
                stats["name"] = json!(volume.name);
                volumes.push(stats);
            }
        }
        let csi = self.csi.volume_stats(&uid).await;
        if !csi.is_empty() {
            // PV → (pod volume, claim), through the claims the pod names.
            let claims: Api<PersistentVolumeClaim> =
                Api::namespaced(self.client.clone(), &namespace);
            let mut by_pv = HashMap::new();
            for volume in &volume_specs {
                let Some(source) = &volume.persistent_volume_claim else {
                    continue;
                };
                if let Ok(claim) = claims.get(&source.claim_name).await
                    && let Some(pv) = claim.spec.and_then(|s| s.volume_name)
                {
                    by_pv.insert(pv, (volume.name.clone(), source.claim_name.clone()));
                }
            }
            for stats in csi {
                let (volume, claim) = by_pv
                    .get(&stats.pv)
                    .cloned()
                    .unwrap_or_else(|| (stats.pv.clone(), String::new()));
                let mut entry = json!({
                    "time": now,
                    "name": volume,
                    "availableBytes": stats.available_bytes,
                    "capacityBytes": stats.capacity_bytes,
                    "usedBytes": stats.used_bytes,
                    "inodesFree": stats.inodes_free,
                    "inodes": stats.inodes,
                    "inodesUsed": stats.inodes_used,
                });
                if !claim.is_empty() {
                    entry["pvcRef"] = json!({"name": claim, "namespace": namespace});
                }
                volumes.push(entry);
            }
        }
        let mut stats = json!({
            "podRef": {"name": name, "namespace": namespace, "uid": uid},
            "startTime": status.and_then(|s| s.start_time.as_ref()).map(|t| t.0.to_string()),
            "containers": containers,
            "volume": volumes,
        });
        if let Some(sandbox) = sandbox.filter(|s| s.is_running()) {
            let usage = processes.namespace_of(sandbox.pause_process().pid);
            stats["cpu"] = usage.cpu(now);
            stats["memory"] = usage.memory(now);
        }
        stats
    }
}

/// The file system `path` is on: capacity, available and used bytes, inodes.
fn fs_stats(path: &Path, now: &str) -> Option<Value> {
    let fs = nix::sys::statvfs::statvfs(path).ok()?;
    let block = fs.fragment_size();
    let capacity = fs.blocks() * block;
    let available = fs.blocks_available() * block;
    let free = fs.blocks_free() * block;
    Some(json!({
        "time": now,
        "availableBytes": available,
        "capacityBytes": capacity,
        "usedBytes": capacity.saturating_sub(free),
        "inodesFree": fs.files_free(),
        "inodes": fs.files(),
        "inodesUsed": fs.files().saturating_sub(fs.files_free()),
    }))
}

/// Bytes (allocated blocks) and inodes below `path`, on its file system only.
fn usage(path: &Path) -> (u64, u64) {
    let Ok(root) = std::fs::symlink_metadata(path) else {
        return (0, 0);
    };
    let device = root.dev();
    let (mut bytes, mut inodes) = (0u64, 0u64);
    let mut pending = vec![path.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            if meta.dev() != device {
                continue;
            }
            bytes += meta.blocks() * 512;
            inodes += 1;
            if meta.is_dir() {
                pending.push(entry.path());
            }
        }
    }
    (bytes + root.blocks() * 512, inodes + 1)
}

/// CPU and memory used by a set of processes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Usage {
    /// User + system time, ns.
    cpu_nanos: u64,
    /// Resident memory, bytes.
    rss_bytes: u64,
}

impl Usage {
    fn cpu(&self, now: &str) -> Value {
        json!({"time": now, "usageCoreNanoSeconds": self.cpu_nanos})
    }

    fn memory(&self, now: &str) -> Value {
        json!({
            "time": now,
            "usageBytes": self.rss_bytes,
            "workingSetBytes": self.rss_bytes,
            "rssBytes": self.rss_bytes,
        })
    }
}

/// The machine's processes as `/proc` shows them now.
#[derive(Debug, Default)]
struct Processes {
    /// pid → (parent pid, PID namespace inode, usage).
    all: HashMap<i32, (i32, u64, Usage)>,
}

impl Processes {
    fn scan() -> Self {
        let ticks = clock_ticks();
        let page = sysconf_or(nix::unistd::SysconfVar::PAGE_SIZE, 4096);
        let mut all = HashMap::new();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Processes { all };
        };
        for entry in entries.flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // After the command name (which may hold spaces): state, ppid, … utime (14),
            // stime (15), … rss (24), counting fields from 1.
            let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
                continue;
            };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let field = |n: usize| {
                fields
                    .get(n - 3)
                    .and_then(|f| f.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            let ppid = fields.get(1).and_then(|f| f.parse().ok()).unwrap_or(0);
            let namespace = std::fs::metadata(format!("/proc/{pid}/ns/pid"))
                .map(|m| m.ino())
                .unwrap_or(0);
            let usage = Usage {
                cpu_nanos: (field(14) + field(15)) * 1_000_000_000 / ticks,
                rss_bytes: field(24) * page,
            };
            all.insert(pid, (ppid, namespace, usage));
        }
        Processes { all }
    }

    /// `pid` and its descendants.
    fn tree(&self, pid: i32) -> Usage {
        let mut total = Usage::default();
        let mut pending = vec![pid];
        while let Some(current) = pending.pop() {
            if let Some((_, _, usage)) = self.all.get(&current) {
                total.cpu_nanos += usage.cpu_nanos;
                total.rss_bytes += usage.rss_bytes;
            }
            pending.extend(
                self.all
                    .iter()
                    .filter(|(_, (ppid, _, _))| *ppid == current)
                    .map(|(child, _)| *child),
            );
        }
        total
    }

    /// Every process in the PID namespace `pid` is in (seen from this one).
    fn namespace_of(&self, pid: i32) -> Usage {
        let Some((_, namespace, _)) = self.all.get(&pid) else {
            return Usage::default();
        };
        let mut total = Usage::default();
        for (_, ns, usage) in self.all.values() {
            if ns == namespace {
                total.cpu_nanos += usage.cpu_nanos;
                total.rss_bytes += usage.rss_bytes;
            }
        }
        total
    }
}

/// The kernel's clock ticks per second (`/proc` counts CPU time in them); 100 when unknown.
fn clock_ticks() -> u64 {
    sysconf_or(nix::unistd::SysconfVar::CLK_TCK, 100).max(1)
}

/// The system configuration value `var`, `default` when unknown.
fn sysconf_or(var: nix::unistd::SysconfVar, default: u64) -> u64 {
    nix::unistd::sysconf(var)
        .ok()
        .flatten()
        .and_then(|value| u64::try_from(value).ok())
        .unwrap_or(default)
}

/// The machine's CPU time in use since boot (all but idle and iowait), ns.
fn machine_cpu_nanos() -> u64 {
    let ticks = clock_ticks();
    let Ok(stat) = std::fs::read_to_string("/proc/stat") else {
        return 0;
    };
    let Some(cpu) = stat.lines().find(|l| l.starts_with("cpu ")) else {
        return 0;
    };
    let values: Vec<u64> = cpu
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal …
    let busy: u64 = values
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .take(8)
        .map(|(_, v)| *v)
        .sum();
    busy * 1_000_000_000 / ticks
}

/// The machine's memory from `/proc/meminfo`.
fn machine_memory(now: &str) -> Value {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let kib = |key: &str| -> u64 {
        meminfo
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
            * 1024
    };
    let (total, free, available) = (kib("MemTotal"), kib("MemFree"), kib("MemAvailable"));
    json!({
        "time": now,
        "availableBytes": available,
        "usageBytes": total.saturating_sub(free),
        "workingSetBytes": total.saturating_sub(available),
    })
}
