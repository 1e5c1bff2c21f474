//! The containers of a pod worker: starting attempts (init containers in order, then the
//! others), restarts with back-off by restart policy, exits, probe results (readiness,
//! liveness and startup kills).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Container as PodContainer;
use k8s_openapi::jiff::Timestamp;

use super::env;
use super::probes::{self, ProbeKind, ProbeResult};
use super::record::{Attempt, ContainerRecord, Termination, container_id};
use super::sources::Sources;
use super::subpath::{self, SubPathMount};
use super::worker::{Worker, WorkerEvent};
use crate::error::{Error, Result};
use crate::error_chain;
use crate::events::EventType;
use pod_runtime::{Container, ContainerSpec, Device, ExitStatus, Mount, Propagation, User};

/// Which list a container is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Init,
    Regular,
}

fn should_restart(policy: &str, exit_code: i32) -> bool {
    match policy {
        "Never" => false,
        "OnFailure" => exit_code != 0,
        _ => true,
    }
}

impl Worker {
    fn records(&mut self, kind: Kind) -> &mut Vec<ContainerRecord> {
        match kind {
            Kind::Init => &mut self.init,
            Kind::Regular => &mut self.regular,
        }
    }

    fn record_mut(&mut self, name: &str) -> Option<&mut ContainerRecord> {
        self.init
            .iter_mut()
            .chain(self.regular.iter_mut())
            .find(|r| r.name == name)
    }

    /// Starts what should run now: the next init container, or (all init containers done) every
    /// container not running whose restart is due. Returns the next restart deadline.
    pub(super) async fn run_containers(&mut self) -> Option<Instant> {
        let policy = self.restart_policy();
        let now = Instant::now();
        let mut init_done = true;
        let mut next = None;
        for i in 0..self.init.len() {
            let record = &self.init[i];
            if record.is_running() {
                init_done = false;
                break;
            }
            match record.terminated().map(|t| t.exit_code) {
                Some(0) => continue,
                Some(code) => {
                    init_done = false;
                    // An init container that failed is retried unless the policy is Never
                    // (then the pod fails).
                    if should_restart(&policy, code) {
                        next = self.restart_when_due(Kind::Init, i, now).await;
                    }
                    break;
                }
                None => {
                    init_done = false;
                    if record.current.is_none() {
                        self.start(Kind::Init, i).await;
                    }
                    break;
                }
            }
        }
        if !init_done {
            for record in &mut self.regular {
                if record.current.is_none() {
                    record.waiting = Some(("PodInitializing".into(), None));
                }
            }
            return next;
        }
        for i in 0..self.regular.len() {
            let record = &self.regular[i];
            if record.is_running() {
                continue;
            }
            match record.terminated().map(|t| t.exit_code) {
                None if record.current.is_none() => {
                    self.start(Kind::Regular, i).await;
                }
                Some(code) if should_restart(&policy, code) => {
                    if let Some(at) = self.restart_when_due(Kind::Regular, i, now).await {
                        next = Some(next.map_or(at, |n: Instant| n.min(at)));
                    }
                }
                _ => {}
            }
        }
        next
    }

    /// Restarts the container if its back-off is over; otherwise marks it waiting in
    /// `CrashLoopBackOff` and returns when to try.
    async fn restart_when_due(&mut self, kind: Kind, i: usize, now: Instant) -> Option<Instant> {
        let pod_ref = format!("{}_{}({})", self.name(), self.namespace(), self.uid);
        let record = &mut self.records(kind)[i];
        let at = *record.restart_at.get_or_insert(now);
        if at > now {
            let message = format!(
                "back-off {:?} restarting failed container={} pod={pod_ref}",
                record.restart_delay, record.name
            );
            record.waiting = Some(("CrashLoopBackOff".into(), Some(message)));
            if !record.backoff_reported {
                record.backoff_reported = true;
                let name = record.name.clone();
                self.event(
                    Some(&name),
                    EventType::Warning,
                    "BackOff",
                    "Back-off restarting failed container".into(),
                );
            }
            return Some(at);
        }
        self.start(kind, i).await;
        None
    }

