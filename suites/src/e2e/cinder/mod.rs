//! [`CinderCsiEnvironment`]: a dedicated embedded cluster, the fake cloud with Cinder and
//! Nova in-process, and the Cinder CSI driver deployed from the plain manifests of
//! `fixtures/cinder-csi/`, with real block devices.
//!
//! Every node of the cluster is a Nova server of the fake cloud (same name and zone; its
//! metadata document names the server's id, which the node plugin reports as its node ID).
//! Attaching a volume to a server makes a loop device for the volume's sparse file and a
//! `virtio-<serial>` link to it in that server's disk directory, `disks/<node>` below the
//! environment's scratch directory; each node agent gives its pods
//! `CINDER_CSI_DISK_BY_ID_DIR=<that directory>` (and `OS_METADATA_URL`, its metadata
//! document), the stand-ins for a VM's `/dev/disk/by-id` and metadata service. So a volume's
//! device is visible on exactly the node it is attached to, as on a cloud.
//!
//! The driver is installed from the plain fixtures ([`CinderInstall::Fixtures`], the
//! default) or by the Cinder operator of `fixtures/cinder-operator/`
//! ([`CinderInstall::Operator`], see `operator`), which writes the driver's configuration
//! from a clouds.yaml Secret and a ConfigMap and names its StorageClass `standard-csi`.
//! With `cloud_tls` the fake cloud serves its APIs over HTTPS with a CA of its own; the
//! nodes' metadata documents are then served over plain HTTP by a second, metadata-only fake
//! (as a cloud's link-local metadata service is not behind the API's TLS).
//!
//! ```no_run
//! # async fn demo() -> suites::e2e::Result<()> {
//! use suites::e2e::cinder::{CinderCsiEnvironment, CinderEnvironmentOptions};
//! let env = CinderCsiEnvironment::start(CinderEnvironmentOptions::default()).await?;
//! // … claims of class csi-cinder-default and pods in a namespace of env.cluster() …
//! env.teardown().await?; // no PV, attachment, volume, snapshot or loop device may be left
//! # Ok(()) }
//! ```

mod operator;
mod teardown;
mod upgrade;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cluster::{Cluster, EmbeddedCluster, EmbeddedOptions, NODE_PLACEHOLDER};
use fakes::{CloudConfig, FakeCloud, NodeMetadata, ServerSeed};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Pod, Secret};
use kube::api::{Api, PostParams};

use super::binaries::Binaries;
use super::environment::cleanup::ClusterGuard;
use super::environment::deploy::{apply_snapshot_crds, free_port, wait_pod_ready_in};
use super::environment::{
    SNAPSHOT_CONTROLLER_SELECTOR, StartTimings, metadata_pod_env, pod_diagnostics,
    reserve_loopback_address,
};
use super::error::{Error, Result};
use super::manifests::{self, Applier};
use super::workload::WorkloadHost;

pub use operator::{
    CA_BUNDLE_KEY, CINDER_CLUSTER_OPERATOR, CINDER_CONFIG_HASH_ANNOTATION, CINDER_CONFIG_MAP,
    CINDER_CONTROLLER_DEPLOYMENT, CINDER_CREDENTIALS_SECRET, CINDER_DRIVER_SECRET,
    CINDER_NODE_DAEMON_SET, CINDER_OPERATOR_CLASS, CINDER_OPERATOR_DEPLOYMENT,
    CINDER_OPERATOR_LEASE, CINDER_OPERATOR_MANAGED_SELECTOR, CINDER_OPERATOR_SELECTOR,
    CLOUDS_YAML_KEY, CONFIG_KEY, CinderOperatorOptions, CinderOperatorRelease, condition_of,
    operator_fixtures_dir,
};

