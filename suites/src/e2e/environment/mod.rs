//! [`ManilaCsiEnvironment`]: a dedicated embedded cluster, the fake cloud in-process, and the
//! Manila CSI driver deployed on the cluster from the plain manifests of
//! `fixtures/manila-csi/`.
//!
//! - `deploy`: the namespace, Secret, CRDs and fixtures, and the waits until the driver is
//!   ready;
//! - `teardown`: the explicit, checked end (no workload, PV, content, share or snapshot left);
//! - `cleanup`: what an environment dropped without teardown (a failed test) removes from the
//!   host: processes, mounts and the run directory.

pub(crate) mod cleanup;
mod cloud_source;
pub(crate) mod deploy;
mod instance;
mod operator;
pub(crate) mod teardown;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::{Duration, Instant};

use cluster::{
    Cluster, ClusterBackend, ContainerCluster, ContainerOptions, EmbeddedCluster, EmbeddedOptions,
    NODE_PLACEHOLDER,
};
use fakes::{CloudConfig, FakeCloud, NodeMetadata};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

use super::binaries::Binaries;
use super::cloud::CloudInspector;
use super::error::Result;
use super::manifests::Applier;
use super::workload::{WorkloadHost, describe_pod};
use cleanup::ClusterGuard;
use cloud_source::EnvironmentCloud;
pub use cloud_source::{CloudSource, ExternalCloud, NfsAccess};
pub use instance::{DEFAULT_INSTANCE, DriverInstance, InstanceOptions};
pub use operator::{
    CA_CONFIG_MAP, CLUSTER_OPERATOR, CREDENTIALS_SECRET, DRIVER_SECRET, OPERATOR_MANAGED_SELECTOR,
    OPERATOR_SELECTOR, OperatorOptions, UpgradeTimings, cluster_csi_driver_resource,
    cluster_operator_resource, condition, describe_conditions, operand_versions,
};

/// The driver's name.
pub const DRIVER_NAME: &str = "manila.csi.openstack.org";
/// The default StorageClass of the fixtures (share type `default`, Immediate).
pub const DEFAULT_STORAGE_CLASS: &str = "csi-manila-default";
/// The StorageClass allowing volume expansion.
pub const EXPANDABLE_STORAGE_CLASS: &str = "csi-manila-expandable";
/// The WaitForFirstConsumer StorageClass (autoTopology).
pub const WFFC_STORAGE_CLASS: &str = "csi-manila-wffc";
/// The VolumeSnapshotClass of the fixtures.
pub const SNAPSHOT_CLASS: &str = "csi-manila-snapclass";
/// The topology key of the driver's zones.
pub const TOPOLOGY_KEY: &str = "topology.manila.csi.openstack.org/zone";
/// The label selecting the controller plugin's pod.
pub const CONTROLLER_SELECTOR: &str = "app=openstack-manila-csi,component=controllerplugin";
/// The label selecting the node plugin's pods.
pub const NODE_PLUGIN_SELECTOR: &str = "app=openstack-manila-csi,component=nodeplugin";
/// The label selecting the snapshot controller's pod.
pub const SNAPSHOT_CONTROLLER_SELECTOR: &str = "app=snapshot-controller";

/// How the driver gets onto the cluster.
#[derive(Debug, Clone, Default)]
pub enum Install {
    /// The plain manifests of `fixtures/manila-csi/` with the flat credentials Secret.
    #[default]
    Fixtures,
    /// The operator of `fixtures/manila-operator/` with the `cloud-credentials` Secret
    /// (clouds.yaml, and the CA ConfigMap when the fake cloud speaks TLS); the operator
    /// installs the driver, its Secret and one StorageClass per share type.
    Operator(OperatorOptions),
}

