//! The controller every operator runs: its one ClusterCSIDriver (named after the driver)
//! and the children it installs, watched by the `managed-by` label so that a deleted or
//! edited child is put back at once; and the inputs every operator has ([`inputs`]).

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use kube::api::Api;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};

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

/// `controller` watching what every operator reads besides its ClusterCSIDriver, each change
/// a reconcile of the ClusterCSIDriver: the Secrets and ConfigMaps in `namespace` that are
/// its own (the `managed-by` label: its driver Secret, a rendered ConfigMap) or its inputs
/// (`credentials_secret`, `config_map`: the user's), and its StorageClasses.
pub fn inputs(
    controller: Controller<ClusterCSIDriver>,
    client: &Client,
    identity: &OperatorIdentity,
    namespace: &str,
    credentials_secret: String,
    config_map: String,
) -> Controller<ClusterCSIDriver> {
    let driver_name = identity.driver_name;
    let the_driver = move || ObjectRef::<ClusterCSIDriver>::new(driver_name);
    let identity = *identity;
    controller
        .watches(
            Api::<Secret>::namespaced(client.clone(), namespace),
            watcher::Config::default(),
            move |secret| {
                let ours = identity.is_managed(Some(secret.labels()));
                (ours || secret.name_any() == credentials_secret).then(the_driver)
            },
        )
        .watches(
            Api::<ConfigMap>::namespaced(client.clone(), namespace),
            watcher::Config::default(),
            move |map| {
                let ours = identity.is_managed(Some(map.labels()));
                (ours || map.name_any() == config_map).then(the_driver)
            },
        )
        .watches(
            Api::<StorageClass>::all(client.clone()),
            watcher::Config::default().labels(&identity.managed_by_selector()),
            move |_| Some(the_driver()),
        )
}