/// The driver's name.
pub const CINDER_DRIVER_NAME: &str = "cinder.csi.openstack.org";
/// The default class: WaitForFirstConsumer, expansion allowed (`fixtures/cinder-csi`).
pub const CINDER_DEFAULT_CLASS: &str = "csi-cinder-default";
/// The same with Immediate binding.
pub const CINDER_IMMEDIATE_CLASS: &str = "csi-cinder-immediate";
/// Volume type `multiattach`.
pub const CINDER_MULTIATTACH_CLASS: &str = "csi-cinder-multiattach";
/// xfs file systems (`csi.storage.k8s.io/fstype: xfs`), otherwise as the default class.
pub const CINDER_XFS_CLASS: &str = "csi-cinder-xfs";
/// The VolumeSnapshotClass.
pub const CINDER_SNAPSHOT_CLASS: &str = "csi-cinder-snapclass";
/// The driver's topology key.
pub const CINDER_TOPOLOGY_KEY: &str = "topology.cinder.csi.openstack.org/zone";
/// The controller plugin's pods.
pub const CINDER_CONTROLLER_SELECTOR: &str = "app=openstack-cinder-csi,component=controllerplugin";
/// The node plugin's pods.
pub const CINDER_NODE_PLUGIN_SELECTOR: &str = "app=openstack-cinder-csi,component=nodeplugin";
/// The Secret holding the driver's `cloud.conf`.
pub const CLOUD_CONFIG_SECRET: &str = "cinder-cloud-config";
/// The environment variable the driver's node service reads its disk directory from.
pub const DISK_DIR_ENV: &str = "CINDER_CSI_DISK_BY_ID_DIR";

/// How the Cinder driver gets onto the cluster.
#[derive(Debug, Clone, Default)]
pub enum CinderInstall {
    /// The plain manifests of `fixtures/cinder-csi/` with a cloud.conf Secret.
    #[default]
    Fixtures,
    /// The operator of `fixtures/cinder-operator/` with the `cloud-credentials` Secret
    /// (clouds.yaml) and the `cloud-provider-config` ConfigMap (the user's `config`, and the
    /// CA when the cloud speaks TLS); the operator installs the driver.
    Operator(CinderOperatorOptions),
}

/// How a [`CinderCsiEnvironment`] is set up.
#[derive(Debug, Clone)]
pub struct CinderEnvironmentOptions {
    /// Number of nodes (default 3).
    pub nodes: usize,
    /// Zones, assigned to the nodes in turn (default `zone-a`, `zone-b`: node-1 and node-3
    /// share zone-a, so a volume can move between two nodes of its zone). Cinder has the
    /// same zones.
    pub zones: Vec<String>,
    /// `[BlockStorage] node-volume-attach-limit` (default: the driver's, 256).
    pub attach_limit: Option<u32>,
    /// The fake cloud's seed (Cinder is turned on and given the zones whatever it says).
    pub cloud: CloudConfig,
    /// Serve the fake cloud's APIs over HTTPS with a CA of its own (default false).
    pub cloud_tls: bool,
    /// How the driver is installed (default: the plain fixtures).
    pub install: CinderInstall,
    /// The driver's namespace.
    pub namespace: String,
    /// How long the driver may take to be ready.
    pub ready_timeout: Duration,
    /// How long teardown waits for volumes and objects to go.
    pub teardown_timeout: Duration,
    /// A directory with the binaries; default this workspace's, built when missing.
    pub bin_dir: Option<PathBuf>,
    /// Keep the cluster's run directory (`E2E_KEEP_RUN_DIR`).
    pub keep_run_dir: bool,
}

impl Default for CinderEnvironmentOptions {
    fn default() -> Self {
        CinderEnvironmentOptions {
            nodes: 3,
            zones: vec!["zone-a".into(), "zone-b".into()],
            attach_limit: None,
            cloud: CloudConfig::default(),
            cloud_tls: false,
            install: CinderInstall::Fixtures,
            namespace: "cinder-csi".into(),
            ready_timeout: Duration::from_secs(180),
            teardown_timeout: Duration::from_secs(120),
            bin_dir: None,
            keep_run_dir: std::env::var_os("E2E_KEEP_RUN_DIR").is_some(),
        }
    }
}