/// How a [`ManilaCsiEnvironment`] is set up.
#[derive(Debug, Clone)]
pub struct EnvironmentOptions {
    /// How many nodes (default 3).
    pub nodes: usize,
    /// The zones, assigned to the nodes in turn (default `zone-a`, `zone-b`); they are also
    /// the fake cloud's availability zones.
    pub zones: Vec<String>,
    /// Deploy `csidriver-attach-required.yaml` instead of `csidriver.yaml` (default false).
    pub attach_required: bool,
    /// Run the driver with `--with-topology` (default false, as upstream): shares get a zone
    /// and PVs a node affinity for it.
    pub topology: bool,
    /// The fake cloud's seed (its zones are replaced by [`EnvironmentOptions::zones`]).
    pub cloud: CloudConfig,
    /// Serve the fake cloud over HTTPS with a CA of its own (default false).
    pub cloud_tls: bool,
    /// The fake cloud of this process (default), or a cloud the environment does not start.
    pub cloud_source: CloudSource,
    /// How the driver is installed (default: the plain fixtures).
    pub install: Install,
    /// The namespace of the driver (default `manila-csi`).
    pub namespace: String,
    /// The credentials Secret's name (default `manila-csi-secrets`).
    pub secret_name: String,
    /// How long the deployment may take to be ready (default 180 s).
    pub ready_timeout: Duration,
    /// How long teardown may wait for volumes and objects to go (default 120 s).
    pub teardown_timeout: Duration,
    /// Where the binaries are (default: the running executable's cargo profile directory,
    /// building what is missing).
    pub bin_dir: Option<PathBuf>,
    /// Keep the run directory (cluster logs, the nodes' run directories, the fake cloud's
    /// exports) after teardown or drop; stderr says where and how to remove it (default: set
    /// when `E2E_KEEP_RUN_DIR` is).
    pub keep_run_dir: bool,
    /// More images for the cluster's image map, `(image, host binary)`, besides the
    /// workspace's (e.g. a stand-in for an example's application image). Default none.
    pub extra_images: Vec<(String, PathBuf)>,
    /// The cluster's backend (default embedded; `containers`: every node a container of its
    /// own, the fake cloud on the docker network's gateway address).
    pub backend: ClusterBackend,
}

impl Default for EnvironmentOptions {
    fn default() -> Self {
        EnvironmentOptions {
            nodes: 3,
            zones: vec!["zone-a".into(), "zone-b".into()],
            attach_required: false,
            topology: false,
            cloud: CloudConfig::default(),
            cloud_tls: false,
            cloud_source: CloudSource::Fake,
            install: Install::Fixtures,
            namespace: "manila-csi".into(),
            secret_name: "manila-csi-secrets".into(),
            ready_timeout: Duration::from_secs(180),
            teardown_timeout: Duration::from_secs(120),
            bin_dir: None,
            keep_run_dir: std::env::var_os("E2E_KEEP_RUN_DIR").is_some(),
            extra_images: Vec::new(),
            backend: ClusterBackend::Embedded,
        }
    }
}

/// How long each phase of [`ManilaCsiEnvironment::start`] took.
#[derive(Debug, Clone, Copy, Default)]
pub struct StartTimings {
    /// Locating (and building) the binaries.
    pub binaries: Duration,
    /// Booting the cluster to every node Ready.
    pub cluster: Duration,
    /// Applying the fixtures to the driver being ready on every node.
    pub deploy: Duration,
}

/// The Manila CSI driver deployed from `fixtures/manila-csi/` on a dedicated embedded
/// cluster, against the fake cloud running in this process.
///
/// [`ManilaCsiEnvironment::start`] builds what is missing, boots the cluster (images mapped to
/// the workspace's binaries), starts the fake cloud with its exports under the cluster's run
/// directory, creates the namespace and the credentials Secret, applies the fixtures with the
/// run's values and waits until the controller plugin and snapshot controller are Ready and
/// every node's CSINode lists the driver. [`ManilaCsiEnvironment::teardown`] deletes what is
/// left of the workloads, checks that no PV, VolumeSnapshotContent, share or snapshot remains,
/// deletes what it applied and stops the cluster.
///
/// Dropped without teardown (a failed assertion, a panic), it still leaves nothing behind: the
/// cluster's processes are ended, everything mounted below the run directory is unmounted and
/// the directory removed, synchronously (see `cleanup`).
pub struct ManilaCsiEnvironment {
    options: EnvironmentOptions,
    cluster: Cluster,
    cloud: EnvironmentCloud,
    applier: Applier,
    export_root: PathBuf,
    timings: StartTimings,
    instances: Vec<DriverInstance>,
    cluster_guard: ClusterGuard,
}

impl std::fmt::Debug for ManilaCsiEnvironment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManilaCsiEnvironment")
            .field("cluster", &self.cluster)
            .field("cloud", &self.cloud)
            .field("namespace", &self.options.namespace)
            .field("run_dir", &self.cluster_guard.run_dir())
            .finish_non_exhaustive()
    }
}

