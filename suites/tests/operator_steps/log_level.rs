//! `spec.logLevel` and `spec.operatorLogLevel` as the pods see them: every container of every
//! pod of the driver's Deployment and DaemonSets at the level (the sidecars' `--v`, the
//! drivers' `RUST_LOG`), the old pods replaced; the operator's own log switching level.

use std::time::Duration;

use anyhow::{Context as _, bail};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Container, Pod};
use kube::api::{Api, ListParams};
use kube_support::wait;
use suites::e2e::{ManilaCsiEnvironment, OPERATOR_MANAGED_SELECTOR};

use super::{metrics, set_spec};

/// How long the driver's pods may take to roll: two controller replicas one at a time, then
/// both node DaemonSets node by node.
const ROLLOUT: Duration = Duration::from_secs(180);

/// A `logLevel` and what it stands for in a container.
#[derive(Debug, Clone, Copy)]
pub struct Level {
    /// The API's name.
    pub name: &'static str,
    /// klog's `-v` (the sidecars' `--v`).
    pub verbosity: u8,
    /// The drivers' `RUST_LOG`.
    pub rust_log: &'static str,
}

/// `Normal`: `--v=2`, `RUST_LOG=info`.
pub const NORMAL: Level = Level {
    name: "Normal",
    verbosity: 2,
    rust_log: "info",
};
/// `Debug`: `--v=4`, `RUST_LOG=debug`.
pub const DEBUG: Level = Level {
    name: "Debug",
    verbosity: 4,
    rust_log: "debug",
};

/// Whether `container` runs at `level`: `--v=<n>` (or `-v=<n>`) among its args, or
/// `RUST_LOG` set to the level's filter.
fn runs_at(container: &Container, level: Level) -> bool {
    let (long, short) = (
        format!("--v={}", level.verbosity),
        format!("-v={}", level.verbosity),
    );
    let by_flag = container
        .args
        .iter()
        .flatten()
        .any(|a| *a == long || *a == short);
    let by_env = container
        .env
        .iter()
        .flatten()
        .any(|e| e.name == "RUST_LOG" && e.value.as_deref() == Some(level.rust_log));
    by_flag || by_env
}

/// One of the driver's workloads as it is now.
struct DriverWorkload {
    /// `Deployment/<name>` or `DaemonSet/<name>`.
    name: String,
    /// Its pod template's containers.
    template: Vec<Container>,
    /// Its rollout is complete: the spec observed, every pod updated and ready, no old one.
    rolled_out: String,
    /// How many pods it should have.
    desired: i32,
    /// Its pods.
    pods: Vec<Pod>,
}

/// The driver's Deployments and DaemonSets (those carrying the operator's label) and their
/// pods.
async fn driver_workloads(env: &ManilaCsiEnvironment) -> Result<Vec<DriverWorkload>, String> {
    let client = env.client();
    let namespace = env.namespace();
    let managed = ListParams::default().labels(OPERATOR_MANAGED_SELECTOR);
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let pods_of = |selector: Option<std::collections::BTreeMap<String, String>>| {
        let pods = pods.clone();
        async move {
            let selector = selector
                .unwrap_or_default()
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",");
            pods.list(&ListParams::default().labels(&selector))
                .await
                .map(|l| l.items)
                .map_err(|e| e.to_string())
        }
    };
    let mut found = Vec::new();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    for deployment in deployments
        .list(&managed)
        .await
        .map_err(|e| e.to_string())?
    {
        let spec = deployment.spec.clone().unwrap_or_default();
        let status = deployment.status.clone().unwrap_or_default();
        let desired = spec.replicas.unwrap_or(1);
        let observed = status.observed_generation >= deployment.metadata.generation;
        let counts = (
            status.replicas.unwrap_or(0),
            status.updated_replicas.unwrap_or(0),
            status.ready_replicas.unwrap_or(0),
        );
        found.push(DriverWorkload {
            name: format!(
                "Deployment/{}",
                deployment.metadata.name.unwrap_or_default()
            ),
            template: spec.template.spec.map(|s| s.containers).unwrap_or_default(),
            rolled_out: if observed && counts == (desired, desired, desired) {
                String::new()
            } else {
                format!(
                    "generation observed {observed}, (pods, updated, ready) {counts:?} of {desired}"
                )
            },
            desired,
            pods: pods_of(spec.selector.match_labels).await?,
        });
    }
    let daemon_sets: Api<DaemonSet> = Api::namespaced(client.clone(), namespace);
    for daemon_set in daemon_sets
        .list(&managed)
        .await
        .map_err(|e| e.to_string())?
    {
        let spec = daemon_set.spec.clone().unwrap_or_default();
        let status = daemon_set.status.clone().unwrap_or_default();
        let desired = status.desired_number_scheduled;
        let observed = status.observed_generation >= daemon_set.metadata.generation;
        let counts = (
            status.current_number_scheduled,
            status.updated_number_scheduled.unwrap_or(0),
            status.number_ready,
        );
        found.push(DriverWorkload {
            name: format!("DaemonSet/{}", daemon_set.metadata.name.unwrap_or_default()),
            template: spec.template.spec.map(|s| s.containers).unwrap_or_default(),
            rolled_out: if observed && desired > 0 && counts == (desired, desired, desired) {
                String::new()
            } else {
                format!(
                    "generation observed {observed}, (pods, updated, ready) {counts:?} of {desired}"
                )
            },
            desired,
            pods: pods_of(spec.selector.match_labels).await?,
        });
    }
    Ok(found)
}

