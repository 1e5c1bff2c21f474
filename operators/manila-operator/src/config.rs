//! The operator's own configuration: where it installs the driver, which images it runs, how
//! often it syncs. Set by flags/environment of the operator's Deployment (see `main.rs`);
//! everything a cluster admin changes at run time is in the ClusterCSIDriver instead.

use std::path::PathBuf;
use std::time::Duration;

use crate::release::{Release, VERSIONS};

/// The images of the driver's containers. Defaults are upstream's image names; the embedded
/// cluster maps them to this workspace's binaries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Images {
    /// `manila-csi-plugin` (controller and node).
    pub driver: String,
    /// The NFS node plugin the Manila node plugin forwards to.
    pub nfs_driver: String,
    /// `csi-provisioner`.
    pub provisioner: String,
    /// `csi-attacher`.
    pub attacher: String,
    /// `csi-resizer`.
    pub resizer: String,
    /// `csi-snapshotter`.
    pub snapshotter: String,
    /// `csi-node-driver-registrar`.
    pub node_driver_registrar: String,
    /// `livenessprobe`.
    pub liveness_probe: String,
}

impl Default for Images {
    fn default() -> Self {
        Images {
            driver: "registry.k8s.io/provider-os/manila-csi-plugin:v1.31.0".into(),
            nfs_driver: "registry.k8s.io/sig-storage/nfsplugin:v4.5.0".into(),
            provisioner: "registry.k8s.io/sig-storage/csi-provisioner:v3.6.2".into(),
            attacher: "registry.k8s.io/sig-storage/csi-attacher:v4.4.2".into(),
            resizer: "registry.k8s.io/sig-storage/csi-resizer:v1.9.2".into(),
            snapshotter: "registry.k8s.io/sig-storage/csi-snapshotter:v6.3.2".into(),
            node_driver_registrar: "registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.9.1"
                .into(),
            liveness_probe: "registry.k8s.io/sig-storage/livenessprobe:v2.11.0".into(),
        }
    }
}

/// How the NFS node plugin mounts shares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NfsMounter {
    /// The kernel NFS client (real clusters).
    Kernel,
    /// Bind mounts of the export directory, which exists on the node at the same path
    /// (the embedded cluster with the fake cloud, whose host has no NFS client).
    Local {
        /// The fake cloud's backend directory, mounted into the NFS plugin at the same path.
        export_root: PathBuf,
    },
}

/// Everything the operator needs to know that is not in the ClusterCSIDriver.
#[derive(Clone, Debug)]
pub struct OperatorConfig {
    /// Namespace of the driver's objects, the credentials Secret and the CA ConfigMap.
    pub namespace: String,
    /// Secret holding `clouds.yaml` (key [`OperatorConfig::clouds_yaml_key`]).
    pub credentials_secret: String,
    /// Key of clouds.yaml in the credentials Secret.
    pub clouds_yaml_key: String,
    /// The cloud in clouds.yaml to use.
    pub cloud_name: String,
    /// ConfigMap holding a custom CA bundle (key [`OperatorConfig::ca_bundle_key`]), optional.
    pub ca_config_map: String,
    /// Key of the CA bundle in that ConfigMap.
    pub ca_bundle_key: String,
    /// The Secret the operator writes for the driver (flat `os-*` keys).
    pub driver_secret: String,
    /// Container images.
    pub images: Images,
    /// NFS mounter of the node plugin.
    pub nfs_mounter: NfsMounter,
    /// Port of the controller pod's liveness probe (pods share the host network).
    pub controller_health_port: u16,
    /// Port of the Manila node plugins' liveness probe (host network: one port per node,
    /// the same on every node); `None`: no liveness probe on them.
    pub node_health_port: Option<u16>,
    /// Port of the NFS node plugins' liveness probe; `None`: none.
    pub nfs_node_health_port: Option<u16>,
    /// How often share types are listed for new StorageClasses.
    pub share_type_sync_interval: Duration,
    /// How often everything is reconciled even without a watch event.
    pub resync_interval: Duration,
    /// Which release's objects the operator installs (`--release`, default current).
    pub release: Release,
    /// The version reported in `status.version` and the ClusterOperator: the release's
    /// ([`crate::release::VERSIONS`]; see [`OperatorConfig::set_release`]).
    pub version: String,
    /// The apiVersion of the controller's PodDisruptionBudget: [`PDB_V1`] (Kubernetes 1.21
    /// and later, the default), or [`PDB_V1BETA1`] where the cluster serves only that (the
    /// binary asks the API server at start).
    pub pdb_api_version: &'static str,
}

/// `policy/v1`, the PodDisruptionBudget API since Kubernetes 1.21.
pub const PDB_V1: &str = "policy/v1";
/// `policy/v1beta1`, the PodDisruptionBudget API of Kubernetes 1.20 and earlier (removed in
/// 1.25).
pub const PDB_V1BETA1: &str = "policy/v1beta1";

impl OperatorConfig {
    /// Defaults for a driver in `namespace`.
    pub fn new(namespace: impl Into<String>) -> Self {
        OperatorConfig {
            namespace: namespace.into(),
            credentials_secret: "cloud-credentials".into(),
            clouds_yaml_key: "clouds.yaml".into(),
            cloud_name: "openstack".into(),
            ca_config_map: "cloud-provider-config".into(),
            ca_bundle_key: "ca-bundle.pem".into(),
            driver_secret: "csi-manila-secrets".into(),
            images: Images::default(),
            nfs_mounter: NfsMounter::Kernel,
            controller_health_port: 9808,
            node_health_port: None,
            nfs_node_health_port: None,
            share_type_sync_interval: Duration::from_secs(60),
            resync_interval: Duration::from_secs(600),
            release: Release::Current,
            version: VERSIONS.current.into(),
            pdb_api_version: PDB_V1,
        }
    }

    /// Installs `release`'s objects and reports its version.
    pub fn set_release(&mut self, release: Release) {
        self.release = release;
        self.version = VERSIONS.of(release).into();
    }
}
