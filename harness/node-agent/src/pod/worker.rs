//! The pod worker: one task per pod, driving it from the latest Pod object and what its
//! containers do. Each turn of its loop syncs the pod (volumes, sandbox, init containers in
//! order, containers with restart back-off, or graceful termination), posts the status when it
//! changed, then waits for a pod update, a container exit, a probe result or a deadline.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container as ContainerSpec, Pod, PodStatus};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use serde_json::json;
use tokio::sync::{mpsc, watch};
use tokio::task::{AbortHandle, JoinSet};

use super::Context;
use super::probes::ProbeResult;
use super::record::ContainerRecord;
use super::sources::Sources;
use super::status::{self, ConditionClock, StatusInput};
use super::subpath;
use super::volumes::{self, Volumes};
use crate::error::{Error, Result};
use crate::error_chain;
use crate::events::EventType;
use crate::layout;
use crate::mounts;
use pod_runtime::{ExitStatus, Sandbox, SandboxSpec};

/// kubelet never gives containers less than this to stop.
const MINIMUM_GRACE: Duration = Duration::from_secs(2);
/// The default `terminationGracePeriodSeconds`.
const DEFAULT_GRACE_SECONDS: i64 = 30;

/// What the worker's helper tasks report.
#[derive(Debug)]
pub enum WorkerEvent {
    /// A container attempt ended.
    Exited {
        /// The container name.
        container: String,
        /// The attempt.
        attempt: u32,
        /// How it ended.
        status: ExitStatus,
    },
    /// A probe ran.
    Probe(ProbeResult),
}

impl From<ProbeResult> for WorkerEvent {
    fn from(result: ProbeResult) -> Self {
        WorkerEvent::Probe(result)
    }
}

/// The state of one pod on this node.
pub struct Worker {
    pub(super) ctx: Arc<Context>,
    pub(super) uid: String,
    pub(super) pod: Arc<Pod>,
    /// The pod was removed from the API (force deletion).
    gone: bool,
    updates: watch::Receiver<Option<Arc<Pod>>>,
    pub(super) events_tx: mpsc::UnboundedSender<WorkerEvent>,
    events_rx: mpsc::UnboundedReceiver<WorkerEvent>,
    /// Exit watchers and probes; aborted when the worker ends.
    pub(super) tasks: JoinSet<()>,
    /// Probe tasks of each container's current attempt.
    pub(super) probe_tasks: Vec<(String, AbortHandle)>,
    pub(super) sandbox: Option<Sandbox>,
    volumes: Option<Volumes>,
    pub(super) init: Vec<ContainerRecord>,
    pub(super) regular: Vec<ContainerRecord>,
    pub(super) clock: ConditionClock,
    pub(super) start_time: Option<Timestamp>,
    published: Option<serde_json::Value>,
    /// Succeeded or Failed: nothing runs any more.
    pub(super) terminal: bool,
    /// The status came from the API and was never recomputed (a pod already terminal when
    /// the agent started): it is not posted again.
    pub(super) status_from_api: bool,
    /// When a failed setup, container configuration or status post is retried.
    pub(super) retry_at: Option<Instant>,
    retries: u32,
    last_problem: Option<String>,
    /// When unmounting the volumes of a terminating pod is tried again.
    unmount_retry: Option<Instant>,
    /// Terminated and cleaned up: the worker ends.
    terminated_all: bool,
}

