//! The health of the driver's Deployment and DaemonSets ([`operator_kit::workloads`]), each
//! under its part's conditions: the NFS node plugin's DaemonSet under its own.

use kube::api::DynamicObject;
use operator_kit::workloads::report_health;

use super::Context;
use super::report::Report;
use crate::identity;

/// The conditions of the Deployment and DaemonSets among `objects`, from their status.
pub(super) async fn workload_health(ctx: &Context, objects: &[DynamicObject], report: &mut Report) {
    report_health(&ctx.client, &ctx.config.namespace, objects, part_of, report).await;
}

/// The part (condition prefix) a workload's health goes under.
fn part_of(kind: &str, name: &str) -> Option<&'static str> {
    match kind {
        "Deployment" => Some(identity::CONTROLLER_SERVICE),
        "DaemonSet" if name.contains("nfs") => Some(identity::NFS_NODE_SERVICE),
        "DaemonSet" => Some(identity::NODE_SERVICE),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use kube::ResourceExt;

    use super::*;
    use crate::assets;
    use crate::config::OperatorConfig;
    use crate::controller::manage::names_only_inputs;

    #[test]
    fn each_workload_reports_under_its_own_part() {
        let config = OperatorConfig::new("ns");
        let objects = assets::render(&names_only_inputs(&config)).unwrap();
        let mut parts: Vec<&str> = objects
            .iter()
            .filter_map(|o| part_of(&o.types.as_ref().unwrap().kind, &o.name_any()))
            .collect();
        parts.sort_unstable();
        assert_eq!(
            parts,
            [
                identity::CONTROLLER_SERVICE,
                identity::NODE_SERVICE,
                identity::NFS_NODE_SERVICE,
            ]
        );
    }
}
