//! The operator's own configuration: where it installs the driver, which images it runs,
//! where it reads the cloud's credentials and configuration. Set by the flags and
//! environment of the operator's Deployment; what a cluster admin changes at run time is in
//! the ClusterCSIDriver instead.

use std::path::PathBuf;
use std::time::Duration;

pub use operator_kit::release::Release;
use operator_kit::release::Versions;

/// The versions the operator's releases report: this crate's version for the current release
/// (N), and that with `-previous` for the previous one (N-1).
pub const VERSIONS: Versions = operator_kit::versions!();

/// The images of the driver's containers. Defaults are upstream's image names; the embedded
/// cluster maps them to this workspace's binaries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Images {
    /// `cinder-csi-plugin` (controller and node).
    pub driver: String,
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
            driver: "registry.k8s.io/provider-os/cinder-csi-plugin:v1.31.0".into(),
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

/// Where the node plugin finds the disks Nova attached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DiskSource {
    /// `/dev/disk/by-id` of the node (real clouds): the node plugin mounts the host's `/dev`.
    HostDev,
    /// The embedded cluster with the fake cloud: every node's disk directory lies below
    /// this root (each node agent names its own in `CINDER_CSI_DISK_BY_ID_DIR`); the node
    /// plugin mounts it read-only at the same path, besides `/dev` for the loop devices.
    DiskRoot(PathBuf),
}

/// Everything the operator needs to know that is not in the ClusterCSIDriver.
#[derive(Clone, Debug)]
pub struct OperatorConfig {
    /// Namespace of the driver's objects, the credentials Secret and the config ConfigMap.
    pub namespace: String,
    /// Secret holding clouds.yaml (key [`OperatorConfig::clouds_yaml_key`]).
    pub credentials_secret: String,
    /// Key of clouds.yaml in the credentials Secret.
    pub clouds_yaml_key: String,
    /// The cloud in clouds.yaml to use.
    pub cloud_name: String,
    /// The user's ConfigMap with the INI cloud configuration (key
    /// [`OperatorConfig::config_key`]) and a CA bundle (key [`OperatorConfig::ca_bundle_key`]);
    /// optional, as are both keys.
    pub config_map: String,
    /// Key of the INI cloud configuration in that ConfigMap.
    pub config_key: String,
    /// Key of the CA bundle in that ConfigMap.
    pub ca_bundle_key: String,
    /// The Secret the operator writes for the driver, holding `cloud.conf` (and the CA).
    pub driver_secret: String,
    /// Container images.
    pub images: Images,
    /// Where the node plugin finds attached disks.
    pub disk_source: DiskSource,
    /// Port of the controller pod's liveness probe (pods share the host network).
    pub controller_health_port: u16,
    /// The driver's `--cluster` (volume metadata `cinder.csi.openstack.org/cluster`).
    pub cluster_name: String,
    /// Whether the StorageClass [`STORAGE_CLASS`] is the cluster's default class. Off by
    /// default: the seed asks for a non-default class, and an operator must not take the
    /// default from a class the admin chose (two default classes leave Kubernetes picking
    /// the newest one). Upstream's later operators make it the default; set
    /// `--default-storage-class` for that.
    pub default_storage_class: bool,
    /// How often everything is reconciled without a watch event (the cloud's zones and
    /// credentials are checked again then).
    pub resync_interval: Duration,
    /// Which release's objects the operator installs (`--release`, default current). The
    /// previous release (N-1, `assets/previous/`) differs from the current one (N) in the
    /// controller: one ClusterRole and binding `openstack-cinder-csi-controllerplugin`
    /// shared by every sidecar instead of one per sidecar, and no `csi-resizer` (nor its
    /// RBAC). N prunes N-1's shared role.
    pub release: Release,
    /// The version this operator reports (`status.version`, the ClusterOperator's versions):
    /// the release's ([`VERSIONS`]; see [`OperatorConfig::set_release`]).
    pub version: String,
}

/// The StorageClass the operator installs (upstream's name).
pub const STORAGE_CLASS: &str = "standard-csi";

/// Where the driver pods find `cloud.conf`: the driver Secret mounted here.
pub const CONFIG_DIR: &str = "/etc/cinder-csi";
/// The key (and file name) of the driver's configuration in the driver Secret.
pub const CLOUD_CONF_KEY: &str = "cloud.conf";
/// The key (and file name) of the CA bundle in the driver Secret, next to `cloud.conf`.
pub const CA_BUNDLE_FILE: &str = "ca-bundle.pem";

impl OperatorConfig {
    /// Defaults for a driver in `namespace`.
    pub fn new(namespace: impl Into<String>) -> Self {
        OperatorConfig {
            namespace: namespace.into(),
            credentials_secret: "cloud-credentials".into(),
            clouds_yaml_key: "clouds.yaml".into(),
            cloud_name: "openstack".into(),
            config_map: "cloud-provider-config".into(),
            config_key: "config".into(),
            ca_bundle_key: "ca-bundle.pem".into(),
            driver_secret: "openstack-cinder-config".into(),
            images: Images::default(),
            disk_source: DiskSource::HostDev,
            controller_health_port: 10301,
            cluster_name: "kubernetes".into(),
            default_storage_class: false,
            resync_interval: Duration::from_secs(600),
            release: Release::Current,
            version: VERSIONS.current.to_owned(),
        }
    }

    /// Installs `release`'s objects and reports its version.
    pub fn set_release(&mut self, release: Release) {
        self.release = release;
        self.version = VERSIONS.of(release).into();
    }

    /// The path of the CA bundle in the driver pods, as `cloud.conf` names it.
    pub fn ca_file_path(&self) -> String {
        format!("{CONFIG_DIR}/{CA_BUNDLE_FILE}")
    }
}
