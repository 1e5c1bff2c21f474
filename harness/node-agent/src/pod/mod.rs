//! Running the pods bound to the node: a watch on `spec.nodeName=<node>` feeds one worker
//! task per pod (see [`worker`]); sandboxes found running at start are handed to their pods'
//! workers, those of pods that no longer exist are removed.
//!
//! Dependencies go one way. Inside: [`worker`] (with its `impl Worker` parts in
//! [`containers`] and [`adoption`]) uses [`probes`], [`record`], [`status`], [`volumes`],
//! [`subpath`], [`sources`], [`env`], [`downward`] and [`backoff`], none of which uses the
//! worker (probe results reach it through any channel whose messages can be made from a
//! [`probes::ProbeResult`]). Outside: this module uses [`csi`](super::csi) (the volume
//! manager mounts `persistentVolumeClaim` volumes), [`ownership`](super::ownership) (a pod's
//! `fsGroup` on its other volumes) and [`layout`](super::layout); none of them uses it.

mod adoption;
mod backoff;
mod containers;
mod downward;
mod env;
mod probes;
mod record;
mod sources;
mod status;
mod subpath;
mod volumes;
mod worker;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::config::NodeAgentConfig;
use super::csi::VolumeManager;
use super::error_chain;
use super::events::Recorder;
use super::layout;
use super::mounts;
use pod_runtime::{Runtime, Sandbox};

pub use backoff::BackOff;
pub use status::phase;

/// What every pod worker of a node shares.
pub struct Context {
    /// The API client (the node's identity).
    pub client: Client,
    /// The agent's configuration.
    pub config: NodeAgentConfig,
    /// The node's container runtime.
    pub runtime: Runtime,
    /// Records events.
    pub recorder: Recorder,
    /// Runs HTTP probes (certificates not verified, as kubelet does).
    pub http: reqwest::Client,
    /// Mounts and unmounts the pods' CSI volumes.
    pub csi: Arc<VolumeManager>,
    /// The node's pods as last seen, for the kubelet API.
    pub store: crate::kubelet::PodStore,
}

struct WorkerHandle {
    updates: watch::Sender<Option<Arc<Pod>>>,
}

/// Watches the node's pods and runs a worker per pod until the watch ends (never, normally)
/// or the future is dropped (every worker is aborted; containers keep running).
pub async fn run(ctx: Arc<Context>, adopted: Vec<Sandbox>) {
    let node = ctx.config.node_name.clone();
    let pods: Api<Pod> = Api::all(ctx.client.clone());
    let config = watcher::Config::default().fields(&format!("spec.nodeName={node}"));
    let mut stream = watcher::watcher(pods, config).default_backoff().boxed();
    let mut adoptable: HashMap<String, Sandbox> = adopted
        .into_iter()
        .map(|s| (s.id().to_string(), s))
        .collect();
    let mut known: HashMap<String, Arc<Pod>> = HashMap::new();
    let mut listing: HashMap<String, Arc<Pod>> = HashMap::new();
    let mut synced = false;
    let mut workers: HashMap<String, WorkerHandle> = HashMap::new();
    let mut finished: HashSet<String> = HashSet::new();
    let mut tasks: JoinSet<String> = JoinSet::new();
    // Orphaned pods whose CSI volumes are still to be unmounted (retried until done).
    let mut orphans: BTreeSet<String> = BTreeSet::new();
    let mut orphans_retry: Option<std::time::Instant> = None;
    loop {
        tokio::select! {
            () = sleep_until(orphans_retry) => {
                orphans_retry = None;
                retry_orphans(&ctx, &mut orphans).await;
                if !orphans.is_empty() {
                    orphans_retry = Some(std::time::Instant::now() + ctx.config.timings.retry_interval);
                }
            }
            event = stream.next() => {
                let Some(event) = event else { return };
                match event {
                    Ok(Event::Init) => listing.clear(),
                    Ok(Event::InitApply(pod)) => {
                        if let Some(uid) = pod.metadata.uid.clone() {
                            listing.insert(uid, Arc::new(pod));
                        }
                    }
                    Ok(Event::InitDone) => {
                        known = std::mem::take(&mut listing);
                        if !synced {
                            synced = true;
                            orphans = clean_orphans(&ctx, &known, &mut adoptable).await;
                            if !orphans.is_empty() {
                                orphans_retry = Some(std::time::Instant::now());
                            }
                        }
                    }
                    Ok(Event::Apply(pod)) => {
                        if let Some(uid) = pod.metadata.uid.clone() {
                            known.insert(uid, Arc::new(pod));
                        }
                    }
                    Ok(Event::Delete(pod)) => {
                        if let Some(uid) = &pod.metadata.uid {
                            known.remove(uid);
                        }
                    }
                    Err(e) => {
                        tracing::warn!(node = %node, error = %error_chain(&e), "pod watch failed; retrying");
                        continue;
                    }
                }
                if !synced {
                    continue;
                }
                if let Ok(mut store) = ctx.store.write() {
                    store.clone_from(&known);
                }
                finished.retain(|uid| known.contains_key(uid));
                for (uid, pod) in &known {
                    if let Some(worker) = workers.get(uid) {
                        worker.updates.send_if_modified(|current| {
                            let changed = current.as_ref().map(|p| &p.metadata.resource_version)
                                != Some(&pod.metadata.resource_version);
                            if changed {
                                *current = Some(pod.clone());
                            }
                            changed
                        });
                    } else if !finished.contains(uid) {
                        let (tx, rx) = watch::channel(Some(pod.clone()));
                        let sandbox = adoptable.remove(uid);
                        let ctx = ctx.clone();
                        let pod = pod.clone();
                        let uid_done = uid.clone();
                        tasks.spawn(async move {
                            worker::run(ctx, pod, rx, sandbox).await;
                            uid_done
                        });
                        workers.insert(uid.clone(), WorkerHandle { updates: tx });
                    }
                }
                for (uid, worker) in &workers {
                    if !known.contains_key(uid) {
                        worker.updates.send_if_modified(|current| current.take().is_some());
                    }
                }
            }
            Some(done) = tasks.join_next() => {
                match done {
                    Ok(uid) => {
                        workers.remove(&uid);
                        finished.insert(uid);
                    }
                    Err(e) if e.is_panic() => tracing::error!(error = %e, "a pod worker panicked"),
                    Err(_) => {}
                }
            }
        }
    }
}

