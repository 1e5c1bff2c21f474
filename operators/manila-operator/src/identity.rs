//! Who the Manila operator is ([`IDENTITY`], for the library's generic parts), and the names
//! of its conditions and its own metric.

use operator_kit::OperatorIdentity;
use operator_kit::metrics::{Gauge, Metrics};

/// The Manila CSI driver operator.
pub const IDENTITY: OperatorIdentity = OperatorIdentity {
    driver_name: "manila.csi.openstack.org",
    operator_name: "manila-csi-driver-operator",
    field_manager: "manila-csi-driver-operator",
    managed_by: "manila-csi-driver-operator",
    condition_prefix: "Manila",
    metrics_prefix: "manila_operator",
    display_name: "Manila CSI driver",
    operand_name: "manila-csi-driver",
};

/// The name of the one ClusterCSIDriver this operator manages (the driver's name).
pub const DRIVER_NAME: &str = IDENTITY.driver_name;

/// `ManilaControllerDisabled`: Manila cannot be used (missing, unreachable, 403, no types).
pub const MANILA_DISABLED: &str = "ManilaControllerDisabled";
/// Prefix of the controller Deployment's conditions.
pub const CONTROLLER_SERVICE: &str = "ManilaDriverControllerServiceController";
/// Prefix of the Manila node DaemonSet's conditions.
pub const NODE_SERVICE: &str = "ManilaDriverNodeServiceController";
/// Prefix of the NFS node plugin DaemonSet's conditions (Manila's own part).
pub const NFS_NODE_SERVICE: &str = "NFSDriverNodeServiceController";
/// Prefix of the credentials (secret sync) conditions.
pub const CREDENTIALS: &str = "ManilaCredentialsController";
/// Prefix of the share-type StorageClass conditions.
pub const STORAGE_CLASSES: &str = "ManilaStorageClassController";
/// Prefix of the static objects' (RBAC, CSIDriver, …) conditions.
pub const STATIC_RESOURCES: &str = "ManilaStaticResourcesController";
/// Prefix of the conditions about the installed version (a refused downgrade).
pub const OPERATOR_VERSION: &str = "ManilaOperatorVersionController";
/// Prefix of the conditions of managementState Removed: Degraded (`RemovalRefused`) while
/// PersistentVolumes of the driver exist, so the driver is not removed.
pub const DRIVER_REMOVAL: &str = "ManilaDriverRemovalController";

/// `manila_operator_share_types`: the share types Manila listed at the last sync.
pub const SHARE_TYPES: Gauge = Gauge {
    name: "share_types",
    help: "Share types Manila listed at the last sync.",
};

/// The operator's metrics: the library's counters and [`SHARE_TYPES`].
pub fn metrics() -> Metrics {
    Metrics::new(&IDENTITY, &[SHARE_TYPES])
}

#[cfg(test)]
mod tests {
    use operator_kit::identity::parts;

    use super::*;

    #[test]
    fn the_condition_names_are_the_identitys() {
        assert_eq!(MANILA_DISABLED, IDENTITY.disabled_condition());
        for (name, part) in [
            (CONTROLLER_SERVICE, parts::CONTROLLER_SERVICE),
            (NODE_SERVICE, parts::NODE_SERVICE),
            (CREDENTIALS, parts::CREDENTIALS),
            (STORAGE_CLASSES, parts::STORAGE_CLASSES),
            (STATIC_RESOURCES, parts::STATIC_RESOURCES),
            (OPERATOR_VERSION, parts::OPERATOR_VERSION),
        ] {
            assert_eq!(name, IDENTITY.condition(part));
        }
        assert_eq!(IDENTITY.lease_name(), "manila-csi-driver-operator-lock");
    }

    #[test]
    fn the_metric_names_stay_as_they_were() {
        let metrics = metrics();
        metrics.reconcile();
        metrics.reconcile();
        metrics.error();
        metrics.set(&SHARE_TYPES, 3);
        let text = metrics.render();
        for line in [
            "manila_operator_reconciles_total 2\n",
            "manila_operator_reconcile_errors_total 1\n",
            "manila_operator_share_types 3\n",
            "manila_operator_object_changes_total 0\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }
}