/// The Cinder CSI driver on an embedded cluster against the fake cloud (see the module docs).
/// [`CinderCsiEnvironment::teardown`] checks that nothing is left; dropped without it (a
/// failed test), it still ends the cluster, unmounts and removes its directories and detaches
/// its loop devices.
pub struct CinderCsiEnvironment {
    // Dropped in this order: the cluster (its processes end, its mounts go), then the cloud
    // (its loop devices are detached), then the scratch directory.
    cluster_guard: ClusterGuard,
    cloud: FakeCloud,
    // With TLS: the plain-HTTP metadata service of the nodes.
    _metadata_service: Option<FakeCloud>,
    scratch: tempfile::TempDir,
    options: CinderEnvironmentOptions,
    cluster: Cluster,
    applier: Applier,
    servers: BTreeMap<String, String>,
    timings: StartTimings,
}

impl std::fmt::Debug for CinderCsiEnvironment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CinderCsiEnvironment")
            .field("cluster", &self.cluster)
            .field("cloud", &self.cloud.base_url())
            .field("scratch", &self.scratch.path())
            .field("run_dir", &self.cluster_guard.run_dir())
            .finish_non_exhaustive()
    }
}

impl CinderCsiEnvironment {
    /// Builds what is missing, boots the cluster with each node's metadata URL and disk
    /// directory, starts the fake cloud with a server per node, deploys the driver and waits
    /// until it is ready on every node.
    pub async fn start(options: CinderEnvironmentOptions) -> Result<Self> {
        let started = Instant::now();
        let binaries = Binaries::locate_or_build(options.bin_dir.as_deref()).await?;
        let binaries_time = started.elapsed();

        let scratch = tempfile::Builder::new()
            .prefix("cinder-e2e-")
            .tempdir()
            .map_err(Error::io("creating", Path::new("a scratch directory")))?;
        let disks = scratch.path().join("disks");
        let backend = scratch.path().join("volumes");
        for dir in [&disks, &backend] {
            std::fs::create_dir_all(dir).map_err(Error::io("creating", dir))?;
        }

        let fake_listen = reserve_loopback_address()?;
        let metadata_listen = if options.cloud_tls {
            Some(reserve_loopback_address()?)
        } else {
            None
        };
        let metadata_addr = metadata_listen
            .as_ref()
            .map_or(fake_listen.addr, |m| m.addr);
        let mut pod_env = metadata_pod_env(metadata_addr, false);
        pod_env.push((
            DISK_DIR_ENV.to_string(),
            disks.join(NODE_PLACEHOLDER).display().to_string(),
        ));
        let cluster_started = Instant::now();
        let embedded = EmbeddedCluster::start(EmbeddedOptions {
            nodes: options.nodes,
            zones: options.zones.clone(),
            images: binaries.image_map(),
            node_agent: Some(binaries.node_agent()),
            keep_run_dir: options.keep_run_dir,
            pod_env,
            ..Default::default()
        })
        .await?;
        let cluster_time = cluster_started.elapsed();
        let cluster_guard = ClusterGuard::new(embedded, options.keep_run_dir);
        let cluster = cluster_guard.cluster().await?;

        let mut cloud_config = options.cloud.clone();
        cloud_config.cinder.present = true;
        cloud_config.cinder.availability_zones = distinct(&options.zones);
        let cloud = FakeCloud::builder(cloud_config)
            .backend_root(&backend)
            .listener(fake_listen.listener)
            .tls(options.cloud_tls)
            .start()
            .await?;
        tracing::info!(
            cloud = cloud.base_url(),
            "fake cloud with Cinder and Nova started"
        );
        let metadata_service = match metadata_listen {
            Some(reserved) => Some(
                FakeCloud::builder(CloudConfig::default())
                    .listener(reserved.listener)
                    .start()
                    .await?,
            ),
            None => None,
        };
        let mut servers = BTreeMap::new();
        for node in &cluster.description().nodes {
            let id = cloud.add_server(&ServerSeed {
                name: node.name.clone(),
                availability_zone: node.zone.clone(),
                id: None,
                disk_dir: Some(disks.join(&node.name)),
            })?;
            if let Some(service) = &metadata_service {
                service.set_node_metadata(
                    &node.name,
                    NodeMetadata {
                        uuid: id.clone(),
                        availability_zone: node.zone.clone(),
                        name: None,
                    },
                )?;
            }
            servers.insert(node.name.clone(), id);
        }

        let mut environment = CinderCsiEnvironment {
            applier: Applier::new(cluster.client()),
            cluster_guard,
            cloud,
            _metadata_service: metadata_service,
            scratch,
            options,
            cluster,
            servers,
            timings: StartTimings {
                binaries: binaries_time,
                cluster: cluster_time,
                deploy: Duration::ZERO,
            },
        };
        let deploy_started = Instant::now();
        if let Err(e) = environment.deploy().await {
            let diagnostics = environment.diagnostics().await;
            tracing::error!("deployment failed: {e}\n{diagnostics}");
            let _ = environment.cluster_guard.stop().await;
            return Err(e);
        }
        environment.timings.deploy = deploy_started.elapsed();
        tracing::info!(timings = ?environment.timings, "the Cinder CSI driver is deployed");
        Ok(environment)
    }

