//! The controller every operator runs: its one ClusterCSIDriver (named after the driver)
//! and the children it installs, watched by the `managed-by` label so that a deleted or
//! edited child is put back at once. Each operator adds the watches of its own inputs.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::api::storage::v1::CSIDriver;
use kube::Client;
use kube::api::Api;
use kube::runtime::controller::Controller;
use kube::runtime::watcher;

use crate::api::ClusterCSIDriver;
use crate::identity::OperatorIdentity;

/// A controller of the ClusterCSIDriver `identity.driver_name`, owning (by `identity`'s
/// managed-by label) the driver's Deployments, DaemonSets, ServiceAccounts, Roles and
/// RoleBindings in `namespace`, and its ClusterRoles, ClusterRoleBindings and CSIDriver.
pub fn driver_controller(
    client: &Client,
    identity: &OperatorIdentity,
    namespace: &str,
) -> Controller<ClusterCSIDriver> {
    let managed = watcher::Config::default().labels(&identity.managed_by_selector());
    let name = format!("metadata.name={}", identity.driver_name);
    Controller::new(
        Api::<ClusterCSIDriver>::all(client.clone()),
        watcher::Config::default().fields(&name),
    )
    .owns(
        Api::<Deployment>::namespaced(client.clone(), namespace),
        managed.clone(),
    )
    .owns(
        Api::<DaemonSet>::namespaced(client.clone(), namespace),
        managed.clone(),
    )
    .owns(
        Api::<ServiceAccount>::namespaced(client.clone(), namespace),
        managed.clone(),
    )
    .owns(
        Api::<Role>::namespaced(client.clone(), namespace),
        managed.clone(),
    )
    .owns(
        Api::<RoleBinding>::namespaced(client.clone(), namespace),
        managed.clone(),
    )
    .owns(Api::<ClusterRole>::all(client.clone()), managed.clone())
    .owns(
        Api::<ClusterRoleBinding>::all(client.clone()),
        managed.clone(),
    )
    .owns(Api::<CSIDriver>::all(client.clone()), managed)
}
