//! The controller every operator runs: its one ClusterCSIDriver (named after the driver)
//! and the children it installs, watched by the `managed-by` label so that a deleted or
//! edited child is put back at once; and the inputs every operator has ([`inputs`]).
//!
//! The ClusterCSIDriver triggers a reconcile only when its generation changes (a spec edit,
//! its creation), not for a status write: each reconcile writes the status, and a reconcile
//! triggered by its own write would run the whole reconcile once more for nothing. Worse, a
//! spec edit arriving meanwhile waited for that second run: setting `managementState` back
//! to `Managed` from a refused `Removed` cleared `RemovalRefused` only after it. The store
//! still sees every change, so a reconcile always reads the latest status.

use futures::Stream;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use kube::api::Api;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, predicates, watcher};
use kube::{Client, ResourceExt};

use crate::api::ClusterCSIDriver;
use crate::identity::OperatorIdentity;

/// A controller of the ClusterCSIDriver `identity.driver_name` (triggered by a change of its
/// generation), owning (by `identity`'s managed-by label) the driver's Deployments,
/// DaemonSets, ServiceAccounts, Roles and RoleBindings in `namespace`, and its ClusterRoles,
/// ClusterRoleBindings and CSIDriver.
pub fn driver_controller(
    client: &Client,
    identity: &OperatorIdentity,
    namespace: &str,
) -> Controller<ClusterCSIDriver> {
    let managed = watcher::Config::default().labels(&identity.managed_by_selector());
    let name = format!("metadata.name={}", identity.driver_name);
    let (reader, writer) = reflector::store();
    let drivers = reflector::reflector(
        writer,
        watcher(
            Api::<ClusterCSIDriver>::all(client.clone()),
            watcher::Config::default().fields(&name),
        ),
    )
    .applied_objects();
    Controller::for_stream(generation_changes(drivers), reader)
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

/// The ClusterCSIDrivers of `applied` whose generation changed (or that are new): a status
/// write does not trigger a reconcile.
fn generation_changes(
    applied: impl Stream<Item = Result<ClusterCSIDriver, watcher::Error>> + Send,
) -> impl Stream<Item = Result<ClusterCSIDriver, watcher::Error>> + Send {
    applied.predicate_filter(predicates::generation, Default::default())
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use futures::{StreamExt, stream};

    use super::*;
    use crate::api::{ClusterCSIDriverStatus, ManagementState};

    fn driver(generation: i64, state: ManagementState, status: Option<&str>) -> ClusterCSIDriver {
        let mut driver = ClusterCSIDriver::new("example.csi.test", Default::default());
        driver.metadata.uid = Some("uid-1".into());
        driver.metadata.generation = Some(generation);
        driver.spec.management_state = state;
        driver.status = status.map(|version| ClusterCSIDriverStatus {
            version: Some(version.into()),
            ..Default::default()
        });
        driver
    }

    /// The operator's own status writes do not trigger; a spec edit right after one does.
    #[tokio::test]
    async fn only_a_new_generation_of_the_driver_triggers_a_reconcile() {
        let seen = [
            driver(1, ManagementState::Managed, None),
            driver(1, ManagementState::Managed, Some("1.0.0")),
            driver(2, ManagementState::Removed, Some("1.0.0")),
            driver(2, ManagementState::Removed, Some("refused")),
            driver(3, ManagementState::Managed, Some("refused")),
        ];
        let triggered: Vec<(i64, ManagementState)> = generation_changes(stream::iter(seen.map(Ok)))
            .map(|d| {
                let d = d.unwrap();
                (d.metadata.generation.unwrap(), d.spec.management_state)
            })
            .collect()
            .await;
        assert_eq!(
            triggered,
            [
                (1, ManagementState::Managed),
                (2, ManagementState::Removed),
                (3, ManagementState::Managed),
            ]
        );
    }
}
