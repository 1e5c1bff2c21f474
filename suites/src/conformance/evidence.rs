//! What a user needs to understand a failed test, written to the report directory before the
//! test's namespace is deleted: the objects as last seen (claims, pods, snapshots of the
//! namespace; its PVs and their VolumeAttachments; every CSINode), the namespace's Events,
//! the logs of the test's containers and of the driver's, and the tails of the node agents'
//! logs on an embedded cluster. Secrets are never written.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Event, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::{CSINode, VolumeAttachment};
use kube::api::{Api, ListParams};
use serde::Serialize;

use super::leftovers::Footprint;
use crate::e2e::snapshots;
use crate::e2e::workload::Workload;
use crate::registry::DriverUnderTest;

/// How many lines of a node agent's log the evidence keeps.
const NODE_LOG_LINES: usize = 400;

/// Writes the evidence of the test running in `workload` into `dir` (created); returns the
/// directory. Problems reading one piece are written into the evidence instead of failing it.
pub async fn collect(
    dir: &Path,
    workload: &Workload<'_>,
    footprint: &Footprint,
    driver: &DriverUnderTest,
) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let client = workload.client();
    let namespace = workload.namespace();
    let cluster = workload.cluster();

    let mut objects = String::new();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), namespace);
    dump_list(
        &mut objects,
        "PersistentVolumeClaims",
        claims.list(&ListParams::default()).await,
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let pod_list = pods.list(&ListParams::default()).await;
    dump_list(&mut objects, "Pods", clone_list(&pod_list));
    let snapshot_api = snapshots::volume_snapshots(&client, namespace);
    dump_list(
        &mut objects,
        "VolumeSnapshots",
        snapshot_api.list(&ListParams::default()).await,
    );
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    let names: Vec<&str> = footprint.volumes.iter().map(|(n, _)| n.as_str()).collect();
    let mut pvs = Vec::new();
    for name in &names {
        match volumes.get_opt(name).await {
            Ok(Some(pv)) => pvs.push(pv),
            Ok(None) => {}
            Err(e) => {
                let _ = writeln!(objects, "# PV {name}: {e}");
            }
        }
    }
    dump(&mut objects, "PersistentVolumes", &pvs);
    let attachments: Api<VolumeAttachment> = Api::all(client.clone());
    match attachments.list(&ListParams::default()).await {
        Ok(list) => {
            let ours: Vec<&VolumeAttachment> = list
                .items
                .iter()
                .filter(|a| {
                    a.spec
                        .source
                        .persistent_volume_name
                        .as_deref()
                        .is_some_and(|pv| names.contains(&pv))
                })
                .collect();
            dump(&mut objects, "VolumeAttachments", &ours);
        }
        Err(e) => {
            let _ = writeln!(objects, "# VolumeAttachments: {e}");
        }
    }
    let csinodes: Api<CSINode> = Api::all(client.clone());
    dump_list(
        &mut objects,
        "CSINodes",
        csinodes.list(&ListParams::default()).await,
    );
    std::fs::write(dir.join("objects.yaml"), objects)?;

    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    let mut text = String::new();
    match events.list(&ListParams::default()).await {
        Ok(list) => {
            let mut items = list.items;
            items.sort_by_key(|e| e.last_timestamp.as_ref().map(|t| t.0));
            for event in &items {
                let _ = writeln!(
                    text,
                    "{} {} {} {}/{}: {}",
                    event
                        .last_timestamp
                        .as_ref()
                        .map(|t| t.0.to_string())
                        .unwrap_or_default(),
                    event.type_.as_deref().unwrap_or("?"),
                    event.reason.as_deref().unwrap_or("?"),
                    event.involved_object.kind.as_deref().unwrap_or("?"),
                    event.involved_object.name.as_deref().unwrap_or("?"),
                    event.message.as_deref().unwrap_or("")
                );
            }
        }
        Err(e) => {
            let _ = writeln!(text, "listing events: {e}");
        }
    }
    std::fs::write(dir.join("events.txt"), text)?;

    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs)?;
    if let Ok(list) = &pod_list {
        for pod in &list.items {
            write_pod_logs(&logs, cluster, namespace, pod).await?;
        }
    }
    if let Some(driver_namespace) = &driver.namespace {
        let driver_pods: Api<Pod> = Api::namespaced(client.clone(), driver_namespace);
        if let Ok(list) = driver_pods.list(&ListParams::default()).await {
            let driver_logs = dir.join("driver");
            std::fs::create_dir_all(&driver_logs)?;
            for pod in &list.items {
                write_pod_logs(&driver_logs, cluster, driver_namespace, pod).await?;
            }
        }
    }
    if cluster.is_embedded() {
        let nodes = dir.join("nodes");
        std::fs::create_dir_all(&nodes)?;
        for node in &cluster.description().nodes {
            let text = std::fs::read_to_string(&node.log)
                .unwrap_or_else(|e| format!("reading {}: {e}", node.log.display()));
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(NODE_LOG_LINES)..].join("\n");
            std::fs::write(nodes.join(format!("{}.log", node.name)), tail)?;
        }
    }
    Ok(dir.to_path_buf())
}

async fn write_pod_logs(
    dir: &Path,
    cluster: &cluster::Cluster,
    namespace: &str,
    pod: &Pod,
) -> std::io::Result<()> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let containers: Vec<String> = pod
        .spec
        .as_ref()
        .map(|s| s.containers.iter().map(|c| c.name.clone()).collect())
        .unwrap_or_default();
    for container in containers {
        let text = match cluster.logs(namespace, &name, &container, false).await {
            Ok(text) => text,
            Err(e) => format!("(no log: {e})"),
        };
        std::fs::write(dir.join(format!("{name}.{container}.log")), text)?;
    }
    Ok(())
}

fn clone_list<K: Clone>(list: &kube::Result<kube::api::ObjectList<K>>) -> kube::Result<Vec<K>> {
    match list {
        Ok(list) => Ok(list.items.clone()),
        Err(e) => Err(kube::Error::Service(e.to_string().into())),
    }
}

fn dump_list<K: Serialize, L: IntoItems<K>>(out: &mut String, what: &str, list: kube::Result<L>) {
    match list {
        Ok(list) => dump(out, what, &list.into_items()),
        Err(e) => {
            let _ = writeln!(out, "# {what}: {e}");
        }
    }
}

fn dump<K: Serialize>(out: &mut String, what: &str, items: &[K]) {
    let _ = writeln!(out, "# {what}: {}", items.len());
    for item in items {
        out.push_str("---\n");
        match serde_yaml::to_string(item) {
            Ok(text) => out.push_str(&text),
            Err(e) => {
                let _ = writeln!(out, "# (cannot print: {e})");
            }
        }
    }
}

/// A list's items, from a kube list or a plain vector.
trait IntoItems<K> {
    fn into_items(self) -> Vec<K>;
}

impl<K: Clone> IntoItems<K> for kube::api::ObjectList<K> {
    fn into_items(self) -> Vec<K> {
        self.items
    }
}

impl<K> IntoItems<K> for Vec<K> {
    fn into_items(self) -> Vec<K> {
        self
    }
}