/// The driver's pods' uids; fails unless there are three workloads (the controller
/// Deployment, both node DaemonSets), every container of theirs is at `level` and none at
/// `other` (so that a later change to `other` is seen).
async fn pods_at(
    env: &ManilaCsiEnvironment,
    level: Level,
    other: Level,
) -> anyhow::Result<Vec<String>> {
    let workloads = driver_workloads(env)
        .await
        .map_err(anyhow::Error::msg)
        .context("listing the driver's workloads")?;
    if workloads.len() != 3 {
        let names: Vec<&str> = workloads.iter().map(|w| w.name.as_str()).collect();
        bail!("expected the controller Deployment and two node DaemonSets, found {names:?}");
    }
    let mut uids = Vec::new();
    for workload in &workloads {
        for pod in &workload.pods {
            let name = pod.metadata.name.clone().unwrap_or_default();
            for container in pod.spec.iter().flat_map(|s| &s.containers) {
                if !runs_at(container, level) || runs_at(container, other) {
                    bail!(
                        "{} pod {name} container {} does not run at {} alone: args {:?}, env {:?}",
                        workload.name,
                        container.name,
                        level.name,
                        container.args,
                        container.env
                    );
                }
            }
            uids.push(pod.metadata.uid.clone().unwrap_or_default());
        }
    }
    Ok(uids)
}

/// Sets `spec.logLevel` from `from` to `to` and waits until every container of the driver's
/// pod templates and of their running pods is at `to`, each workload rolled out and none of
/// the pods of before left. Returns how many containers of how many pods run at `to`.
pub async fn change_driver_log_level(
    env: &ManilaCsiEnvironment,
    from: Level,
    to: Level,
) -> anyhow::Result<(usize, usize)> {
    let before = pods_at(env, from, to).await?;
    set_spec(env, serde_json::json!({ "logLevel": to.name })).await;
    let before = &before;
    let counted = wait::wait_until(
        format!(
            "every container of the driver's pods at logLevel {}",
            to.name
        ),
        ROLLOUT,
        || async move {
            let workloads = driver_workloads(env).await?;
            let mut problems = Vec::new();
            let (mut pods, mut containers) = (0, 0);
            for workload in &workloads {
                if !workload.rolled_out.is_empty() {
                    problems.push(format!("{}: {}", workload.name, workload.rolled_out));
                }
                if let Some(c) = workload.template.iter().find(|c| !runs_at(c, to)) {
                    problems.push(format!("{} template: {} not at it", workload.name, c.name));
                }
                if workload.pods.len() != workload.desired as usize {
                    problems.push(format!(
                        "{}: {} pods of {}",
                        workload.name,
                        workload.pods.len(),
                        workload.desired
                    ));
                }
                for pod in &workload.pods {
                    let name = pod.metadata.name.clone().unwrap_or_default();
                    if before.contains(&pod.metadata.uid.clone().unwrap_or_default()) {
                        problems.push(format!("{}: pod {name} not replaced", workload.name));
                    }
                    for container in pod.spec.iter().flat_map(|s| &s.containers) {
                        containers += 1;
                        if !runs_at(container, to) {
                            problems.push(format!("pod {name}: {} not at it", container.name));
                        }
                    }
                    pods += 1;
                }
            }
            if problems.is_empty() {
                Ok(Some((containers, pods)))
            } else {
                Err(problems.join("; "))
            }
        },
    )
    .await?;
    Ok(counted)
}

/// Sets `spec.operatorLogLevel` to `Debug` and waits until the acting operator replica says
/// so and then logs at debug level (it logged nothing at debug level before).
pub async fn change_operator_log_level_to_debug(env: &ManilaCsiEnvironment) -> anyhow::Result<()> {
    let pod = metrics::leader_pod(env).await?;
    let read_log = || {
        let pod = pod.clone();
        async move {
            env.cluster()
                .logs(env.namespace(), &pod, "operator", false)
                .await
                .map_err(|e| format!("reading the log of operator pod {pod}: {e}"))
        }
    };
    let before = read_log().await.map_err(anyhow::Error::msg)?;
    if let Some(line) = before.lines().find(|l| l.contains(" DEBUG ")) {
        bail!("operator pod {pod} logs at debug level already: {line}");
    }
    set_spec(env, serde_json::json!({ "operatorLogLevel": DEBUG.name })).await;
    let read_log = &read_log;
    wait::wait_until(
        format!("operator pod {pod} to log at debug level"),
        super::WAIT,
        || async move {
            let log = read_log().await?;
            let Some((_, after)) = log.split_once("operator log level changed level=Debug") else {
                return Err("no 'operator log level changed level=Debug' line yet".into());
            };
            if after.lines().any(|l| l.contains(" DEBUG ")) {
                Ok(Some(()))
            } else {
                Err("the level changed, no debug line yet".into())
            }
        },
    )
    .await?;
    Ok(())
}