impl WorkloadHost for ManilaCsiEnvironment {
    fn cluster(&self) -> &Cluster {
        ManilaCsiEnvironment::cluster(self)
    }

    fn diagnostics(&self) -> Pin<Box<dyn Future<Output = String> + Send + '_>> {
        Box::pin(ManilaCsiEnvironment::diagnostics(self))
    }
}

impl ManilaCsiEnvironment {
    /// Starts everything (see the type's docs). Start it from a runtime that outlives it.
    pub async fn start(options: EnvironmentOptions) -> Result<Self> {
        let started = Instant::now();
        let binaries = Binaries::locate_or_build(options.bin_dir.as_deref()).await?;
        let binaries_time = started.elapsed();

        let extra_images = options.extra_images.clone();
        let images: Vec<(String, PathBuf)> = binaries
            .image_map()
            .into_iter()
            .chain(extra_images)
            .collect();
        let shared_paths: Vec<PathBuf> = match &options.cloud_source {
            CloudSource::External(ExternalCloud {
                nfs: NfsAccess::Local(root),
                ..
            }) => vec![root.clone()],
            _ => Vec::new(),
        };
        let cluster_started = Instant::now();
        // The run's own fake cloud listens on a port chosen before the nodes start, so that
        // every node agent can be started with its node's metadata document as
        // `OS_METADATA_URL`, the stand-in for the per-instance metadata service (see
        // `metadata_pod_env`): on loopback for the embedded backend, on the docker network's
        // gateway (this host, as the containers see it) for the containers backend.
        let (cluster_guard, fake_listen) = match options.backend {
            ClusterBackend::Embedded => {
                let (fake_listen, pod_env) =
                    fake_cloud_address(&options, std::net::Ipv4Addr::LOCALHOST.into())?;
                let embedded = EmbeddedCluster::start(EmbeddedOptions {
                    nodes: options.nodes,
                    zones: options.zones.clone(),
                    images,
                    node_agent: Some(binaries.node_agent()),
                    keep_run_dir: options.keep_run_dir,
                    pod_env,
                    ..Default::default()
                })
                .await?;
                // From here on, an early return drops the guard, which ends the cluster.
                (
                    ClusterGuard::new(embedded, options.keep_run_dir),
                    fake_listen,
                )
            }
            ClusterBackend::Containers => {
                let prepared = ContainerCluster::prepare(ContainerOptions {
                    nodes: options.nodes,
                    zones: options.zones.clone(),
                    images,
                    node_agent: Some(binaries.node_agent()),
                    keep_run_dir: options.keep_run_dir,
                    shared_paths,
                    ..Default::default()
                })
                .await?;
                let (fake_listen, pod_env) =
                    fake_cloud_address(&options, prepared.network().gateway())?;
                let mut guard = ClusterGuard::containers(prepared, options.keep_run_dir);
                if let Some(cluster) = guard.containers_mut() {
                    cluster.boot(pod_env).await?;
                }
                (guard, fake_listen)
            }
        };
        let cluster_time = cluster_started.elapsed();
        let cluster = cluster_guard.cluster().await?;

        let export_root = cluster_guard.run_dir().join("exports");
        let cloud = match &options.cloud_source {
            CloudSource::Fake => {
                let mut cloud_config = options.cloud.clone();
                cloud_config.manila.availability_zones = options.zones.clone();
                let mut builder = FakeCloud::builder(cloud_config)
                    .backend_root(&export_root)
                    .tls(options.cloud_tls);
                if let Some(reserved) = fake_listen {
                    builder = builder.listener(reserved.listener);
                }
                let cloud = builder.start().await?;
                tracing::info!(cloud = cloud.base_url(), exports = %export_root.display(), "fake cloud started");
                // Every node has its instance document, as every VM of a cloud has, where its
                // pods' OS_METADATA_URL says.
                for node in &cluster.description().nodes {
                    let given = metadata_pod_env(cloud.address(), options.cloud_tls)
                        .into_iter()
                        .map(|(_, url)| url.replace(NODE_PLACEHOLDER, &node.name))
                        .next();
                    if given.as_deref() != Some(cloud.metadata_url(&node.name).as_str()) {
                        return Err(super::error::Error::Unexpected(format!(
                            "the nodes were given the metadata URL {given:?}, the fake cloud serves {}",
                            cloud.metadata_url(&node.name)
                        )));
                    }
                    cloud.set_node_metadata(
                        &node.name,
                        NodeMetadata {
                            uuid: uuid::Uuid::new_v4().to_string(),
                            availability_zone: node.zone.clone(),
                            name: None,
                        },
                    )?;
                }
                let inspector = CloudInspector::new(&cloud)?;
                EnvironmentCloud::Fake(Box::new(cloud), Box::new(inspector))
            }
            CloudSource::External(external) => {
                if matches!(options.install, Install::Operator(_)) {
                    return Err(super::error::Error::Unexpected(
                        "installing the driver by its operator needs the fake cloud".into(),
                    ));
                }
                tracing::info!(cloud = %external.source, "using a cloud this environment does not start");
                EnvironmentCloud::External(external.clone())
            }
        };
        let export_root = match &options.cloud_source {
            CloudSource::External(ExternalCloud {
                nfs: NfsAccess::Local(root),
                ..
            }) => root.clone(),
            // With the kernel mounter the plugin only needs the directory to exist.
            _ => {
                std::fs::create_dir_all(&export_root)
                    .map_err(super::error::Error::io("creating", &export_root))?;
                export_root
            }
        };

        let mut environment = ManilaCsiEnvironment {
            applier: Applier::new(cluster.client()),
            options,
            cluster,
            cloud,
            export_root,
            timings: StartTimings {
                binaries: binaries_time,
                cluster: cluster_time,
                deploy: Duration::ZERO,
            },
            instances: Vec::new(),
            cluster_guard,
        };
        let deploy_started = Instant::now();
        if let Err(e) = environment.deploy().await {
            let diagnostics = environment.diagnostics().await;
            tracing::error!("deployment failed: {e}\n{diagnostics}");
            let _ = environment.stop().await;
            return Err(e);
        }
        environment.timings.deploy = deploy_started.elapsed();
        tracing::info!(timings = ?environment.timings, "the Manila CSI driver is deployed");
        Ok(environment)
    }

