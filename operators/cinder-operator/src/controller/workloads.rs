//! The health of the driver's Deployment and DaemonSet, from their status
//! ([`operator_kit::workloads`]), each under its part's conditions.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use kube::ResourceExt;
use kube::api::{Api, DynamicObject};
use operator_kit::apply::api_message;
use operator_kit::status::Health;
use operator_kit::workloads::{daemon_set_health, deployment_health};

use super::Context;
use super::report::Report;
use crate::identity;

/// How soon to look again while a rollout is in progress (watches usually come first).
const PROGRESS_POLL: Duration = Duration::from_secs(5);

/// The conditions of the Deployment and the DaemonSet among `objects`, from their status.
pub(super) async fn workload_health(ctx: &Context, objects: &[DynamicObject], report: &mut Report) {
    let namespace = ctx.config.namespace.as_str();
    for object in objects {
        let kind = object.types.as_ref().map(|t| t.kind.as_str()).unwrap_or("");
        let name = object.name_any();
        let missing = |error: Option<kube::Error>| match error {
            None => Health::degraded("NotFound", format!("{kind} {namespace}/{name} is gone")),
            Some(error) => Health::degraded(
                "ReadFailed",
                format!("reading {kind} {namespace}/{name}: {}", api_message(&error)),
            ),
        };
        let (prefix, health) = match kind {
            "Deployment" => {
                let api = Api::<Deployment>::namespaced(ctx.client.clone(), namespace);
                let health = match api.get_opt(&name).await {
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
                };
                (identity::CONTROLLER_SERVICE, health)
            }
            "DaemonSet" => {
                let api = Api::<DaemonSet>::namespaced(ctx.client.clone(), namespace);
                let health = match api.get_opt(&name).await {
                    Ok(Some(daemon_set)) => daemon_set_health(&daemon_set),
                    Ok(None) => missing(None),
                    Err(error) => missing(Some(error)),
                };
                (identity::NODE_SERVICE, health)
            }
            _ => continue,
        };
        if health.progressing {
            report.requeue = Some(PROGRESS_POLL);
        }
        report.health(prefix, &health);
    }
}