/// Removes sandboxes (running or not) and pod directories of pods that no longer exist.
/// Returns the pods whose CSI volumes must be unmounted first (see [`retry_orphans`]).
async fn clean_orphans(
    ctx: &Context,
    known: &HashMap<String, Arc<Pod>>,
    adoptable: &mut HashMap<String, Sandbox>,
) -> BTreeSet<String> {
    adoptable.retain(|uid, _| known.contains_key(uid));
    match ctx.runtime.sandboxes() {
        Ok(sandboxes) => {
            for sandbox in sandboxes {
                if known.contains_key(sandbox.id()) {
                    continue;
                }
                tracing::info!(sandbox = %sandbox.id(), "removing the sandbox of a pod that no longer exists");
                if let Err(e) = sandbox.remove().await {
                    tracing::warn!(sandbox = %sandbox.id(), error = %error_chain(&e), "removing an orphaned sandbox failed");
                }
            }
        }
        Err(e) => tracing::warn!(error = %error_chain(&e), "listing sandboxes failed"),
    }
    let mut orphans = BTreeSet::new();
    for dir in layout::pod_dirs(&ctx.config.run_dir) {
        if known.contains_key(&dir.uid) {
            continue;
        }
        if dir.kubelet_style {
            // kubelet's `<run_dir>/pods/<uid>`: CSI volumes, unpublished before anything goes.
            orphans.insert(dir.uid);
        } else if let Err(e) = mounts::remove_unmounted_dir(&dir.path) {
            tracing::warn!(path = %dir.path.display(), error = %e, "removing an orphaned pod directory failed");
        }
    }
    orphans
}

/// Unmounts the subPath bind mounts and the CSI volumes of orphaned pods (their
/// `vol_data.json` names driver and volume), then removes their directories; those that fail
/// stay in `orphans`.
async fn retry_orphans(ctx: &Context, orphans: &mut BTreeSet<String>) {
    let mut done = Vec::new();
    for uid in orphans.iter() {
        if let Err(e) = subpath::clean_pod(&ctx.config.run_dir, uid) {
            tracing::warn!(pod = %uid, error = %error_chain(&e), "unmounting the subPaths of an orphaned pod failed; retrying");
            continue;
        }
        match ctx.csi.unmount_pod(uid).await {
            Ok(()) => done.push(uid.clone()),
            Err(e) => {
                tracing::warn!(pod = %uid, error = %error_chain(&e), "unmounting the volumes of an orphaned pod failed; retrying");
            }
        }
    }
    for uid in done {
        orphans.remove(&uid);
    }
}

async fn sleep_until(deadline: Option<std::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}