/// Runs the worker of one pod until the pod is gone (deleted and cleaned up) or the task is
/// aborted (agent shutdown: containers keep running).
pub async fn run(
    ctx: Arc<Context>,
    pod: Arc<Pod>,
    updates: watch::Receiver<Option<Arc<Pod>>>,
    adopted: Option<Sandbox>,
) {
    let mut worker = Worker::new(ctx, pod, updates);
    worker.restore(adopted);
    loop {
        let next = worker.sync().await;
        if worker.done() {
            return;
        }
        let publish_retry = worker.publish().await;
        let next = [next, publish_retry].into_iter().flatten().min();
        tokio::select! {
            changed = worker.updates.changed() => {
                if changed.is_err() {
                    return;
                }
                let latest = worker.updates.borrow_and_update().clone();
                match latest {
                    Some(pod) => worker.pod = pod,
                    None => worker.gone = true,
                }
            }
            Some(event) = worker.events_rx.recv() => worker.handle(event),
            () = sleep_until(next) => {}
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

impl Worker {
    fn new(ctx: Arc<Context>, pod: Arc<Pod>, updates: watch::Receiver<Option<Arc<Pod>>>) -> Self {
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let timings = ctx.config.timings;
        let backoff = super::backoff::BackOff::new(timings.backoff_initial, timings.backoff_max);
        let spec = pod.spec.clone().unwrap_or_default();
        let record = |c: &ContainerSpec| {
            ContainerRecord::new(&c.name, c.image.as_deref().unwrap_or_default(), backoff)
        };
        Worker {
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            init: spec.init_containers.iter().flatten().map(record).collect(),
            regular: spec.containers.iter().map(record).collect(),
            ctx,
            pod,
            gone: false,
            updates,
            events_tx,
            events_rx,
            tasks: JoinSet::new(),
            probe_tasks: Vec::new(),
            sandbox: None,
            volumes: None,
            clock: ConditionClock::default(),
            start_time: None,
            published: None,
            terminal: false,
            status_from_api: false,
            retry_at: None,
            retries: 0,
            last_problem: None,
            unmount_retry: None,
            terminated_all: false,
        }
    }

    fn done(&self) -> bool {
        self.terminated_all
    }

    pub(super) fn name(&self) -> String {
        self.pod.metadata.name.clone().unwrap_or_default()
    }

    pub(super) fn namespace(&self) -> String {
        self.pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into())
    }

    pub(super) fn spec_of(&self, name: &str) -> Option<ContainerSpec> {
        crate::pod_containers(&self.pod)
            .find(|c| c.name == name)
            .cloned()
    }

    pub(super) fn restart_policy(&self) -> String {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.restart_policy.clone())
            .unwrap_or_else(|| "Always".into())
    }

    pub(super) fn event(
        &self,
        container: Option<&str>,
        type_: EventType,
        reason: &str,
        message: String,
    ) {
        self.ctx
            .recorder
            .pod(&self.pod, container, type_, reason, message);
    }

    /// Reports a setup problem (once until it changes, and only when it persists past the
    /// first quick retries: a pod's references often become readable moments after the pod,
    /// when the Node authorizer has seen it) and schedules a retry.
    pub(super) fn problem(&mut self, container: Option<&str>, reason: &str, message: String) {
        if self.retries >= 2 && self.last_problem.as_deref() != Some(message.as_str()) {
            tracing::warn!(pod = %self.name(), reason, %message, "pod setup problem");
            self.event(container, EventType::Warning, reason, message.clone());
            self.last_problem = Some(message);
        }
        let quick = Duration::from_millis(50).saturating_mul(1 << self.retries.min(8));
        self.retries += 1;
        self.retry_at = Some(Instant::now() + quick.min(self.ctx.config.timings.retry_interval));
    }

    /// One sync: returns when it wants to run again at the latest.
    async fn sync(&mut self) -> Option<Instant> {
        if self.gone || self.pod.metadata.deletion_timestamp.is_some() {
            if let Some(at) = self.unmount_retry.filter(|at| *at > Instant::now()) {
                return Some(at);
            }
            self.terminate().await;
            return self.unmount_retry;
        }
        if self.terminal {
            return None;
        }
        let now = Instant::now();
        if let Some(at) = self.retry_at {
            if at > now {
                return Some(at);
            }
            self.retry_at = None;
        }
        if self.start_time.is_none() {
            self.start_time = Some(Timestamp::now());
        }
        if !self.setup().await {
            return self.retry_at;
        }
        let next = self.run_containers().await;
        let phase = status::phase(
            self.pod.spec.as_ref().unwrap_or(&Default::default()),
            &self.init_statuses(),
            &self.regular_statuses(),
        );
        if phase == "Succeeded" || phase == "Failed" {
            self.terminal = true;
            self.stop_sandbox().await;
            return None;
        }
        [next, self.retry_at].into_iter().flatten().min()
    }

    /// Volumes and sandbox; false (with a retry scheduled) when they could not be set up.
    async fn setup(&mut self) -> bool {
        if self.volumes.is_none() {
            let pod_dir = self.pod_dir();
            let mut sources = Sources::new(&self.ctx.client, &self.namespace());
            let prepared = volumes::prepare(
                &self.ctx.client,
                &self.ctx.config,
                &self.ctx.csi,
                &mut sources,
                &self.pod,
                &pod_dir,
            )
            .await;
            match prepared {
                Ok(v) => {
                    self.volumes = Some(v);
                    self.problem_solved();
                }
                Err(e) => {
                    let message = match &e {
                        Error::Volume { volume, reason } => {
                            format!("MountVolume.SetUp failed for volume {volume:?} : {reason}")
                        }
                        // kubelet's whole message.
                        Error::CsiVolume(csi) => error_chain(csi),
                        other => format!("MountVolume.SetUp failed: {}", error_chain(other)),
                    };
                    self.problem(None, "FailedMount", message);
                    if let Error::CsiVolume(csi) = &e
                        && csi.is_not_attached()
                    {
                        // Waiting for the attach/detach controller: look again every second.
                        let soon = Instant::now() + Duration::from_secs(1);
                        self.retry_at = self.retry_at.map(|at| at.min(soon)).or(Some(soon));
                    }
                    return false;
                }
            }
        }
        if self.sandbox.is_none() {
            match self.create_sandbox().await {
                Ok(sandbox) => {
                    self.sandbox = Some(sandbox);
                    self.problem_solved();
                }
                Err(e) => {
                    let message = format!("Failed to create pod sandbox: {}", error_chain(&e));
                    self.problem(None, "FailedCreatePodSandBox", message);
                    return false;
                }
            }
        }
        true
    }

    /// Forgets past setup problems once something they blocked succeeded.
    pub(super) fn problem_solved(&mut self) {
        self.retries = 0;
        self.last_problem = None;
    }

    async fn create_sandbox(&self) -> Result<Sandbox> {
        // A sandbox left stopped by an earlier run of this pod (e.g. killed with the harness).
        if let Some(stale) = self.ctx.runtime.sandbox(&self.uid)? {
            stale.remove().await?;
        }
        let hostname = self
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.hostname.clone())
            .unwrap_or_else(|| self.name());
        let hostname: String = hostname.chars().take(63).collect();
        let hostname = hostname.trim_end_matches(['-', '.']).to_string();
        Ok(self
            .ctx
            .runtime
            .create_sandbox(SandboxSpec::new(&self.uid, hostname))
            .await?)
    }

    pub(super) fn volumes(&self) -> Option<&Volumes> {
        self.volumes.as_ref()
    }

    pub(super) fn pod_dir(&self) -> std::path::PathBuf {
        layout::pod_dir(
            &self.ctx.config.run_dir,
            &self.namespace(),
            &self.name(),
            &self.uid,
        )
    }

    async fn stop_sandbox(&mut self) {
        self.abort_probes(None);
        if let Some(sandbox) = &self.sandbox
            && let Err(e) = sandbox.stop().await
        {
            tracing::warn!(pod = %self.name(), error = %error_chain(&e), "stopping the sandbox failed");
        }
    }

    /// Stops the containers gracefully, removes the sandbox and the volumes, posts the final
    /// status and deletes the Pod object (grace 0), as kubelet does once a pod is gone.
    async fn terminate(&mut self) {
        let spec_grace = self
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.termination_grace_period_seconds)
            .unwrap_or(DEFAULT_GRACE_SECONDS);
        let grace = self
            .pod
            .metadata
            .deletion_grace_period_seconds
            .map_or(spec_grace, |d| d.min(spec_grace));
        let grace = Duration::from_secs(u64::try_from(grace).unwrap_or(0)).max(MINIMUM_GRACE);
        self.abort_probes(None);
        let mut stops = Vec::new();
        for record in self.init.iter().chain(self.regular.iter()) {
            if let Some(container) = record
                .current
                .as_ref()
                .filter(|_| record.is_running())
                .and_then(|a| a.container.clone())
            {
                self.event(
                    Some(&record.name),
                    EventType::Normal,
                    "Killing",
                    format!("Stopping container {}", record.name),
                );
                stops.push(async move {
                    let status = container.stop(grace).await;
                    (container.name().to_string(), container.attempt(), status)
                });
            }
        }
        for (name, attempt, status) in futures::future::join_all(stops).await {
            let status = status.unwrap_or_else(|e| {
                tracing::warn!(container = %name, error = %error_chain(&e), "stopping a container failed");
                ExitStatus::Unknown
            });
            self.record_exit(&name, attempt, status);
        }
        self.tasks.abort_all();
        let sandbox = match self.sandbox.take() {
            Some(s) => Some(s),
            None => self.ctx.runtime.sandbox(&self.uid).ok().flatten(),
        };
        if let Some(sandbox) = sandbox
            && let Err(e) = sandbox.remove().await
        {
            tracing::warn!(pod = %self.name(), error = %error_chain(&e), "removing the sandbox failed");
        }
        // subPath bind mounts first, as kubelet cleans them before tearing a volume down;
        // then CSI volumes: unpublished (and unstaged when no other pod uses them) before any
        // directory goes; a directory still holding a mount point is never removed.
        let unmounted = match subpath::clean_pod(&self.ctx.config.run_dir, &self.uid) {
            Err(e) => Err(format!("cleaning the subPath mounts: {}", error_chain(&e))),
            Ok(()) => match self.ctx.csi.unmount_pod(&self.uid).await {
                Ok(()) => mounts::remove_unmounted_dir(&self.pod_dir())
                    .map_err(|e| format!("removing the pod directory: {e}")),
                Err(e) => Err(error_chain(&e)),
            },
        };
        if let Err(message) = unmounted {
            self.problem(None, "FailedUnmount", message);
            self.unmount_retry = self.retry_at;
            return;
        }
        self.unmount_retry = None;
        self.terminated_all = true;
        if !self.gone {
            if !self.status_from_api {
                self.publish().await;
            }
            let pods: Api<Pod> = Api::namespaced(self.ctx.client.clone(), &self.namespace());
            let params = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions {
                    uid: Some(self.uid.clone()),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match pods.delete(&self.name(), &params).await {
                Ok(_) => tracing::info!(pod = %self.name(), "pod deleted"),
                Err(e) if Error::is_not_found(&e) || Error::is_conflict(&e) => {}
                Err(e) => tracing::warn!(pod = %self.name(), error = %e, "deleting the pod failed"),
            }
        }
        self.gone = true;
    }

    fn handle(&mut self, event: WorkerEvent) {
        match event {
            WorkerEvent::Exited {
                container,
                attempt,
                status,
            } => self.record_exit(&container, attempt, status),
            WorkerEvent::Probe(result) => self.record_probe(result),
        }
    }

    pub(super) fn init_statuses(&self) -> Vec<k8s_openapi::api::core::v1::ContainerStatus> {
        self.init
            .iter()
            .map(|r| r.status(&self.image_id(&r.image)))
            .collect()
    }

    pub(super) fn regular_statuses(&self) -> Vec<k8s_openapi::api::core::v1::ContainerStatus> {
        self.regular
            .iter()
            .map(|r| r.status(&self.image_id(&r.image)))
            .collect()
    }

    fn image_id(&self, image: &str) -> String {
        match self.ctx.config.images.binary(image) {
            Some(binary) => format!("file://{}", binary.display()),
            None => format!("host-tools://{image}"),
        }
    }

    fn status(&mut self) -> PodStatus {
        let spec = self.pod.spec.clone().unwrap_or_default();
        let existing = self
            .pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        let input = StatusInput {
            spec: &spec,
            existing_conditions: &existing,
            init: self.init_statuses(),
            regular: self.regular_statuses(),
            ip: self.ctx.config.node_ip.to_string(),
            start_time: self.start_time.unwrap_or_else(Timestamp::now),
        };
        status::build(input, &mut self.clock)
    }

    /// Posts the status when it changed; returns when to retry after a failure.
    async fn publish(&mut self) -> Option<Instant> {
        if self.status_from_api {
            return None;
        }
        let status = self.status();
        let value = match serde_json::to_value(&status) {
            Ok(v) => v,
            Err(e) => {
                tracing::error!(error = %e, "serializing a pod status failed");
                return None;
            }
        };
        if self.published.as_ref() == Some(&value) {
            return None;
        }
        let pods: Api<Pod> = Api::namespaced(self.ctx.client.clone(), &self.namespace());
        // The uid makes the patch fail rather than touch a new pod of the same name.
        let patch = json!({"metadata": {"uid": self.uid}, "status": value});
        match pods
            .patch_status(
                &self.name(),
                &PatchParams::default(),
                &Patch::Strategic(patch),
            )
            .await
        {
            Ok(_) => {
                tracing::debug!(pod = %self.name(), phase = ?status.phase, "status posted");
                self.published = Some(value);
                None
            }
            Err(e) => {
                tracing::warn!(pod = %self.name(), error = %e, "posting the pod status failed");
                Some(Instant::now() + Duration::from_secs(1))
            }
        }
    }
}
