//! The health of a driver's workloads from their status: a Deployment's and a DaemonSet's
//! Available and Progressing, as [`Health`] for the part's conditions; [`report_health`]
//! reads those an operator installed into its [`Report`].

use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use kube::api::{Api, DynamicObject};
use kube::{Client, ResourceExt};

use crate::apply::api_message;
use crate::report::Report;
use crate::status::Health;

/// How soon to look again while a rollout is in progress (watches usually come first).
pub const PROGRESS_POLL: Duration = Duration::from_secs(5);

/// Reads the Deployments and DaemonSets among `objects` (in `namespace`) and adds each one's
/// health to `report` under the part `part_of(kind, name)` names (a condition prefix; none:
/// not reported). A missing or unreadable one is Degraded, naming it; the Deployment's
/// ready replicas go into the report; a rollout in progress asks to look again after
/// [`PROGRESS_POLL`].
pub async fn report_health<E>(
    client: &Client,
    namespace: &str,
    objects: &[DynamicObject],
    part_of: impl Fn(&str, &str) -> Option<&'static str>,
    report: &mut Report<E>,
) where
    E: std::error::Error + 'static,
{
    for object in objects {
        let kind = object.types.as_ref().map(|t| t.kind.as_str()).unwrap_or("");
        let name = object.name_any();
        let Some(part) = part_of(kind, &name) else {
            continue;
        };
        let missing = |error: Option<kube::Error>| match error {
            None => Health::degraded("NotFound", format!("{kind} {namespace}/{name} is gone")),
            Some(error) => Health::degraded(
                "ReadFailed",
                format!("reading {kind} {namespace}/{name}: {}", api_message(&error)),
            ),
        };
        let health = match kind {
            "Deployment" => {
                let api = Api::<Deployment>::namespaced(client.clone(), namespace);
                match api.get_opt(&name).await {
                    Ok(Some(deployment)) => {
                        report.ready_replicas = Some(
                            deployment
                                .status
                                .as_ref()
                                .and_then(|s| s.ready_replicas)
                                .unwrap_or(0),
                        );
                        deployment_health(&deployment)
                    }
                    Ok(None) => missing(None),
                    Err(error) => missing(Some(error)),
                }
            }
            "DaemonSet" => {
                let api = Api::<DaemonSet>::namespaced(client.clone(), namespace);
                match api.get_opt(&name).await {
                    Ok(Some(daemon_set)) => daemon_set_health(&daemon_set),
                    Ok(None) => missing(None),
                    Err(error) => missing(Some(error)),
                }
            }
            _ => continue,
        };
        if health.progressing {
            report.requeue = Some(PROGRESS_POLL);
        }
        report.health(part, &health);
    }
}

/// Available when every replica is ready and up to date; progressing while a rollout runs.
pub fn deployment_health(deployment: &Deployment) -> Health {
    let name = deployment.name_any();
    let wanted = deployment
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1);
    let status = deployment.status.clone().unwrap_or_default();
    let observed =
        status.observed_generation.unwrap_or(0) >= deployment.metadata.generation.unwrap_or(0);
    let ready = status.ready_replicas.unwrap_or(0);
    let updated = status.updated_replicas.unwrap_or(0);
    let available = status.available_replicas.unwrap_or(0);
    let done = observed && updated >= wanted && ready >= wanted && available >= wanted;
    Health {
        available: available >= wanted.min(1),
        progressing: !done,
        degraded: None,
        reason: if done {
            "AsExpected".into()
        } else {
            "Deploying".into()
        },
        message: format!("Deployment {name}: {ready}/{wanted} ready, {updated} up to date"),
    }
}

/// Available when the pods run on every node they should; progressing while they roll out.
pub fn daemon_set_health(daemon_set: &DaemonSet) -> Health {
    let name = daemon_set.name_any();
    let status = daemon_set.status.clone().unwrap_or_default();
    let observed =
        status.observed_generation.unwrap_or(0) >= daemon_set.metadata.generation.unwrap_or(0);
    let desired = status.desired_number_scheduled;
    let available = status.number_available.unwrap_or(0);
    let updated = status.updated_number_scheduled.unwrap_or(0);
    let done = observed && available >= desired && updated >= desired;
    Health {
        available: available >= desired && (observed || available > 0),
        progressing: !done,
        degraded: None,
        reason: if done {
            "AsExpected".into()
        } else {
            "Deploying".into()
        },
        message: format!("DaemonSet {name}: {available}/{desired} available, {updated} up to date"),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use k8s_openapi::api::apps::v1::{DaemonSetStatus, DeploymentSpec, DeploymentStatus};

    #[test]
    fn a_deployment_is_available_with_one_ready_replica_and_done_when_all_are_updated() {
        let mut deployment = Deployment {
            spec: Some(DeploymentSpec {
                replicas: Some(1),
                ..Default::default()
            }),
            status: Some(DeploymentStatus {
                observed_generation: Some(2),
                ready_replicas: Some(1),
                updated_replicas: Some(1),
                available_replicas: Some(1),
                ..Default::default()
            }),
            ..Default::default()
        };
        deployment.metadata.generation = Some(2);
        let health = deployment_health(&deployment);
        assert!(health.available && !health.progressing, "{health:?}");

        deployment.metadata.generation = Some(3);
        let health = deployment_health(&deployment);
        assert!(health.available && health.progressing, "{health:?}");
    }

    #[test]
    fn a_daemon_set_rolling_out_is_progressing() {
        let mut daemon_set = DaemonSet {
            status: Some(DaemonSetStatus {
                observed_generation: Some(1),
                desired_number_scheduled: 2,
                number_available: Some(1),
                updated_number_scheduled: Some(2),
                ..Default::default()
            }),
            ..Default::default()
        };
        daemon_set.metadata.generation = Some(1);
        let health = daemon_set_health(&daemon_set);
        assert!(!health.available && health.progressing, "{health:?}");
        assert!(
            health.message.contains("1/2 available"),
            "{}",
            health.message
        );
    }
}