    /// The cluster.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// An admin kube client.
    pub fn client(&self) -> kube::Client {
        self.cluster.client()
    }

    /// The fake cloud, unless the environment uses a cloud it did not start.
    pub fn fake_cloud(&self) -> Option<&FakeCloud> {
        self.cloud.fake()
    }

    /// A Manila client of the fake cloud (shares with sizes and zones, snapshots), unless the
    /// environment uses a cloud it did not start.
    pub fn inspector(&self) -> Option<&CloudInspector> {
        self.cloud.inspector()
    }

    /// The flat `os-*` credentials the driver's Secret holds (never log them).
    pub fn driver_secret(&self) -> BTreeMap<String, String> {
        self.cloud.driver_secret()
    }

    /// The driver's namespace.
    pub fn namespace(&self) -> &str {
        &self.options.namespace
    }

    /// The credentials Secret's name (in [`ManilaCsiEnvironment::namespace`]).
    pub fn secret_name(&self) -> &str {
        &self.options.secret_name
    }

    /// Where the fake cloud keeps share directories (`shares/<id>`, `snapshots/<id>`):
    /// `exports/` in the run directory; with an external cloud, the export root the NFS
    /// plugin binds from (local access) or an empty directory (kernel mounts).
    pub fn export_root(&self) -> &Path {
        &self.export_root
    }

    /// The run directory: the cluster's (control plane, nodes, logs) with the fake cloud's
    /// exports; gone after teardown or drop unless kept.
    pub fn run_dir(&self) -> &Path {
        self.cluster_guard.run_dir()
    }

    /// The options it was started with.
    pub fn options(&self) -> &EnvironmentOptions {
        &self.options
    }

    /// How long the start took.
    pub fn timings(&self) -> StartTimings {
        self.timings
    }

    /// The zone of `node`, if it is one of the cluster's nodes.
    pub fn zone_of(&self, node: &str) -> Option<String> {
        self.cluster
            .description()
            .nodes
            .iter()
            .find(|n| n.name == node)
            .map(|n| n.zone.clone())
    }

    /// StorageClass parameters for share type `share_type` naming the credentials Secret
    /// for every operation, as the fixtures' classes do.
    pub fn storage_class_parameters(&self, share_type: &str) -> BTreeMap<String, String> {
        self.default_instance().storage_class_parameters(share_type)
    }