    /// The values of the fixtures' `${VARS}`.
    fn vars(&self) -> Result<BTreeMap<String, String>> {
        Ok(BTreeMap::from([
            ("NAMESPACE".to_string(), self.options.namespace.clone()),
            ("DRIVER_NAME".to_string(), CINDER_DRIVER_NAME.to_string()),
            ("INSTANCE".to_string(), "openstack-cinder-csi".to_string()),
            (
                "CLOUD_CONFIG_SECRET".to_string(),
                CLOUD_CONFIG_SECRET.to_string(),
            ),
            ("CLUSTER_NAME".to_string(), "kubernetes".to_string()),
            (
                "CONTROLLER_HEALTH_PORT".to_string(),
                free_port()?.to_string(),
            ),
            (
                "DISK_ROOT".to_string(),
                self.disk_root().display().to_string(),
            ),
        ]))
    }

    /// The namespace, the snapshot CRDs and controller, then the cloud config Secret and the
    /// driver's fixtures, or the operator (see `operator`); then the waits until the driver
    /// is ready on every node.
    async fn deploy(&mut self) -> Result<()> {
        let client = self.client();
        let namespace = self.options.namespace.clone();
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let mut ns = Namespace::default();
        ns.metadata.name = Some(namespace.clone());
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .map_err(Error::kube(format!("creating namespace {namespace}")))?;
        apply_snapshot_crds(&mut self.applier, &client, self.options.ready_timeout).await?;

        let vars = self.vars()?;
        // The snapshot controller is the cluster's, whatever the driver and however it is
        // installed: the Manila fixtures' one.
        let shared = manifests::fixtures_dir();
        for file in ["snapshot-controller-rbac.yaml", "snapshot-controller.yaml"] {
            self.applier.apply_file(&shared.join(file), &vars).await?;
        }
        if let CinderInstall::Operator(operator) = self.options.install.clone() {
            self.deploy_operator(&operator).await?;
            if operator.wait_for_driver {
                wait_pod_ready_in(
                    &client,
                    &namespace,
                    SNAPSHOT_CONTROLLER_SELECTOR,
                    self.options.ready_timeout,
                )
                .await?;
            }
            return Ok(());
        }
        self.create_cloud_config().await?;
        let dir = fixtures_dir();
        for file in [
            "csidriver.yaml",
            "controllerplugin-rbac.yaml",
            "nodeplugin-rbac.yaml",
            "controllerplugin.yaml",
            "nodeplugin.yaml",
            "storageclasses.yaml",
            "volumesnapshotclass.yaml",
        ] {
            self.applier.apply_file(&dir.join(file), &vars).await?;
        }
        let timeout = self.options.ready_timeout;
        wait_pod_ready_in(&client, &namespace, CINDER_CONTROLLER_SELECTOR, timeout).await?;
        wait_pod_ready_in(&client, &namespace, SNAPSHOT_CONTROLLER_SELECTOR, timeout).await?;
        kube_support::wait::wait_csi_drivers(
            &client,
            &self.cluster.node_names(),
            &[CINDER_DRIVER_NAME],
            timeout,
        )
        .await?;
        Ok(())
    }

