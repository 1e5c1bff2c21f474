//! [`ManilaCsiEnvironment`]: a dedicated embedded cluster, the fake cloud in-process, and the
//! Manila CSI driver deployed on the cluster from the plain manifests of
//! `fixtures/manila-csi/`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fakes::{CloudConfig, FakeCloud, SecretKind};
use harness::cluster::{Cluster, EmbeddedCluster, EmbeddedOptions, wait};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim, Pod, Secret};
use k8s_openapi::api::storage::v1::CSINode;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::runtime::conditions;

use super::binaries::Binaries;
use super::cloud::CloudInspector;
use super::error::{Error, Result};
use super::manifests::{self, Applier};
use super::snapshots;
use super::workload::pod_is_ready;

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
    /// Keep the run directories (cluster logs, exports) after teardown.
    pub keep_run_dir: bool,
}

impl Default for EnvironmentOptions {
    fn default() -> Self {
        EnvironmentOptions {
            nodes: 3,
            zones: vec!["zone-a".into(), "zone-b".into()],
            attach_required: false,
            topology: false,
            cloud: CloudConfig::default(),
            namespace: "manila-csi".into(),
            secret_name: "manila-csi-secrets".into(),
            ready_timeout: Duration::from_secs(180),
            teardown_timeout: Duration::from_secs(120),
            bin_dir: None,
            keep_run_dir: std::env::var_os("E2E_KEEP_RUN_DIR").is_some(),
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
/// the workspace's binaries), starts the fake cloud with its exports under the run directory,
/// creates the namespace and the credentials Secret, applies the fixtures with the run's
/// values and waits until the controller plugin and snapshot controller are Ready and every
/// node's CSINode lists the driver. [`ManilaCsiEnvironment::teardown`] deletes what is left
/// of the workloads, checks that no PV, VolumeSnapshotContent, share or snapshot remains,
/// deletes what it applied and stops the cluster.
pub struct ManilaCsiEnvironment {
    options: EnvironmentOptions,
    embedded: Option<EmbeddedCluster>,
    cluster: Cluster,
    cloud: FakeCloud,
    inspector: CloudInspector,
    applier: Applier,
    dir: Option<tempfile::TempDir>,
    export_root: PathBuf,
    timings: StartTimings,
}

impl std::fmt::Debug for ManilaCsiEnvironment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManilaCsiEnvironment")
            .field("cluster", &self.cluster)
            .field("cloud", &self.cloud)
            .field("namespace", &self.options.namespace)
            .field("export_root", &self.export_root)
            .finish_non_exhaustive()
    }
}

impl ManilaCsiEnvironment {
    /// Starts everything (see the type's docs). Start it from a runtime that outlives it.
    pub async fn start(options: EnvironmentOptions) -> Result<Self> {
        let started = Instant::now();
        let binaries = Binaries::locate_or_build(options.bin_dir.as_deref()).await?;
        let binaries_time = started.elapsed();

        // Short: kubelet-style socket paths under a node's run directory
        // (`<base>/cluster-XXXXXX/nodes/node-1/plugins_registry/manila.csi.openstack.org-reg.sock`)
        // must fit a unix socket address (107 bytes).
        let base = std::env::temp_dir().join("csi-e2e");
        std::fs::create_dir_all(&base).map_err(Error::io("creating", &base))?;
        let dir = tempfile::Builder::new()
            .prefix("e2e-")
            .tempdir_in(&base)
            .map_err(Error::io("creating a run directory in", &base))?;
        let export_root = dir.path().join("exports");
        std::fs::create_dir_all(&export_root).map_err(Error::io("creating", &export_root))?;
        let export_root =
            std::fs::canonicalize(&export_root).map_err(Error::io("resolving", &export_root))?;

        let mut cloud_config = options.cloud.clone();
        cloud_config.manila.availability_zones = options.zones.clone();
        let cloud = FakeCloud::builder(cloud_config)
            .backend_root(&export_root)
            .start()
            .await?;
        tracing::info!(cloud = cloud.base_url(), exports = %export_root.display(), "fake cloud started");

        let cluster_started = Instant::now();
        let embedded = EmbeddedCluster::start(EmbeddedOptions {
            nodes: options.nodes,
            zones: options.zones.clone(),
            images: binaries.image_map(),
            node_agent: Some(binaries.node_agent()),
            base_dir: base.clone(),
            keep_run_dir: options.keep_run_dir,
            ..Default::default()
        })
        .await?;
        let cluster_time = cluster_started.elapsed();
        let cluster = match embedded.cluster().await {
            Ok(cluster) => cluster,
            Err(e) => {
                let _ = embedded.stop().await;
                return Err(e.into());
            }
        };
        let mut environment = ManilaCsiEnvironment {
            applier: Applier::new(cluster.client()),
            inspector: CloudInspector::new(&cloud),
            options,
            embedded: Some(embedded),
            cluster,
            cloud,
            dir: Some(dir),
            export_root,
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

    /// The fake cloud.
    pub fn cloud(&self) -> &FakeCloud {
        &self.cloud
    }

    /// A Manila client of the fake cloud (shares with sizes and zones, snapshots).
    pub fn inspector(&self) -> &CloudInspector {
        &self.inspector
    }

    /// The driver's namespace.
    pub fn namespace(&self) -> &str {
        &self.options.namespace
    }

    /// The credentials Secret's name (in [`ManilaCsiEnvironment::namespace`]).
    pub fn secret_name(&self) -> &str {
        &self.options.secret_name
    }

    /// Where the fake cloud keeps share directories (`shares/<id>`, `snapshots/<id>`).
    pub fn export_root(&self) -> &Path {
        &self.export_root
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
        let mut parameters = BTreeMap::from([("type".to_string(), share_type.to_string())]);
        for operation in [
            "provisioner",
            "controller-expand",
            "node-stage",
            "node-publish",
        ] {
            parameters.insert(
                format!("csi.storage.k8s.io/{operation}-secret-name"),
                self.options.secret_name.clone(),
            );
            parameters.insert(
                format!("csi.storage.k8s.io/{operation}-secret-namespace"),
                self.options.namespace.clone(),
            );
        }
        parameters
    }

    /// The values of the fixtures' `${VARS}` for this run (without `ZONE`).
    fn vars(&self) -> Result<BTreeMap<String, String>> {
        let port = free_port()?;
        Ok(BTreeMap::from([
            ("NAMESPACE".to_string(), self.options.namespace.clone()),
            ("SECRET_NAME".to_string(), self.options.secret_name.clone()),
            (
                "EXPORT_ROOT".to_string(),
                self.export_root.display().to_string(),
            ),
            (
                "WITH_TOPOLOGY".to_string(),
                self.options.topology.to_string(),
            ),
            ("CONTROLLER_HEALTH_PORT".to_string(), port.to_string()),
        ]))
    }

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
        self.create_secret().await?;

        // The snapshot CRDs, Established before anything uses them.
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let crd_dir = manifests::crds_dir();
        let mut crd_files = list_yaml(&crd_dir)?;
        crd_files.sort();
        for path in crd_files {
            let text = std::fs::read_to_string(&path).map_err(|e| Error::Fixture {
                path: path.clone(),
                reason: e.to_string(),
            })?;
            for object in manifests::parse(&path, &text)? {
                let applied = self.applier.apply(object).await?;
                wait::wait_for(
                    &crds,
                    &applied.name,
                    conditions::is_crd_established(),
                    self.options.ready_timeout,
                )
                .await?;
            }
        }

        let vars = self.vars()?;
        let dir = manifests::fixtures_dir();
        let csidriver = if self.options.attach_required {
            "csidriver-attach-required.yaml"
        } else {
            "csidriver.yaml"
        };
        for file in [
            csidriver,
            "controllerplugin-rbac.yaml",
            "nodeplugin-rbac.yaml",
            "snapshot-controller-rbac.yaml",
            "snapshot-controller.yaml",
            "controllerplugin.yaml",
        ] {
            self.applier.apply_file(&dir.join(file), &vars).await?;
        }
        let mut zones: Vec<String> = self
            .cluster
            .description()
            .nodes
            .iter()
            .map(|n| n.zone.clone())
            .collect();
        zones.sort();
        zones.dedup();
        for zone in zones {
            let mut vars = vars.clone();
            vars.insert("ZONE".into(), zone);
            self.applier
                .apply_file(&dir.join("nodeplugin.yaml"), &vars)
                .await?;
        }
        for file in ["volumesnapshotclass.yaml", "storageclasses.yaml"] {
            self.applier.apply_file(&dir.join(file), &vars).await?;
        }

        let timeout = self.options.ready_timeout;
        self.wait_pod_ready(CONTROLLER_SELECTOR, timeout).await?;
        self.wait_pod_ready(SNAPSHOT_CONTROLLER_SELECTOR, timeout)
            .await?;
        self.wait_registered(timeout).await?;
        Ok(())
    }

    async fn create_secret(&self) -> Result<()> {
        let secrets: Api<Secret> = Api::namespaced(self.client(), &self.options.namespace);
        let mut secret = Secret::default();
        secret.metadata.name = Some(self.options.secret_name.clone());
        secret.data = Some(
            self.cloud
                .secret(SecretKind::Password)
                .into_iter()
                .map(|(k, v)| (k, ByteString(v.into_bytes())))
                .collect(),
        );
        // The error names the Secret, never its data.
        secrets
            .create(&PostParams::default(), &secret)
            .await
            .map_err(Error::kube(format!(
                "creating Secret {}/{}",
                self.options.namespace, self.options.secret_name
            )))?;
        Ok(())
    }

    /// Waits until a pod of the driver's namespace matching `selector` is Ready.
    pub async fn wait_pod_ready(&self, selector: &str, timeout: Duration) -> Result<Pod> {
        let pods: Api<Pod> = Api::namespaced(self.client(), &self.options.namespace);
        let params = ListParams::default().labels(selector);
        let pod = wait::wait_until(
            format!("a Ready pod {selector} in {}", self.options.namespace),
            timeout,
            || {
                let pods = pods.clone();
                let params = params.clone();
                async move {
                    let list = pods.list(&params).await.map_err(|e| e.to_string())?;
                    if let Some(pod) = list.items.iter().find(|p| pod_is_ready(p)) {
                        return Ok(Some(pod.clone()));
                    }
                    Err(if list.items.is_empty() {
                        "no pod yet".to_string()
                    } else {
                        list.items
                            .iter()
                            .map(super::workload::describe_pod)
                            .collect::<Vec<_>>()
                            .join("; ")
                    })
                }
            },
        )
        .await?;
        Ok(pod)
    }

    /// Waits until every node's CSINode lists the driver.
    async fn wait_registered(&self, timeout: Duration) -> Result<()> {
        let csinodes: Api<CSINode> = Api::all(self.client());
        let nodes = self.cluster.node_names();
        wait::wait_until(
            format!("every node's CSINode to list {DRIVER_NAME}"),
            timeout,
            || {
                let csinodes = csinodes.clone();
                let nodes = nodes.clone();
                async move {
                    let mut missing = Vec::new();
                    for node in &nodes {
                        let found = csinodes.get_opt(node).await.map_err(|e| e.to_string())?;
                        let drivers: Vec<String> = found
                            .map(|c| c.spec.drivers.into_iter().map(|d| d.name).collect())
                            .unwrap_or_default();
                        if !drivers.iter().any(|d| d == DRIVER_NAME) {
                            missing.push(format!("{node}: drivers {drivers:?}"));
                        }
                    }
                    if missing.is_empty() {
                        Ok(Some(()))
                    } else {
                        Err(missing.join(", "))
                    }
                }
            },
        )
        .await?;
        Ok(())
    }

    /// The state of the driver's pods and the tail of each container's log, for failure
    /// messages.
    pub async fn diagnostics(&self) -> String {
        let pods: Api<Pod> = Api::namespaced(self.client(), &self.options.namespace);
        let list = match pods.list(&ListParams::default()).await {
            Ok(list) => list,
            Err(e) => return format!("listing pods in {}: {e}", self.options.namespace),
        };
        let mut out = String::new();
        for pod in &list.items {
            let name = pod.metadata.name.clone().unwrap_or_default();
            out.push_str(&format!("pod {}\n", super::workload::describe_pod(pod)));
            let containers = pod
                .spec
                .as_ref()
                .map(|s| s.containers.iter().map(|c| c.name.clone()).collect())
                .unwrap_or_else(Vec::<String>::new);
            for container in containers {
                let log = self
                    .cluster
                    .logs(&self.options.namespace, &name, &container, false)
                    .await
                    .unwrap_or_else(|e| format!("(no log: {e})"));
                let tail: Vec<&str> = log.lines().rev().take(15).collect();
                out.push_str(&format!("  --- {container}:\n"));
                for line in tail.into_iter().rev() {
                    out.push_str(&format!("    {line}\n"));
                }
            }
        }
        out
    }

    /// Deletes what the workloads left (VolumeSnapshots, pods using claims, claims), waits
    /// until no PV and no VolumeSnapshotContent is left, checks the fake cloud has no share
    /// or snapshot left, deletes what it applied and stops the cluster. Every step runs; the
    /// first failure is returned.
    pub async fn teardown(mut self) -> Result<()> {
        let mut first_error: Option<Error> = None;
        if let Err(e) = self.drain_volumes().await {
            first_error.get_or_insert(e);
        }
        if let Err(e) = self.check_leftovers() {
            first_error.get_or_insert(e);
        }
        if first_error.is_none() {
            let timeout = self.options.teardown_timeout;
            if let Err(e) = self.applier.delete_all(timeout).await {
                first_error.get_or_insert(e);
            }
            let namespaces: Api<Namespace> = Api::all(self.client());
            match namespaces
                .delete(&self.options.namespace, &DeleteParams::default())
                .await
            {
                Ok(_) => {
                    if let Err(e) =
                        wait::wait_deleted(&namespaces, &self.options.namespace, timeout).await
                    {
                        first_error.get_or_insert(e.into());
                    }
                }
                Err(e) => {
                    first_error.get_or_insert(Error::Kube {
                        action: format!("deleting namespace {}", self.options.namespace),
                        source: e,
                    });
                }
            }
        } else {
            let diagnostics = self.diagnostics().await;
            tracing::error!("teardown found leftovers; the driver's pods:\n{diagnostics}");
        }
        if let Err(e) = self.stop().await {
            first_error.get_or_insert(e);
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Stops the cluster and removes the run directory (unless kept).
    async fn stop(&mut self) -> Result<()> {
        let result = match self.embedded.take() {
            Some(embedded) => embedded.stop().await.map_err(Error::from),
            None => Ok(()),
        };
        if let Some(dir) = self.dir.take() {
            if self.options.keep_run_dir {
                let kept = dir.keep();
                tracing::info!(dir = %kept.display(), "kept the e2e run directory");
            } else {
                drop(dir);
            }
        }
        result
    }

    async fn drain_volumes(&self) -> Result<()> {
        let client = self.client();
        let timeout = self.options.teardown_timeout;
        let snapshots_api = snapshots::volume_snapshots_all(&client);
        for snapshot in snapshots_api
            .list(&ListParams::default())
            .await
            .map_err(Error::kube("listing VolumeSnapshots"))?
        {
            let ns = snapshot.metadata.namespace.clone().unwrap_or_default();
            let name = snapshot.metadata.name.clone().unwrap_or_default();
            let api = snapshots::volume_snapshots(&client, &ns);
            ignore_not_found(api.delete(&name, &DeleteParams::default()).await)
                .map_err(Error::kube(format!("deleting VolumeSnapshot {ns}/{name}")))?;
        }
        let claims: Api<PersistentVolumeClaim> = Api::all(client.clone());
        let claim_list = claims
            .list(&ListParams::default())
            .await
            .map_err(Error::kube("listing PVCs"))?;
        let pods: Api<Pod> = Api::all(client.clone());
        for pod in pods
            .list(&ListParams::default())
            .await
            .map_err(Error::kube("listing pods"))?
        {
            let uses_claim = pod
                .spec
                .as_ref()
                .and_then(|s| s.volumes.as_ref())
                .is_some_and(|v| v.iter().any(|v| v.persistent_volume_claim.is_some()));
            if uses_claim {
                let ns = pod.metadata.namespace.clone().unwrap_or_default();
                let name = pod.metadata.name.clone().unwrap_or_default();
                let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
                ignore_not_found(api.delete(&name, &DeleteParams::default()).await)
                    .map_err(Error::kube(format!("deleting pod {ns}/{name}")))?;
            }
        }
        for claim in claim_list {
            let ns = claim.metadata.namespace.clone().unwrap_or_default();
            let name = claim.metadata.name.clone().unwrap_or_default();
            let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
            ignore_not_found(api.delete(&name, &DeleteParams::default()).await)
                .map_err(Error::kube(format!("deleting PVC {ns}/{name}")))?;
        }
        let volumes: Api<PersistentVolume> = Api::all(client.clone());
        let contents = snapshots::volume_snapshot_contents(&client);
        wait::wait_until(
            "no PersistentVolume and no VolumeSnapshotContent left",
            timeout,
            || {
                let volumes = volumes.clone();
                let contents = contents.clone();
                async move {
                    let pvs = volumes
                        .list(&ListParams::default())
                        .await
                        .map_err(|e| e.to_string())?;
                    let vscs = contents
                        .list(&ListParams::default())
                        .await
                        .map_err(|e| e.to_string())?;
                    if pvs.items.is_empty() && vscs.items.is_empty() {
                        return Ok(Some(()));
                    }
                    let mut left: Vec<String> = pvs
                        .items
                        .iter()
                        .map(|pv| format!("PV {}", wait::summarize(pv)))
                        .collect();
                    left.extend(vscs.items.iter().map(|c: &DynamicObject| {
                        format!(
                            "VolumeSnapshotContent {}: {}",
                            c.metadata.name.as_deref().unwrap_or("?"),
                            c.data
                                .get("status")
                                .map(|s| s.to_string())
                                .unwrap_or_default()
                        )
                    }));
                    Err(left.join("; "))
                }
            },
        )
        .await?;
        Ok(())
    }

    fn check_leftovers(&self) -> Result<()> {
        let leftovers = self.cloud.leftovers();
        if leftovers.shares.is_empty() && leftovers.snapshots.is_empty() {
            return Ok(());
        }
        Err(Error::Leftovers(format!(
            "the fake cloud still has shares {:?} and snapshots {:?}",
            leftovers.shares, leftovers.snapshots
        )))
    }
}

fn ignore_not_found<T>(result: kube::Result<T>) -> kube::Result<()> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

fn list_yaml(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir).map_err(Error::io("listing", dir))?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry.map_err(Error::io("listing", dir))?.path();
        if path.extension().is_some_and(|e| e == "yaml") {
            files.push(path);
        }
    }
    Ok(files)
}

/// A free TCP port on the loopback address (pods share the host network).
fn free_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
        .map_err(Error::io("binding", "127.0.0.1:0"))?;
    let port = listener
        .local_addr()
        .map_err(Error::io("reading the address of", "127.0.0.1:0"))?
        .port();
    Ok(port)
}
