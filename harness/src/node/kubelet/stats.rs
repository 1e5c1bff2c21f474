//! `GET /stats/summary`: kubelet's stats Summary (`stats/v1alpha1`) with what this node can
//! measure: the node's file system (the run directory's), and for every pod its volumes:
//! emptyDir volumes (the file system they are on, and the bytes and inodes below them, as
//! kubelet's `du`), and CSI volumes through NodeGetVolumeStats for drivers with the
//! `GET_VOLUME_STATS` capability, named after the pod's volume with their `pvcRef`. CPU and
//! memory are not measured (pods have no cgroups here).

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::Api;
use serde_json::{Value, json};

use super::Server;
use crate::node::layout::pod_dir;

impl Server {
    /// The Summary now.
    pub(crate) async fn summary(&self) -> Value {
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        let pods: Vec<std::sync::Arc<Pod>> = self
            .pods
            .read()
            .map(|pods| pods.values().cloned().collect())
            .unwrap_or_default();
        let mut pod_stats = Vec::new();
        for pod in pods {
            pod_stats.push(self.pod_stats(&pod, &now).await);
        }
        let mut node = json!({
            "nodeName": self.node,
            "systemContainers": [],
        });
        if let Some(fs) = fs_stats(&self.run_dir, &now) {
            node["fs"] = fs.clone();
            node["runtime"] = json!({"imageFs": fs});
        }
        json!({"node": node, "pods": pod_stats})
    }

    async fn pod_stats(&self, pod: &Pod, now: &str) -> Value {
        let meta = &pod.metadata;
        let (namespace, name, uid) = (
            meta.namespace.clone().unwrap_or_default(),
            meta.name.clone().unwrap_or_default(),
            meta.uid.clone().unwrap_or_default(),
        );
        let status = pod.status.as_ref();
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
                json!({"name": c.name, "startTime": started})
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
        json!({
            "podRef": {"name": name, "namespace": namespace, "uid": uid},
            "startTime": status.and_then(|s| s.start_time.as_ref()).map(|t| t.0.to_string()),
            "containers": containers,
            "volume": volumes,
        })
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
