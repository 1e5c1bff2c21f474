//! What a run runs against ([`Target`]): a cluster, the driver under test in each
//! configuration the tests need ([`DriverUnderTest`], [`DriverConfig`]), and optionally the
//! cloud. `conformance::cluster_target` sets it up (an embedded cluster, or an existing one).

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;

use cluster::Cluster;
use driver_spec::DriverSpec;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::DynamicObject;

use super::cloud::Cloud;
use super::environment::RunEnvironment;
use super::event_log::EventLog;
use crate::e2e::pod_diagnostics;
use crate::e2e::workload::WorkloadHost;

/// The driver configuration a test runs against. Tests that need one other than the default
/// get a driver instance of their own from the runner (on the embedded cluster) instead of
/// changing the driver the other tests use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DriverConfig {
    /// The driver as installed (the spec file describes it).
    Default,
    /// A CSIDriver with `attachRequired: true` (VolumeAttachments, the external attacher).
    AttachRequired,
    /// The driver with topology on (`--with-topology`; capability `topology`).
    Topology,
}

impl DriverConfig {
    /// How reports name it.
    pub fn describe(self) -> &'static str {
        match self {
            DriverConfig::Default => "the installed driver",
            DriverConfig::AttachRequired => "a driver instance whose CSIDriver requires attach",
            DriverConfig::Topology => "a driver instance with topology",
        }
    }
}

/// The StorageClass the driver's tests provision from, as the spec file's `StorageClass`
/// says.
#[derive(Debug, Clone)]
pub struct ClassTemplate {
    /// The class itself (provisioner, parameters, mount options, binding mode, …); tests
    /// that need a variation create a copy of their own from it.
    pub class: StorageClass,
    /// `FromExistingClassName`: the class's name on the cluster, used as it is by tests that
    /// need no variation.
    pub existing: Option<String>,
}

/// The VolumeSnapshotClass, as the spec file's `SnapshotClass` says.
#[derive(Debug, Clone)]
pub struct SnapshotClassTemplate {
    /// The class (driver, parameters, deletion policy).
    pub class: DynamicObject,
    /// `FromExistingClassName`: its name on the cluster.
    pub existing: Option<String>,
}

/// The driver in one configuration: its name, where its pods run (for diagnostics), the
/// spec that gates its tests and the classes they provision from.
#[derive(Debug, Clone)]
pub struct DriverUnderTest {
    /// Which configuration this is.
    pub config: DriverConfig,
    /// The CSI driver's name.
    pub name: String,
    /// The namespace of its pods, when known (their state and logs go into failure
    /// messages and evidence).
    pub namespace: Option<String>,
    /// The spec file, as it applies to this configuration.
    pub spec: DriverSpec,
    /// The StorageClass to provision from, if the spec file names one (without one, the
    /// provisioning tests do not apply).
    pub storage_class: Option<ClassTemplate>,
    /// The VolumeSnapshotClass, if the spec file names one.
    pub snapshot_class: Option<SnapshotClassTemplate>,
    /// Whether its CSIDriver requires attach.
    pub attach_required: bool,
    pub(crate) cluster: Cluster,
}

impl DriverUnderTest {
    /// The cluster it runs on.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }
}

impl WorkloadHost for DriverUnderTest {
    fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    fn diagnostics(&self) -> Pin<Box<dyn Future<Output = String> + Send + '_>> {
        Box::pin(async move {
            match &self.namespace {
                Some(namespace) => pod_diagnostics(&self.cluster, namespace, 15).await,
                None => format!(
                    "(the namespace of {}'s pods is not known: no pod diagnostics)",
                    self.name
                ),
            }
        })
    }
}

/// A node the tests can schedule to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetNode {
    /// Its name.
    pub name: String,
    /// Its zone label, if any.
    pub zone: Option<String>,
}

impl TargetNode {
    /// Every node of `cluster`, with its zone.
    pub fn all_of(cluster: &Cluster) -> Vec<TargetNode> {
        cluster
            .description()
            .nodes
            .iter()
            .map(|n| TargetNode {
                name: n.name.clone(),
                zone: Some(n.zone.clone()),
            })
            .collect()
    }
}

/// Everything a run runs against.
pub struct Target {
    /// The cluster.
    pub cluster: Cluster,
    /// What the cluster is, for reports (`embedded cluster with 3 nodes`, the kubeconfig).
    pub description: String,
    /// The schedulable nodes.
    pub nodes: Vec<TargetNode>,
    /// The driver in each configuration available.
    pub drivers: BTreeMap<DriverConfig, DriverUnderTest>,
    /// Why a configuration is not available (tests needing it are skipped with this).
    pub unavailable: BTreeMap<DriverConfig, String>,
    /// The cloud, if the run can reach it.
    pub cloud: Option<Cloud>,
    /// Where mounts of the run's volumes appear on this host (the embedded cluster's run
    /// directory), for the leftover checks; `None` when they are on other machines.
    pub mounts_root: Option<PathBuf>,
    /// The embedded environment, when the run started one (torn down at the end).
    pub(crate) environment: Option<RunEnvironment>,
    /// Every Event of the run, for the look for secrets at its end (the embedded default).
    pub(crate) events: Option<EventLog>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("description", &self.description)
            .field("nodes", &self.nodes)
            .field("drivers", &self.drivers.keys().collect::<Vec<_>>())
            .field("cloud", &self.cloud)
            .finish_non_exhaustive()
    }
}

impl Target {
    /// The driver in `config`, or why there is none.
    pub fn driver(&self, config: DriverConfig) -> Result<&DriverUnderTest, String> {
        self.drivers.get(&config).ok_or_else(|| {
            self.unavailable.get(&config).cloned().unwrap_or_else(|| {
                format!("{} is not available on this cluster", config.describe())
            })
        })
    }

    /// The embedded environment the run started, if any.
    pub fn environment(&self) -> Option<&RunEnvironment> {
        self.environment.as_ref()
    }
}