    async fn create_cloud_config(&self) -> Result<()> {
        let namespace = &self.options.namespace;
        let block_storage: Vec<(&str, String)> = self
            .options
            .attach_limit
            .map(|limit| ("node-volume-attach-limit", limit.to_string()))
            .into_iter()
            .collect();
        let conf = self.cloud.cinder_cloud_conf(&block_storage);
        let secrets: Api<Secret> = Api::namespaced(self.client(), namespace);
        let mut secret = Secret::default();
        secret.metadata.name = Some(CLOUD_CONFIG_SECRET.to_string());
        secret.data = Some(BTreeMap::from([(
            "cloud.conf".to_string(),
            ByteString(conf.into_bytes()),
        )]));
        // The error names the Secret, never its data.
        secrets
            .create(&PostParams::default(), &secret)
            .await
            .map_err(Error::kube(format!(
                "creating Secret {namespace}/{CLOUD_CONFIG_SECRET}"
            )))?;
        Ok(())
    }

    /// The cluster.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// An admin kube client.
    pub fn client(&self) -> kube::Client {
        self.cluster.client()
    }

    /// The fake cloud.
    pub fn cloud(&self) -> &FakeCloud {
        &self.cloud
    }

    /// The driver's namespace.
    pub fn namespace(&self) -> &str {
        &self.options.namespace
    }

    /// The cluster's run directory (logs, node directories, mounts).
    pub fn run_dir(&self) -> &Path {
        self.cluster_guard.run_dir()
    }

    /// The Nova server id of `node` (the driver's node ID there).
    pub fn server_of(&self, node: &str) -> Option<&str> {
        self.servers.get(node).map(String::as_str)
    }

    /// The node whose server has id `server_id`.
    pub fn node_of_server(&self, server_id: &str) -> Option<&str> {
        self.servers
            .iter()
            .find(|(_, id)| id.as_str() == server_id)
            .map(|(node, _)| node.as_str())
    }

    /// The zone of `node`.
    pub fn zone_of(&self, node: &str) -> Option<String> {
        self.cluster
            .description()
            .nodes
            .iter()
            .find(|n| n.name == node)
            .map(|n| n.zone.clone())
    }

    /// Where the nodes' disk directories are (`<root>/<node>`).
    pub fn disk_root(&self) -> PathBuf {
        self.scratch.path().join("disks")
    }

    /// The disk directory of `node` (its `/dev/disk/by-id`).
    pub fn disk_dir(&self, node: &str) -> PathBuf {
        self.disk_root().join(node)
    }

    /// How long the start took.
    pub fn timings(&self) -> StartTimings {
        self.timings
    }

    /// The options it was started with.
    pub fn options(&self) -> &CinderEnvironmentOptions {
        &self.options
    }

    /// The driver's pods and the tail of each container's log.
    pub async fn diagnostics(&self) -> String {
        pod_diagnostics(&self.cluster, &self.options.namespace, 15).await
    }

    /// Waits until a pod of the driver's namespace matching `selector` is Ready.
    pub async fn wait_pod_ready(&self, selector: &str, timeout: Duration) -> Result<Pod> {
        wait_pod_ready_in(&self.client(), &self.options.namespace, selector, timeout).await
    }
}

impl WorkloadHost for CinderCsiEnvironment {
    fn cluster(&self) -> &Cluster {
        CinderCsiEnvironment::cluster(self)
    }

    fn diagnostics(
        &self,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = String> + Send + '_>> {
        Box::pin(CinderCsiEnvironment::diagnostics(self))
    }
}

/// `fixtures/cinder-csi/` of this workspace.
pub fn fixtures_dir() -> PathBuf {
    super::binaries::workspace_root().join("fixtures/cinder-csi")
}

/// `zones` without repeats, in order.
fn distinct(zones: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for zone in zones {
        if !out.contains(zone) {
            out.push(zone.clone());
        }
    }
    out
}