    /// Starts the next attempt of a container.
    async fn start(&mut self, kind: Kind, i: usize) {
        let name = self.records(kind)[i].name.clone();
        let Some(spec) = self.spec_of(&name) else {
            return;
        };
        let Some(sandbox) = self.sandbox.clone() else {
            return;
        };
        let mut attempt = self.records(kind)[i].next_attempt();
        // Attempts that never started (the command could not run) left their directory.
        while sandbox
            .dir()
            .join("containers")
            .join(format!("{name}.{attempt}"))
            .exists()
        {
            attempt += 1;
        }
        let run_spec = match self.container_spec(&spec, attempt).await {
            Ok(s) => {
                self.problem_solved();
                s
            }
            Err(e) => {
                let message = error_chain(&e);
                self.records(kind)[i].waiting =
                    Some(("CreateContainerConfigError".into(), Some(message.clone())));
                self.problem(Some(&name), "Failed", format!("Error: {message}"));
                return;
            }
        };
        let image = spec.image.clone().unwrap_or_default();
        self.event(
            Some(&name),
            EventType::Normal,
            "Pulled",
            format!("Container image {image:?} already present on machine"),
        );
        let started = Instant::now();
        let started_at = Timestamp::now();
        let failed_id = format!("pod-sandbox://{}/{name}.{attempt}", self.uid);
        let outcome = sandbox.run_container(run_spec).await;
        let record = &mut self.records(kind)[i];
        if attempt > 0 {
            record.backoff.restarted();
        }
        record.restart_at = None;
        record.backoff_reported = false;
        record.waiting = None;
        record.counters = Default::default();
        record.last_termination = record.current.take().and_then(|a| a.termination);
        match outcome {
            Ok(container) => {
                record.ready = spec.readiness_probe.is_none();
                record.started = spec.startup_probe.is_none();
                record.current = Some(Attempt {
                    container: Some(container.clone()),
                    number: attempt,
                    started_at,
                    started,
                    termination: None,
                });
                self.event(
                    Some(&name),
                    EventType::Normal,
                    "Created",
                    format!("Created container {name}"),
                );
                self.event(
                    Some(&name),
                    EventType::Normal,
                    "Started",
                    format!("Started container {name}"),
                );
                self.watch_attempt(&spec, container);
            }
            Err(e) => {
                // As containerd reports it: the attempt ended at once with 128, StartError.
                let message = error_chain(&Error::Runtime(e));
                record.current = Some(Attempt {
                    container: None,
                    number: attempt,
                    started_at,
                    started,
                    termination: Some(Termination {
                        exit_code: 128,
                        reason: "StartError".into(),
                        message: Some(message.clone()),
                        started_at,
                        finished_at: Timestamp::now(),
                        container_id: failed_id,
                    }),
                });
                let delay = record.backoff.delay(Duration::ZERO);
                record.restart_delay = delay;
                record.restart_at = Some(Instant::now() + delay);
                self.event(
                    Some(&name),
                    EventType::Warning,
                    "Failed",
                    format!("Error: {message}"),
                );
            }
        }
    }

    /// Spawns the exit watcher and the probes of a running attempt.
    pub(super) fn watch_attempt(&mut self, spec: &PodContainer, container: Container) {
        let tx = self.events_tx.clone();
        let watched = container.clone();
        self.tasks.spawn(async move {
            let status = watched.wait().await.unwrap_or(ExitStatus::Unknown);
            let _ = tx.send(WorkerEvent::Exited {
                container: watched.name().to_string(),
                attempt: watched.attempt(),
                status,
            });
        });
        self.abort_probes(Some(&spec.name));
        for kind in [
            ProbeKind::Startup,
            ProbeKind::Readiness,
            ProbeKind::Liveness,
        ] {
            let Some(probe) = kind.of(spec).cloned() else {
                continue;
            };
            let handle = self.tasks.spawn(probes::run(
                kind,
                probe,
                spec.clone(),
                container.clone(),
                self.ctx.config.node_ip,
                self.ctx.http.clone(),
                self.events_tx.clone(),
            ));
            self.probe_tasks.push((spec.name.clone(), handle));
        }
    }

    /// Stops the probes of one container (or of all).
    pub(super) fn abort_probes(&mut self, container: Option<&str>) {
        self.probe_tasks.retain(|(name, handle)| {
            let hit = container.is_none_or(|c| c == name);
            if hit {
                handle.abort();
            }
            !hit
        });
    }

    /// Records that an attempt ended (ignores stale or repeated reports).
    pub(super) fn record_exit(&mut self, name: &str, attempt: u32, status: ExitStatus) {
        let Some(record) = self.record_mut(name) else {
            return;
        };
        let Some(current) = record.current.as_mut() else {
            return;
        };
        if current.number != attempt || current.termination.is_some() {
            return;
        }
        let id = current
            .container
            .as_ref()
            .map(container_id)
            .unwrap_or_default();
        current.termination = Some(Termination::from_exit(
            status,
            current.started_at,
            Timestamp::now(),
            id,
        ));
        let ran_for = current.started.elapsed();
        record.ready = false;
        let delay = record.backoff.delay(ran_for);
        record.restart_delay = delay;
        record.restart_at = Some(Instant::now() + delay);
        tracing::debug!(container = name, attempt, ?status, "container exited");
        self.abort_probes(Some(name));
    }

