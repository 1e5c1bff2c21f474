//! The steps and waits of the operator's safety tests (`e2e_operator_safety`, which includes
//! this file as its module `safety`): a refused
//! removal, the driver controller's leader, node taints.

use k8s_openapi::api::apps::v1::DaemonSet;
use kube::api::{Api, ListParams};
use kube_support::wait;

use crate::operator_steps::WAIT;

/// The condition of a refused managementState Removed.
pub const REMOVAL_DEGRADED: &str = "ManilaDriverRemovalControllerDegraded";

/// Waits until no DaemonSet is left in the driver's namespace.
pub async fn wait_no_daemon_sets(daemon_sets: &Api<DaemonSet>) {
    wait::wait_until("no driver DaemonSet", WAIT, || {
        let daemon_sets = daemon_sets.clone();
        async move {
            let left = daemon_sets
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?;
            if left.items.is_empty() {
                Ok(Some(()))
            } else {
                Err(format!("{} left", left.items.len()))
            }
        }
    })
    .await
    .unwrap();
}