    /// The state of the driver's pods (of every instance) and the tail of each container's
    /// log, for failure messages.
    pub async fn diagnostics(&self) -> String {
        let mut namespaces = vec![self.options.namespace.clone()];
        namespaces.extend(self.instances.iter().map(|i| i.namespace.clone()));
        let mut out = String::new();
        for namespace in &namespaces {
            out.push_str(&pod_diagnostics(&self.cluster, namespace, 15).await);
        }
        out
    }
}

/// The state of the pods of `namespace` and the last `lines` lines of each container's log.
pub async fn pod_diagnostics(cluster: &Cluster, namespace: &str, lines: usize) -> String {
    let pods: Api<Pod> = Api::namespaced(cluster.client(), namespace);
    let list = match pods.list(&ListParams::default()).await {
        Ok(list) => list,
        Err(e) => return format!("listing pods in {namespace}: {e}\n"),
    };
    let mut out = String::new();
    for pod in &list.items {
        let name = pod.metadata.name.clone().unwrap_or_default();
        out.push_str(&format!("pod {namespace}/{}\n", describe_pod(pod)));
        let containers = pod
            .spec
            .as_ref()
            .map(|s| s.containers.iter().map(|c| c.name.clone()).collect())
            .unwrap_or_else(Vec::<String>::new);
        for container in containers {
            let log = cluster
                .logs(namespace, &name, &container, false)
                .await
                .unwrap_or_else(|e| format!("(no log: {e})"));
            let tail: Vec<&str> = log.lines().rev().take(lines).collect();
            out.push_str(&format!("  --- {container}:\n"));
            for line in tail.into_iter().rev() {
                out.push_str(&format!("    {line}\n"));
            }
        }
    }
    out
}

/// The environment variable the Manila driver reads its metadata service's URL from.
pub const METADATA_URL_ENV: &str = "OS_METADATA_URL";

/// The node agents' pod environment pointing each node at its own document of the fake
/// cloud's metadata service on `addr` (as [`FakeCloud::metadata_url`] names it).
pub(crate) fn metadata_pod_env(addr: std::net::SocketAddr, tls: bool) -> Vec<(String, String)> {
    let scheme = if tls { "https" } else { "http" };
    let url = format!(
        "{scheme}://{addr}{}/{NODE_PLACEHOLDER}{}",
        fakes::metadata::NODES_PREFIX,
        fakes::metadata::DOCUMENT
    );
    vec![(METADATA_URL_ENV.to_string(), url)]
}

/// Where the fake cloud listens, and the pod environment naming its metadata documents.
type FakeCloudAddress = (Option<ReservedAddress>, Vec<(String, String)>);

/// Where the run's own fake cloud will listen, on this host's address `ip` (a port free
/// now), and the node agents' pod environment pointing each node at its metadata document
/// there; neither for a cloud the environment does not start.
fn fake_cloud_address(
    options: &EnvironmentOptions,
    ip: std::net::IpAddr,
) -> Result<FakeCloudAddress> {
    match &options.cloud_source {
        CloudSource::Fake => {
            let reserved = reserve_address(ip)?;
            let env = metadata_pod_env(reserved.addr, options.cloud_tls);
            Ok((Some(reserved), env))
        }
        CloudSource::External(_) => Ok((None, Vec::new())),
    }
}

/// An address of this host taken for the fake cloud before it starts: the listener stays
/// bound until the cloud serves on it ([`fakes::FakeCloudBuilder::listener`]), so no other
/// process can take the port the nodes were told in between.
#[derive(Debug)]
pub(crate) struct ReservedAddress {
    /// The address (the listener's).
    pub(crate) addr: std::net::SocketAddr,
    /// The bound listener.
    pub(crate) listener: std::net::TcpListener,
}

/// A loopback address reserved for the fake cloud (see [`ReservedAddress`]).
pub(crate) fn reserve_loopback_address() -> Result<ReservedAddress> {
    reserve_address(std::net::Ipv4Addr::LOCALHOST.into())
}

/// An address of this host, `ip`, with a port of its own, reserved for the fake cloud.
pub(crate) fn reserve_address(ip: std::net::IpAddr) -> Result<ReservedAddress> {
    let what = std::path::PathBuf::from(format!("{ip}:0"));
    let listener = std::net::TcpListener::bind((ip, 0))
        .map_err(super::error::Error::io("binding", what.as_path()))?;
    let addr = listener
        .local_addr()
        .map_err(super::error::Error::io("binding", what.as_path()))?;
    Ok(ReservedAddress { addr, listener })
}