    /// Applies a probe result: readiness, startup, or a kill after too many failures.
    pub(super) fn record_probe(&mut self, result: ProbeResult) {
        let Some(spec) = self.spec_of(&result.container) else {
            return;
        };
        let Some(probe) = result.kind.of(&spec).cloned() else {
            return;
        };
        let Some(record) = self.record_mut(&result.container) else {
            return;
        };
        let current_attempt = record.current.as_ref().map(|a| a.number);
        if current_attempt != Some(result.attempt) || !record.is_running() {
            return;
        }
        if result.kind != ProbeKind::Startup && !record.started {
            return;
        }
        let index = match result.kind {
            ProbeKind::Startup => 0,
            ProbeKind::Readiness => 1,
            ProbeKind::Liveness => 2,
        };
        let verdict = record.counters[index].record(&probe, result.success);
        let mut kill = None;
        match (result.kind, verdict) {
            (ProbeKind::Readiness, Some(ready)) => record.ready = ready,
            (ProbeKind::Startup, Some(true)) => record.started = true,
            (ProbeKind::Startup | ProbeKind::Liveness, Some(false)) => {
                kill = Some(format!(
                    "Container {} failed {} probe, will be restarted",
                    result.container,
                    result.kind.title().to_lowercase()
                ));
            }
            _ => {}
        }
        if !result.success {
            self.event(
                Some(&result.container),
                EventType::Warning,
                "Unhealthy",
                format!("{} probe failed: {}", result.kind.title(), result.message),
            );
        }
        if let Some(message) = kill {
            self.kill(&result.container, message);
        }
    }

    /// Stops a container for a failed probe: SIGTERM now, SIGKILL after the grace period; its
    /// exit is then handled like any other.
    fn kill(&mut self, name: &str, message: String) {
        let grace = self
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.termination_grace_period_seconds)
            .unwrap_or(30);
        let grace =
            Duration::from_secs(u64::try_from(grace).unwrap_or(0)).max(Duration::from_secs(2));
        let container = self
            .record_mut(name)
            .and_then(|r| r.current.as_ref())
            .and_then(|a| a.container.clone());
        self.abort_probes(Some(name));
        let Some(container) = container else {
            return;
        };
        self.event(Some(name), EventType::Normal, "Killing", message);
        self.tasks.spawn(async move {
            if let Err(e) = container.stop(grace).await {
                tracing::warn!(container = %container.name(), error = %error_chain(&Error::Runtime(e)), "stopping an unhealthy container failed");
            }
        });
    }

    /// What the runtime runs for this attempt: argv (image map, `$(VAR)` expansion), env,
    /// working directory, user, volume mounts and devices.
    async fn container_spec(&self, spec: &PodContainer, attempt: u32) -> Result<ContainerSpec> {
        let mut sources = Sources::new(&self.ctx.client, &self.namespace());
        let env = env::build(&self.ctx.config, &mut sources, &self.pod, spec).await?;
        let lookup = |key: &str| env.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
        let command: Vec<String> = spec
            .command
            .iter()
            .flatten()
            .map(|s| env::expand(s, lookup))
            .collect();
        let args: Vec<String> = spec
            .args
            .iter()
            .flatten()
            .map(|s| env::expand(s, lookup))
            .collect();
        let image = spec.image.clone().unwrap_or_default();
        let argv = self
            .ctx
            .config
            .images
            .resolve(&spec.name, &image, &command, &args)
            .map_err(|e| Error::container(&spec.name, e.to_string()))?;
        let mut run = ContainerSpec::new(&spec.name, argv);
        run.attempt = attempt;
        run.working_dir = spec.working_dir.as_ref().map(PathBuf::from);
        run.user = self.user(spec);
        run.supplementary_groups = self.supplementary_groups();
        run.stdin = spec.stdin.unwrap_or(false);
        run.stdin_once = spec.stdin_once.unwrap_or(false);
        run.tty = spec.tty.unwrap_or(false);
        let volumes = self.volumes();
        for (index, mount) in spec.volume_mounts.iter().flatten().enumerate() {
            let Some((volume_path, forced_read_only)) = volumes.and_then(|v| v.get(&mount.name))
            else {
                return Err(Error::container(
                    &spec.name,
                    format!("volume mount {:?} names no volume of the pod", mount.name),
                ));
            };
            let sub = match (&mount.sub_path, &mount.sub_path_expr) {
                (Some(p), _) if !p.is_empty() => Some(p.clone()),
                (_, Some(e)) if !e.is_empty() => Some(env::expand(e, lookup)),
                _ => None,
            };
            let source = match sub {
                Some(sub) => {
                    let sub_path = SubPathMount {
                        pod_uid: &self.uid,
                        container: &spec.name,
                        index,
                        volume: &mount.name,
                        volume_path,
                        sub_path: &sub,
                    };
                    subpath::prepare(&self.ctx.config.run_dir, &sub_path).map_err(|cause| {
                        tracing::warn!(pod = %self.name(), container = %spec.name, mount = %mount.name, sub_path = %sub, error = %error_chain(&cause), "preparing a subPath failed");
                        Error::sub_path(&spec.name, &mount.name, &sub)(cause)
                    })?
                }
                None => volume_path.to_path_buf(),
            };
            let propagation = propagation(spec, mount.mount_propagation.as_deref())
                .map_err(|reason| Error::container(&spec.name, reason))?;
            run.mounts.push(Mount {
                source,
                target: PathBuf::from(&mount.mount_path),
                read_only: forced_read_only || mount.read_only == Some(true),
                propagation,
            });
        }
        for device in spec.volume_devices.iter().flatten() {
            let Some(source) = volumes.and_then(|v| v.device(&device.name)) else {
                return Err(Error::container(
                    &spec.name,
                    format!(
                        "volume device {:?} names no block volume of the pod",
                        device.name
                    ),
                ));
            };
            run.devices
                .push(Device::new(source, PathBuf::from(&device.device_path)));
        }
        // Last, so no volume hides it.
        run.mounts
            .extend(self.ctx.config.images.binary_mount(&image, &run.argv));
        run.env = env;
        Ok(run)
    }

    fn user(&self, spec: &PodContainer) -> Option<User> {
        let pod_ctx = self
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.security_context.as_ref());
        let ctx = spec.security_context.as_ref();
        let uid = ctx
            .and_then(|c| c.run_as_user)
            .or_else(|| pod_ctx.and_then(|c| c.run_as_user))?;
        let gid = ctx
            .and_then(|c| c.run_as_group)
            .or_else(|| pod_ctx.and_then(|c| c.run_as_group))
            .unwrap_or(0);
        Some(User {
            uid: u32::try_from(uid).ok()?,
            gid: u32::try_from(gid).ok()?,
        })
    }

    /// The groups the container's processes get besides their group: the pod's
    /// `supplementalGroups`, then its `fsGroup` (as kubelet hands them to the runtime).
    fn supplementary_groups(&self) -> Vec<u32> {
        let Some(context) = self
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.security_context.as_ref())
        else {
            return Vec::new();
        };
        let mut groups = Vec::new();
        for group in context
            .supplemental_groups
            .iter()
            .flatten()
            .chain(context.fs_group.as_ref())
        {
            match u32::try_from(*group) {
                Ok(group) if !groups.contains(&group) => groups.push(group),
                Ok(_) => {}
                Err(_) => {
                    tracing::warn!(pod = %self.name(), group, "ignoring a group id out of range");
                }
            }
        }
        groups
    }
}

