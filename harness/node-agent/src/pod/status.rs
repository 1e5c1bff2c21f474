//! Pod status as kubelet computes it: phase from the container statuses, the Initialized,
//! ContainersReady and Ready conditions (PodScheduled is the scheduler's), addresses and
//! start time.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ContainerStatus, PodCondition, PodIP, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// `Pending`, `Running`, `Succeeded` or `Failed`, by kubelet's rules (`getPhase`).
pub fn phase(
    spec: &PodSpec,
    init: &[ContainerStatus],
    regular: &[ContainerStatus],
) -> &'static str {
    let policy = spec.restart_policy.as_deref().unwrap_or("Always");
    let last_terminated = |s: &ContainerStatus| {
        s.last_state
            .as_ref()
            .and_then(|l| l.terminated.as_ref())
            .map(|t| t.exit_code)
    };
    let mut pending_init = 0;
    let mut failed_init = 0;
    for container in spec.init_containers.iter().flatten() {
        let Some(status) = init.iter().find(|s| s.name == container.name) else {
            pending_init += 1;
            continue;
        };
        let state = status.state.clone().unwrap_or_default();
        if state.running.is_some() {
            pending_init += 1;
        } else if let Some(t) = &state.terminated {
            if t.exit_code != 0 {
                failed_init += 1;
            }
        } else if state.waiting.is_some() {
            match last_terminated(status) {
                Some(code) if code != 0 => failed_init += 1,
                Some(_) => {}
                None => pending_init += 1,
            }
        } else {
            pending_init += 1;
        }
    }
    let (mut unknown, mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0, 0);
    for container in &spec.containers {
        let Some(status) = regular.iter().find(|s| s.name == container.name) else {
            unknown += 1;
            continue;
        };
        let state = status.state.clone().unwrap_or_default();
        if state.running.is_some() {
            running += 1;
        } else if let Some(t) = &state.terminated {
            stopped += 1;
            if t.exit_code == 0 {
                succeeded += 1;
            }
        } else if state.waiting.is_some() {
            if last_terminated(status).is_some() {
                stopped += 1;
            } else {
                waiting += 1;
            }
        } else {
            unknown += 1;
        }
    }
    if failed_init > 0 && policy == "Never" {
        return "Failed";
    }
    if pending_init > 0 || waiting > 0 {
        return "Pending";
    }
    if running > 0 && unknown == 0 {
        return "Running";
    }
    if running == 0 && stopped > 0 && unknown == 0 {
        if policy == "Always" {
            return "Running";
        }
        if stopped == succeeded {
            return "Succeeded";
        }
        if policy == "Never" {
            return "Failed";
        }
        return "Running";
    }
    "Pending"
}

/// Remembers when each condition last changed, so heartbeats do not move transition times.
#[derive(Debug, Clone, Default)]
pub struct ConditionClock(BTreeMap<String, (String, Timestamp)>);

impl ConditionClock {
    /// Seeds the clock from conditions already posted (after an agent restart).
    pub fn from_conditions(conditions: &[PodCondition]) -> Self {
        ConditionClock(
            conditions
                .iter()
                .filter_map(|c| {
                    Some((
                        c.type_.clone(),
                        (c.status.clone(), c.last_transition_time.as_ref()?.0),
                    ))
                })
                .collect(),
        )
    }

    fn condition(
        &mut self,
        type_: &str,
        ok: bool,
        reason: Option<&str>,
        message: Option<String>,
    ) -> PodCondition {
        let status = if ok { "True" } else { "False" };
        let now = Timestamp::now();
        let entry = self
            .0
            .entry(type_.to_string())
            .or_insert_with(|| (status.to_string(), now));
        if entry.0 != status {
            *entry = (status.to_string(), now);
        }
        PodCondition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.map(Into::into),
            message,
            last_transition_time: Some(Time(entry.1)),
            last_probe_time: None,
            ..PodCondition::default()
        }
    }
}

/// Everything needed to build the pod's status.
pub struct StatusInput<'a> {
    /// The pod spec.
    pub spec: &'a PodSpec,
    /// Current conditions on the pod (for readiness gates).
    pub existing_conditions: &'a [PodCondition],
    /// Init container statuses, in spec order.
    pub init: Vec<ContainerStatus>,
    /// Regular container statuses, in spec order.
    pub regular: Vec<ContainerStatus>,
    /// The node's (and pod's) address.
    pub ip: String,
    /// When the agent first acknowledged the pod.
    pub start_time: Timestamp,
}

