//! Re-adoption: a pod worker taking over a sandbox found running after an agent restart.

use std::path::Path;
use std::time::{Instant, SystemTime};

use k8s_openapi::api::core::v1::ContainerStatus;
use k8s_openapi::jiff::Timestamp;

use super::backoff::BackOff;
use super::record::{Attempt, Termination, container_id};
use super::status::ConditionClock;
use super::worker::Worker;
use crate::error::Error;
use crate::error_chain;
use pod_runtime::{Container, Sandbox};

impl Worker {
    /// Takes over a sandbox found running after an agent restart: its containers' attempts,
    /// restart counts and last states, with times and readiness from the status already
    /// posted when it describes the same attempt.
    pub(super) fn restore(&mut self, adopted: Option<Sandbox>) {
        let api_status = self.pod.status.clone().unwrap_or_default();
        let phase = api_status.phase.as_deref().unwrap_or("Pending");
        if adopted.is_none() && (phase == "Succeeded" || phase == "Failed") {
            // Finished before this agent started: never run again, keep the posted status.
            self.terminal = true;
            self.status_from_api = true;
            return;
        }
        let Some(sandbox) = adopted else {
            return;
        };
        self.start_time = api_status.start_time.as_ref().map(|t| t.0);
        if let Some(conditions) = &api_status.conditions {
            self.clock = ConditionClock::from_conditions(conditions);
        }
        let containers = match sandbox.containers() {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(pod = %self.name(), error = %error_chain(&Error::Runtime(e)), "listing adopted containers failed");
                Vec::new()
            }
        };
        let posted: Vec<ContainerStatus> = api_status
            .container_statuses
            .into_iter()
            .flatten()
            .chain(api_status.init_container_statuses.into_iter().flatten())
            .collect();
        let timings = self.ctx.config.timings;
        let mut watch = Vec::new();
        for record in self.init.iter_mut().chain(self.regular.iter_mut()) {
            let attempts: Vec<&Container> = containers
                .iter()
                .filter(|c| c.name() == record.name)
                .collect();
            let Some(latest) = attempts.last() else {
                continue;
            };
            let posted = posted.iter().find(|s| s.name == record.name);
            let id = container_id(latest);
            let same = posted.is_some_and(|s| s.container_id.as_deref() == Some(id.as_str()));
            let posted_state = posted.filter(|_| same).and_then(|s| s.state.clone());
            let started_at = posted_state
                .as_ref()
                .and_then(|s| {
                    s.running
                        .as_ref()
                        .and_then(|r| r.started_at.clone())
                        .or_else(|| s.terminated.as_ref().and_then(|t| t.started_at.clone()))
                })
                .map(|t| t.0)
                .unwrap_or_else(|| file_time(&latest.dir().join("state.json")));
            let termination = match latest.exit_status() {
                Ok(Some(status)) => Some(Termination::from_exit(
                    status,
                    started_at,
                    file_time(&latest.dir().join("exit.json")),
                    id.clone(),
                )),
                _ => None,
            };
            record.last_termination = attempts.iter().rev().nth(1).and_then(|previous| {
                let status = previous.exit_status().ok().flatten()?;
                let posted_last = posted
                    .and_then(|s| s.last_state.as_ref())
                    .and_then(|l| l.terminated.clone())
                    .filter(|t| t.container_id.as_deref() == Some(container_id(previous).as_str()));
                Some(Termination::from_exit(
                    status,
                    posted_last
                        .as_ref()
                        .and_then(|t| t.started_at.clone())
                        .map_or_else(|| file_time(&previous.dir().join("state.json")), |t| t.0),
                    posted_last
                        .as_ref()
                        .and_then(|t| t.finished_at.clone())
                        .map_or_else(|| file_time(&previous.dir().join("exit.json")), |t| t.0),
                    container_id(previous),
                ))
            });
            let running = termination.is_none();
            record.backoff = BackOff::after_restarts(
                timings.backoff_initial,
                timings.backoff_max,
                latest.attempt(),
            );
            if !running {
                record.restart_at = Some(Instant::now());
            }
            record.current = Some(Attempt {
                container: Some((*latest).clone()),
                number: latest.attempt(),
                started_at,
                started: Instant::now(),
                termination,
            });
            record.waiting = None;
            let spec = crate::pod_containers(&self.pod)
                .find(|c| c.name == record.name)
                .cloned();
            record.ready = match (same, posted) {
                (true, Some(s)) => s.ready,
                _ => spec.as_ref().is_some_and(|s| s.readiness_probe.is_none()),
            };
            record.started = match (same, posted) {
                (true, Some(s)) => s.started.unwrap_or(true),
                _ => spec.as_ref().is_some_and(|s| s.startup_probe.is_none()),
            };
            if running && let Some(spec) = spec {
                watch.push((spec, (*latest).clone()));
            }
        }
        tracing::info!(pod = %self.name(), containers = watch.len(), "adopted a running sandbox");
        self.sandbox = Some(sandbox);
        for (spec, container) in watch {
            self.watch_attempt(&spec, container);
        }
    }
}

/// A file's modification time (when the runtime wrote a state), or now.
fn file_time(path: &Path) -> Timestamp {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .and_then(|d| Timestamp::from_second(i64::try_from(d.as_secs()).ok()?).ok())
        .unwrap_or_else(Timestamp::now)
}