/// A volume mount's `mountPropagation` as the runtime's, checked as kubelet does:
/// `Bidirectional` only in privileged containers.
fn propagation(
    container: &PodContainer,
    value: Option<&str>,
) -> std::result::Result<Propagation, String> {
    let privileged = container
        .security_context
        .as_ref()
        .and_then(|c| c.privileged)
        .unwrap_or(false);
    match value {
        None | Some("None") => Ok(Propagation::Private),
        Some("HostToContainer") => Ok(Propagation::HostToContainer),
        Some("Bidirectional") if privileged => Ok(Propagation::Bidirectional),
        Some("Bidirectional") => {
            Err("Bidirectional mount propagation is available only to privileged containers".into())
        }
        Some(other) => Err(format!("invalid mount propagation mode {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use k8s_openapi::api::core::v1::SecurityContext;

    use super::*;

    fn container(privileged: Option<bool>) -> PodContainer {
        PodContainer {
            name: "plugin".into(),
            security_context: Some(SecurityContext {
                privileged,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn mount_propagation_maps_to_the_runtime_s() {
        let plain = container(None);
        assert_eq!(propagation(&plain, None), Ok(Propagation::Private));
        assert_eq!(propagation(&plain, Some("None")), Ok(Propagation::Private));
        assert_eq!(
            propagation(&plain, Some("HostToContainer")),
            Ok(Propagation::HostToContainer)
        );
        assert_eq!(
            propagation(&container(Some(true)), Some("Bidirectional")),
            Ok(Propagation::Bidirectional)
        );
        assert!(
            propagation(&plain, Some("Sideways"))
                .unwrap_err()
                .contains("Sideways")
        );
    }

    #[test]
    fn bidirectional_needs_a_privileged_container() {
        for c in [
            container(None),
            container(Some(false)),
            PodContainer::default(),
        ] {
            assert_eq!(
                propagation(&c, Some("Bidirectional")),
                Err(
                    "Bidirectional mount propagation is available only to privileged containers"
                        .to_string()
                )
            );
        }
    }
}
