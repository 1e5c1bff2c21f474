//! The health of the driver's Deployment and DaemonSet ([`operator_kit::workloads`]), each
//! under its part's conditions.

use kube::api::DynamicObject;
use operator_kit::workloads::report_health;

use super::Context;
use super::report::Report;
use crate::identity;

/// The conditions of the Deployment and the DaemonSet among `objects`, from their status.
pub(super) async fn workload_health(ctx: &Context, objects: &[DynamicObject], report: &mut Report) {
    report_health(&ctx.client, &ctx.config.namespace, objects, part_of, report).await;
}

/// The part (condition prefix) a workload's health goes under.
fn part_of(kind: &str, _name: &str) -> Option<&'static str> {
    match kind {
        "Deployment" => Some(identity::CONTROLLER_SERVICE),
        "DaemonSet" => Some(identity::NODE_SERVICE),
        _ => None,
    }
}
