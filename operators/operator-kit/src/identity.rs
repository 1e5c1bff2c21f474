//! Who an operator is: the one value that makes the library's generic parts (apply, prune,
//! conditions, the ClusterOperator, metrics, events, leader election) one operator's.
//!
//! Everything here is fixed when the operator is built (a `const`); what an admin sets at run
//! time (the namespace, images, intervals) is each operator's configuration instead, and is
//! passed to the functions that need it.

use std::collections::BTreeMap;

use crate::api::MANAGED_BY_LABEL;

/// The names that tell one operator's objects, conditions, metrics and Events from
/// another's. Two operators of this library differ in every field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OperatorIdentity {
    /// The CSI driver's name: the ClusterCSIDriver's and the CSIDriver's name, the
    /// StorageClasses' provisioner (`manila.csi.openstack.org`).
    pub driver_name: &'static str,
    /// The ClusterOperator it reports on, and the name of the operator's own objects
    /// (`manila-csi-driver-operator`).
    pub operator_name: &'static str,
    /// The field manager of everything it applies and the Events' source component.
    pub field_manager: &'static str,
    /// The value of the [`MANAGED_BY_LABEL`] on every object it creates.
    pub managed_by: &'static str,
    /// The first word of its condition types (`Manila` → `ManilaStaticResourcesController…`).
    pub condition_prefix: &'static str,
    /// The first word of its Prometheus metric names (`manila_operator` →
    /// `manila_operator_reconciles_total`).
    pub metrics_prefix: &'static str,
    /// The driver in words, for messages (`Manila CSI driver`).
    pub display_name: &'static str,
    /// The operand's name among the ClusterOperator's versions (`manila-csi-driver`).
    pub operand_name: &'static str,
}

impl OperatorIdentity {
    /// The label selector of the objects it created: `managed-by=<managed_by>`.
    pub fn managed_by_selector(&self) -> String {
        format!("{MANAGED_BY_LABEL}={}", self.managed_by)
    }

    /// The labels it puts on every object it creates.
    pub fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([(MANAGED_BY_LABEL.to_string(), self.managed_by.to_string())])
    }

    /// Whether `labels` carry its `managed-by` label.
    pub fn is_managed(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        labels
            .and_then(|l| l.get(MANAGED_BY_LABEL))
            .is_some_and(|v| v == self.managed_by)
    }

    /// A condition type of one of its parts: `<condition_prefix><part>`
    /// (`StaticResourcesController` → `ManilaStaticResourcesController`).
    pub fn condition(&self, part: &str) -> String {
        format!("{}{part}", self.condition_prefix)
    }

    /// The condition saying the driver cannot be used on this cloud (not Degraded):
    /// `<condition_prefix>ControllerDisabled`.
    pub fn disabled_condition(&self) -> String {
        self.condition("ControllerDisabled")
    }

    /// A metric name: `<metrics_prefix>_<name>`.
    pub fn metric(&self, name: &str) -> String {
        format!("{}_{name}", self.metrics_prefix)
    }

    /// The name of its leader-election Lease: `<operator_name>-lock`.
    pub fn lease_name(&self) -> String {
        format!("{}-lock", self.operator_name)
    }
}

/// The parts every operator of this library reports conditions for; a condition type is
/// [`OperatorIdentity::condition`] of one of these plus `Available`/`Progressing`/`Degraded`.
pub mod parts {
    /// The driver controller's Deployment.
    pub const CONTROLLER_SERVICE: &str = "DriverControllerServiceController";
    /// The driver node plugin's DaemonSet.
    pub const NODE_SERVICE: &str = "DriverNodeServiceController";
    /// The credentials (the driver's Secret or configuration).
    pub const CREDENTIALS: &str = "CredentialsController";
    /// The StorageClasses.
    pub const STORAGE_CLASSES: &str = "StorageClassController";
    /// The static objects (RBAC, CSIDriver, …) and the prune.
    pub const STATIC_RESOURCES: &str = "StaticResourcesController";
    /// The installed version (a refused downgrade).
    pub const OPERATOR_VERSION: &str = "OperatorVersionController";
}

/// A made-up second operator, for the library's tests: every name differs from Manila's.
#[cfg(test)]
pub(crate) const TEST_IDENTITY: OperatorIdentity = OperatorIdentity {
    driver_name: "example.csi.test",
    operator_name: "example-csi-driver-operator",
    field_manager: "example-field-manager",
    managed_by: "example-operator",
    condition_prefix: "Example",
    metrics_prefix: "example_operator",
    display_name: "Example CSI driver",
    operand_name: "example-csi-driver",
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_derive_from_the_identity() {
        let id = TEST_IDENTITY;
        assert_eq!(
            id.managed_by_selector(),
            "app.kubernetes.io/managed-by=example-operator"
        );
        assert_eq!(
            id.condition(parts::STATIC_RESOURCES),
            "ExampleStaticResourcesController"
        );
        assert_eq!(id.disabled_condition(), "ExampleControllerDisabled");
        assert_eq!(
            id.metric("reconciles_total"),
            "example_operator_reconciles_total"
        );
        assert_eq!(id.lease_name(), "example-csi-driver-operator-lock");
        assert!(id.is_managed(Some(&id.labels())));
        let other = BTreeMap::from([(MANAGED_BY_LABEL.to_string(), "someone".to_string())]);
        assert!(!id.is_managed(Some(&other)));
        assert!(!id.is_managed(None));
    }
}
