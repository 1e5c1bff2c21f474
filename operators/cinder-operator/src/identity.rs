//! Who the Cinder operator is ([`IDENTITY`], for the library's generic parts), the names of
//! its conditions and its own metric.

use operator_kit::OperatorIdentity;
use operator_kit::metrics::{Gauge, Metrics};

/// The Cinder CSI driver operator, named as upstream's openstack-cinder-csi-driver-operator.
pub const IDENTITY: OperatorIdentity = OperatorIdentity {
    driver_name: "cinder.csi.openstack.org",
    operator_name: "openstack-cinder-csi-driver-operator",
    field_manager: "cinder-csi-driver-operator",
    managed_by: "cinder-csi-driver-operator",
    condition_prefix: "OpenStackCinder",
    metrics_prefix: "cinder_operator",
    display_name: "Cinder CSI driver",
    operand_name: "cinder-csi-driver",
};

/// The name of the one ClusterCSIDriver this operator manages (the driver's name).
pub const DRIVER_NAME: &str = IDENTITY.driver_name;

/// Prefix of the controller Deployment's conditions.
pub const CONTROLLER_SERVICE: &str = "OpenStackCinderDriverControllerServiceController";
/// Prefix of the node DaemonSet's conditions.
pub const NODE_SERVICE: &str = "OpenStackCinderDriverNodeServiceController";
/// Prefix of the StorageClass's conditions.
pub const STORAGE_CLASSES: &str = "OpenStackCinderStorageClassController";
/// Prefix of the static objects' (RBAC, CSIDriver, …, the prune) conditions.
pub const STATIC_RESOURCES: &str = "OpenStackCinderStaticResourcesController";
/// Prefix of the conditions about the installed version (a refused downgrade).
pub const OPERATOR_VERSION: &str = "OpenStackCinderOperatorVersionController";
/// Prefix of the configuration translation's conditions (Degraded `InvalidConfig`).
pub const CONFIG: &str = "OpenStackCinderConfigController";
/// Prefix of the cloud check's conditions (`CertificateProblem`, `CredentialsRejected`,
/// `InvalidCredentials`, `CloudError`).
pub const CLOUD: &str = "OpenStackCinderCloudController";
/// Prefix of the zone decision's conditions (reason `ZonesMatch`, `ZonesDiffer`,
/// `NoComputeZones`).
pub const TOPOLOGY: &str = "OpenStackCinderTopologyController";
/// Prefix of the conditions of managementState Removed: Degraded (`RemovalRefused`) while
/// PersistentVolumes of the driver exist.
pub const DRIVER_REMOVAL: &str = "OpenStackCinderDriverRemovalController";

/// `cinder_operator_topology_enabled`: 1 when the last zone decision turned topology on.
pub const TOPOLOGY_ENABLED: Gauge = Gauge {
    name: "topology_enabled",
    help: "1 when the last zone decision turned topology on (every compute zone is a volume zone), else 0.",
};

/// The operator's metrics: the library's counters and [`TOPOLOGY_ENABLED`].
pub fn metrics() -> Metrics {
    Metrics::new(&IDENTITY, &[TOPOLOGY_ENABLED])
}

#[cfg(test)]
mod tests {
    use operator_kit::identity::parts;

    use super::*;

    #[test]
    fn the_names_are_the_contracts() {
        assert_eq!(IDENTITY.driver_name, "cinder.csi.openstack.org");
        assert_eq!(
            IDENTITY.lease_name(),
            "openstack-cinder-csi-driver-operator-lock"
        );
        assert_eq!(
            IDENTITY.managed_by_selector(),
            "app.kubernetes.io/managed-by=cinder-csi-driver-operator"
        );
        for (name, part) in [
            (CONTROLLER_SERVICE, parts::CONTROLLER_SERVICE),
            (NODE_SERVICE, parts::NODE_SERVICE),
            (STORAGE_CLASSES, parts::STORAGE_CLASSES),
            (STATIC_RESOURCES, parts::STATIC_RESOURCES),
            (OPERATOR_VERSION, parts::OPERATOR_VERSION),
            (CONFIG, "ConfigController"),
            (CLOUD, "CloudController"),
            (TOPOLOGY, "TopologyController"),
            (DRIVER_REMOVAL, "DriverRemovalController"),
        ] {
            assert_eq!(name, IDENTITY.condition(part));
        }
    }

    #[test]
    fn the_metric_names_carry_the_cinder_prefix() {
        let metrics = metrics();
        metrics.reconcile();
        metrics.error();
        metrics.set(&TOPOLOGY_ENABLED, 1);
        let text = metrics.render();
        for line in [
            "cinder_operator_reconciles_total 1\n",
            "cinder_operator_reconcile_errors_total 1\n",
            "cinder_operator_object_changes_total 0\n",
            "cinder_operator_topology_enabled 1\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }
}