/// The pod's status, and its phase.
pub fn build(input: StatusInput<'_>, clock: &mut ConditionClock) -> PodStatus {
    let phase = phase(input.spec, &input.init, &input.regular);
    let terminal = phase == "Succeeded" || phase == "Failed";

    let incomplete_init: Vec<&str> = input
        .spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| {
            !input.init.iter().any(|s| {
                s.name == c.name
                    && s.state
                        .as_ref()
                        .and_then(|st| st.terminated.as_ref())
                        .is_some_and(|t| t.exit_code == 0)
            })
        })
        .map(|c| c.name.as_str())
        .collect();
    let initialized = incomplete_init.is_empty() || phase == "Succeeded";
    let unready: Vec<&str> = input
        .spec
        .containers
        .iter()
        .filter(|c| !input.regular.iter().any(|s| s.name == c.name && s.ready))
        .map(|c| c.name.as_str())
        .collect();
    let containers_ready = unready.is_empty() && !terminal;
    let (ready_reason, ready_message) = if terminal {
        (Some("PodCompleted"), None)
    } else if !unready.is_empty() {
        (
            Some("ContainersNotReady"),
            Some(format!(
                "containers with unready status: [{}]",
                unready.join(" ")
            )),
        )
    } else {
        (None, None)
    };
    let gates_unmet: Vec<&str> = input
        .spec
        .readiness_gates
        .iter()
        .flatten()
        .map(|g| g.condition_type.as_str())
        .filter(|t| {
            !input
                .existing_conditions
                .iter()
                .any(|c| c.type_ == *t && c.status == "True")
        })
        .collect();
    let conditions = vec![
        clock.condition(
            "Initialized",
            initialized,
            (!initialized).then_some("ContainersNotInitialized"),
            (!initialized).then(|| {
                format!(
                    "containers with incomplete status: [{}]",
                    incomplete_init.join(" ")
                )
            }),
        ),
        clock.condition(
            "ContainersReady",
            containers_ready,
            ready_reason,
            ready_message.clone(),
        ),
        if containers_ready && !gates_unmet.is_empty() {
            clock.condition(
                "Ready",
                false,
                Some("ReadinessGatesNotReady"),
                Some(format!(
                    "corresponding condition of pod readiness gate {:?} does not exist.",
                    gates_unmet[0]
                )),
            )
        } else {
            clock.condition("Ready", containers_ready, ready_reason, ready_message)
        },
    ];
    PodStatus {
        phase: Some(phase.into()),
        conditions: Some(conditions),
        host_ip: Some(input.ip.clone()),
        pod_ip: Some(input.ip.clone()),
        pod_ips: Some(vec![PodIP { ip: input.ip }]),
        start_time: Some(Time(input.start_time)),
        init_container_statuses: (!input.init.is_empty()).then_some(input.init),
        container_statuses: Some(input.regular),
        ..PodStatus::default()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use k8s_openapi::api::core::v1::{
        Container, ContainerState, ContainerStateRunning, ContainerStateTerminated,
        ContainerStateWaiting,
    };

    fn spec(policy: &str, names: &[&str]) -> PodSpec {
        PodSpec {
            restart_policy: Some(policy.into()),
            containers: names
                .iter()
                .map(|n| Container {
                    name: n.to_string(),
                    ..Container::default()
                })
                .collect(),
            ..PodSpec::default()
        }
    }

    fn running(name: &str) -> ContainerStatus {
        ContainerStatus {
            name: name.into(),
            state: Some(ContainerState {
                running: Some(ContainerStateRunning::default()),
                ..ContainerState::default()
            }),
            ..ContainerStatus::default()
        }
    }

    fn exited(name: &str, code: i32) -> ContainerStatus {
        ContainerStatus {
            name: name.into(),
            state: Some(ContainerState {
                terminated: Some(ContainerStateTerminated {
                    exit_code: code,
                    ..ContainerStateTerminated::default()
                }),
                ..ContainerState::default()
            }),
            ..ContainerStatus::default()
        }
    }

    fn backing_off(name: &str, code: i32) -> ContainerStatus {
        let mut s = exited(name, code);
        s.last_state = s.state.take();
        s.state = Some(ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some("CrashLoopBackOff".into()),
                message: None,
            }),
            ..ContainerState::default()
        });
        s
    }

    #[test]
    fn phases_follow_kubelet() {
        let never = spec("Never", &["a", "b"]);
        assert_eq!(phase(&never, &[], &[running("a")]), "Pending");
        assert_eq!(
            phase(&never, &[], &[running("a"), exited("b", 0)]),
            "Running"
        );
        assert_eq!(
            phase(&never, &[], &[exited("a", 0), exited("b", 0)]),
            "Succeeded"
        );
        assert_eq!(
            phase(&never, &[], &[exited("a", 0), exited("b", 1)]),
            "Failed"
        );
        let always = spec("Always", &["a"]);
        assert_eq!(phase(&always, &[], &[exited("a", 0)]), "Running");
        assert_eq!(phase(&always, &[], &[backing_off("a", 1)]), "Running");
        let on_failure = spec("OnFailure", &["a"]);
        assert_eq!(phase(&on_failure, &[], &[exited("a", 1)]), "Running");
        assert_eq!(phase(&on_failure, &[], &[exited("a", 0)]), "Succeeded");
    }

    #[test]
    fn failed_init_container_fails_a_never_pod() {
        let mut never = spec("Never", &["a"]);
        never.init_containers = Some(vec![Container {
            name: "init".into(),
            ..Container::default()
        }]);
        assert_eq!(phase(&never, &[exited("init", 2)], &[]), "Failed");
        assert_eq!(phase(&never, &[running("init")], &[]), "Pending");
    }
}
