//! The operators' API: the cluster-scoped `ClusterCSIDriver` (operator.openshift.io/v1) each
//! manages (one per driver, named after it), and the `ClusterOperator` (config.openshift.io/v1)
//! each reports on.
//!
//! The schema the apiserver enforces is the CRD YAML in `fixtures/crds/` (see [`crate::crds`]);
//! these types mirror the fields the operator reads and writes. Optional fields are `Option`
//! and omitted when unset, so a status patch never clears what it does not mention.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// The label on every object an operator creates; its value is the operator's
/// ([`crate::OperatorIdentity::managed_by`]).
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";

/// How the operator treats what it manages.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ManagementState {
    /// Install and keep the driver as desired.
    #[default]
    Managed,
    /// Hands off: nothing is created, changed or deleted.
    Unmanaged,
    /// The driver's objects are removed; StorageClasses and volumes are left alone.
    Removed,
    /// As Managed (upstream uses it to bypass upgrade checks).
    Force,
}

/// Verbosity, as OpenShift's operator API spells it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogLevel {
    /// klog `-v=2`.
    #[default]
    Normal,
    /// klog `-v=4`.
    Debug,
    /// klog `-v=6`.
    Trace,
    /// klog `-v=8`.
    TraceAll,
}

impl LogLevel {
    /// The klog `-v` value this level stands for.
    pub fn verbosity(self) -> u8 {
        match self {
            LogLevel::Normal => 2,
            LogLevel::Debug => 4,
            LogLevel::Trace => 6,
            LogLevel::TraceAll => 8,
        }
    }
}

/// Whether the operator manages its StorageClasses (as openshift/api defines it).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StorageClassState {
    /// Created, and re-created when their immutable parameters change.
    #[default]
    Managed,
    /// Neither created nor updated: the classes are the admin's.
    Unmanaged,
    /// The classes the operator made are deleted (never anyone else's).
    Removed,
}

/// The desired state of the driver installation.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "operator.openshift.io",
    version = "v1",
    kind = "ClusterCSIDriver",
    status = "ClusterCSIDriverStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterCSIDriverSpec {
    /// Managed (default), Unmanaged, Removed or Force.
    #[serde(default)]
    pub management_state: ManagementState,
    /// The driver's and sidecars' verbosity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_level: Option<LogLevel>,
    /// The operator's own verbosity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_log_level: Option<LogLevel>,
    /// Whether the operator's StorageClasses are managed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_state: Option<StorageClassState>,
    /// Driver-specific configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_config: Option<DriverConfig>,
}

/// `spec.driverConfig`: per-driver settings, one member per driver.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DriverConfig {
    /// `Manila` or `Cinder`: which member applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_type: Option<String>,
    /// Manila settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manila: Option<ManilaDriverConfig>,
    /// Cinder settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cinder: Option<CinderDriverConfig>,
}

/// `spec.driverConfig.manila`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ManilaDriverConfig {
    /// Share network ID per share type name, for types that create share servers
    /// (`driver_handles_share_servers=True`): it becomes the class's `shareNetworkID`.
    #[serde(
        default,
        rename = "shareNetworkIDs",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub share_network_ids: BTreeMap<String, String>,
    /// Topology-aware provisioning: the driver's `--with-topology` and the classes'
    /// `autoTopology`. Unset is [`TopologyState::Disabled`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<TopologyState>,
    /// The addresses or CIDRs (a comma list) every share of the operator's classes is
    /// exported to: the classes' `nfs-shareClient`. Unset: the driver's default, `0.0.0.0/0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nfs_share_client: Option<String>,
    /// An IP address or CIDR: nodes mount only export locations at an address inside it
    /// (the driver's runtime configuration `nfs.matchExportLocationAddress`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_export_location_address: Option<String>,
    /// The share protocol the driver serves: its `--share-protocol-selector`. Unset is
    /// [`ShareProtocol::Nfs`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<ShareProtocol>,
}

/// Whether a driver runs topology-aware.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TopologyState {
    /// Volumes are created in the zone of the node that first uses them.
    Enabled,
    /// No topology: volumes are reachable from every node.
    #[default]
    Disabled,
}

/// The share protocol of the Manila driver, as Manila spells it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ShareProtocol {
    /// NFS shares, mounted by the NFS node plugin.
    #[default]
    #[serde(rename = "NFS")]
    Nfs,
    /// CephFS shares, mounted by a CephFS node plugin.
    #[serde(rename = "CEPHFS")]
    Cephfs,
}

impl ShareProtocol {
    /// The value of the driver's `--share-protocol-selector`.
    pub fn as_str(self) -> &'static str {
        match self {
            ShareProtocol::Nfs => "NFS",
            ShareProtocol::Cephfs => "CEPHFS",
        }
    }
}

