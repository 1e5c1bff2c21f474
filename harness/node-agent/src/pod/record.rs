//! What the agent knows about one container of a pod: its current attempt, how the last one
//! ended, restarts, back-off and readiness; and its `ContainerStatus` as kubelet reports it.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::backoff::BackOff;
use super::probes::ProbeCounter;
use pod_runtime::{Container, ExitStatus};

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Termination {
    /// The exit code (128 + signal when killed).
    pub exit_code: i32,
    /// `Completed`, `Error` or `StartError`.
    pub reason: String,
    /// Why it could not start, for `StartError`.
    pub message: Option<String>,
    /// When it started.
    pub started_at: Timestamp,
    /// When it ended.
    pub finished_at: Timestamp,
    /// Its container id.
    pub container_id: String,
}

impl Termination {
    /// A termination from a runtime exit status.
    pub fn from_exit(
        status: ExitStatus,
        started_at: Timestamp,
        finished_at: Timestamp,
        container_id: String,
    ) -> Self {
        let exit_code = status.code();
        Termination {
            exit_code,
            reason: if exit_code == 0 { "Completed" } else { "Error" }.into(),
            message: None,
            started_at,
            finished_at,
            container_id,
        }
    }

    fn to_state(&self) -> ContainerStateTerminated {
        ContainerStateTerminated {
            exit_code: self.exit_code,
            reason: Some(self.reason.clone()),
            message: self.message.clone(),
            started_at: Some(Time(self.started_at)),
            finished_at: Some(Time(self.finished_at)),
            container_id: Some(self.container_id.clone()),
            signal: None,
        }
    }
}

/// One attempt of a container.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// The runtime's container (absent when it could not start).
    pub container: Option<Container>,
    /// The attempt number.
    pub number: u32,
    /// When it started.
    pub started_at: Timestamp,
    /// When it started, for back-off arithmetic.
    pub started: Instant,
    /// How it ended, once it has.
    pub termination: Option<Termination>,
}

/// Everything about one container of the pod.
#[derive(Debug, Clone)]
pub struct ContainerRecord {
    /// The container name.
    pub name: String,
    /// Its image reference.
    pub image: String,
    /// The current (or last) attempt.
    pub current: Option<Attempt>,
    /// How the attempt before the current one ended (`lastState`).
    pub last_termination: Option<Termination>,
    /// Why it is waiting (`ContainerCreating`, `CrashLoopBackOff`, …) with a message.
    pub waiting: Option<(String, Option<String>)>,
    /// Restart back-off.
    pub backoff: BackOff,
    /// When the next restart may happen (set when it ends and is to be restarted).
    pub restart_at: Option<Instant>,
    /// The back-off delay `restart_at` was computed with.
    pub restart_delay: Duration,
    /// Readiness (readiness probe passed, or no probe and running).
    pub ready: bool,
    /// Whether the startup probe passed (true without one).
    pub started: bool,
    /// Probe counters of the current attempt: startup, readiness, liveness.
    pub counters: [ProbeCounter; 3],
    /// Whether a BackOff event was sent for the current back-off.
    pub backoff_reported: bool,
}

impl ContainerRecord {
    /// A container not started yet.
    pub fn new(name: &str, image: &str, backoff: BackOff) -> Self {
        ContainerRecord {
            name: name.into(),
            image: image.into(),
            current: None,
            last_termination: None,
            waiting: Some(("ContainerCreating".into(), None)),
            backoff,
            restart_at: None,
            restart_delay: Duration::ZERO,
            ready: false,
            started: false,
            counters: Default::default(),
            backoff_reported: false,
        }
    }

    /// Whether the current attempt runs.
    pub fn is_running(&self) -> bool {
        self.current
            .as_ref()
            .is_some_and(|a| a.termination.is_none())
    }

    /// How the current attempt ended, if it has.
    pub fn terminated(&self) -> Option<&Termination> {
        self.current.as_ref().and_then(|a| a.termination.as_ref())
    }

    /// The number of restarts so far.
    pub fn restart_count(&self) -> u32 {
        self.current.as_ref().map_or(0, |a| a.number)
    }

    /// The next attempt's number.
    pub fn next_attempt(&self) -> u32 {
        self.current.as_ref().map_or(0, |a| a.number + 1)
    }

    /// The container status as kubelet reports it.
    pub fn status(&self, image_id: &str) -> ContainerStatus {
        let current_id = self.current.as_ref().map(|a| {
            a.termination
                .as_ref()
                .map(|t| t.container_id.clone())
                .unwrap_or_else(|| a.container.as_ref().map(container_id).unwrap_or_default())
        });
        let (state, last) = match (&self.waiting, &self.current) {
            (Some((reason, message)), current) => (
                ContainerState {
                    waiting: Some(ContainerStateWaiting {
                        reason: Some(reason.clone()),
                        message: message.clone(),
                    }),
                    ..ContainerState::default()
                },
                // Waiting to restart: the last state is how the current attempt ended.
                current
                    .as_ref()
                    .and_then(|a| a.termination.as_ref())
                    .or(self.last_termination.as_ref()),
            ),
            (None, Some(attempt)) => match &attempt.termination {
                Some(t) => (
                    ContainerState {
                        terminated: Some(t.to_state()),
                        ..ContainerState::default()
                    },
                    self.last_termination.as_ref(),
                ),
                None => (
                    ContainerState {
                        running: Some(ContainerStateRunning {
                            started_at: Some(Time(attempt.started_at)),
                        }),
                        ..ContainerState::default()
                    },
                    self.last_termination.as_ref(),
                ),
            },
            (None, None) => (ContainerState::default(), None),
        };
        let running = self.is_running() && self.waiting.is_none();
        ContainerStatus {
            name: self.name.clone(),
            image: self.image.clone(),
            image_id: image_id.into(),
            container_id: current_id.filter(|id| !id.is_empty()),
            state: Some(state),
            last_state: Some(ContainerState {
                terminated: last.map(Termination::to_state),
                ..ContainerState::default()
            }),
            ready: running && self.ready,
            restart_count: i32::try_from(self.restart_count()).unwrap_or(i32::MAX),
            started: Some(running && self.started),
            ..ContainerStatus::default()
        }
    }
}

/// The id of a container attempt: `pod-sandbox://<sandbox>/<name>.<attempt>`.
pub fn container_id(container: &Container) -> String {
    let sandbox = container
        .dir()
        .parent()
        .and_then(|p| p.parent())
        .and_then(|p| p.file_name())
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!(
        "pod-sandbox://{sandbox}/{}.{}",
        container.name(),
        container.attempt()
    )
}