/// `spec.driverConfig.cinder`: no settings yet (the Cinder operator adds them, each in the
/// CRD of `fixtures/crds/` too: the CRD-schema check fails until both have it).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CinderDriverConfig {}

/// What the operator last observed and did.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterCSIDriverStatus {
    /// The spec generation the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `<Part>Available/Progressing/Degraded` and `<Prefix>ControllerDisabled`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<OperatorCondition>,
    /// The operator's release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Ready replicas of the controller Deployment.
    #[serde(default)]
    pub ready_replicas: i32,
    /// Generations of the workloads the operator last applied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub generations: Vec<GenerationStatus>,
}

/// One condition of the operator's status (operator.openshift.io's OperatorCondition).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct OperatorCondition {
    /// e.g. `ManilaControllerDisabled`, `ManilaDriverControllerServiceControllerAvailable`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// A CamelCase reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The generation of one workload the operator applied.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct GenerationStatus {
    /// API group (`apps`).
    pub group: String,
    /// Resource (`deployments`, `daemonsets`).
    pub resource: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `metadata.generation` after the last apply.
    pub last_generation: i64,
}

/// config.openshift.io/v1 ClusterOperator: where an operator reports its health.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "config.openshift.io",
    version = "v1",
    kind = "ClusterOperator",
    status = "ClusterOperatorStatus",
    schema = "disabled"
)]
pub struct ClusterOperatorSpec {}

/// The reported health of an operator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterOperatorStatus {
    /// `Available`, `Progressing`, `Degraded`, `Upgradeable`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<OperatorCondition>,
    /// Versions of the operator and its operand.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub versions: Vec<OperandVersion>,
    /// Objects worth looking at when debugging this operator.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related_objects: Vec<ObjectReference>,
}

/// A named version (`operator`, and the operand's, e.g. `manila-csi-driver`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct OperandVersion {
    /// What the version is of.
    pub name: String,
    /// The version.
    pub version: String,
}

/// A reference to a related object (config.openshift.io's ObjectReference).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    /// API group (empty for core).
    pub group: String,
    /// Resource (plural).
    pub resource: String,
    /// Namespace, for namespaced objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_spec_reads_the_fields_as_the_crd_spells_them() {
        let spec: ClusterCSIDriverSpec = serde_json::from_value(serde_json::json!({
            "managementState": "Removed",
            "logLevel": "TraceAll",
            "storageClassState": "Unmanaged",
            "driverConfig": {"driverType": "Manila",
                "manila": {"shareNetworkIDs": {"tenant": "net-1"}, "topology": "Enabled",
                    "nfsShareClient": "10.0.0.0/8", "matchExportLocationAddress": "10.0.0.5",
                    "protocol": "CEPHFS"}},
        }))
        .unwrap();
        assert_eq!(spec.management_state, ManagementState::Removed);
        assert_eq!(spec.log_level, Some(LogLevel::TraceAll));
        assert_eq!(spec.storage_class_state, Some(StorageClassState::Unmanaged));
        let manila = spec.driver_config.unwrap().manila.unwrap();
        assert_eq!(
            manila.share_network_ids.get("tenant").map(String::as_str),
            Some("net-1")
        );
        assert_eq!(manila.topology, Some(TopologyState::Enabled));
        assert_eq!(manila.nfs_share_client.as_deref(), Some("10.0.0.0/8"));
        assert_eq!(
            manila.match_export_location_address.as_deref(),
            Some("10.0.0.5")
        );
        assert_eq!(manila.protocol, Some(ShareProtocol::Cephfs));
        assert_eq!(ShareProtocol::Cephfs.as_str(), "CEPHFS");
        assert_eq!(
            serde_json::to_value(ShareProtocol::Nfs).unwrap(),
            serde_json::json!(ShareProtocol::Nfs.as_str())
        );
        let unset: ManilaDriverConfig = serde_json::from_value(serde_json::json!({})).unwrap();
        assert_eq!(unset, ManilaDriverConfig::default());
        assert_eq!(unset.topology.unwrap_or_default(), TopologyState::Disabled);
        assert_eq!(unset.protocol.unwrap_or_default(), ShareProtocol::Nfs);
        let cinder: ClusterCSIDriverSpec = serde_json::from_value(serde_json::json!({
            "driverConfig": {"driverType": "Cinder", "cinder": {}},
        }))
        .unwrap();
        let config = cinder.driver_config.unwrap();
        assert_eq!(config.cinder, Some(CinderDriverConfig {}));
        assert_eq!(config.manila, None);
        assert_eq!(cinder.management_state, ManagementState::Managed);
    }
}
