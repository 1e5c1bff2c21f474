//! Deploying the driver on a started environment: its namespace and credentials Secret, the
//! snapshot CRDs, the fixtures with the run's values, and the waits until it is ready.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Pod, Secret};
use kube::api::{Api, ListParams, PostParams};
use kube_support::wait;

use super::super::error::{Error, Result};
use super::super::manifests;
use super::super::workload::{describe_pod, pod_is_ready};
use super::{
    CONTROLLER_SELECTOR, DRIVER_NAME, Install, ManilaCsiEnvironment, SNAPSHOT_CONTROLLER_SELECTOR,
};

impl ManilaCsiEnvironment {
    /// The values of the fixtures' `${VARS}` for this run (without `ZONE`).
    pub(super) fn vars(&self) -> Result<BTreeMap<String, String>> {
        let port = free_port()?;
        Ok(BTreeMap::from([
            ("NAMESPACE".to_string(), self.options.namespace.clone()),
            ("DRIVER_NAME".to_string(), DRIVER_NAME.to_string()),
            (
                "INSTANCE".to_string(),
                super::instance::DEFAULT_INSTANCE.to_string(),
            ),
            ("SECRET_NAME".to_string(), self.options.secret_name.clone()),
            (
                "EXPORT_ROOT".to_string(),
                self.export_root.display().to_string(),
            ),
            (
                "WITH_TOPOLOGY".to_string(),
                self.options.topology.to_string(),
            ),
            ("NFS_MOUNTER".to_string(), self.nfs_mounter().to_string()),
            ("CONTROLLER_HEALTH_PORT".to_string(), port.to_string()),
            // The operator's node plugin liveness ports (unused by the plain fixtures).
            ("NODE_HEALTH_PORT".to_string(), free_port()?.to_string()),
            ("NFS_NODE_HEALTH_PORT".to_string(), free_port()?.to_string()),
        ]))
    }

    /// Creates the namespace and the credentials Secret, applies the snapshot CRDs and the
    /// fixtures, and waits until the driver is ready on every node.
    pub(super) async fn deploy(&mut self) -> Result<()> {
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
        let dir = manifests::fixtures_dir();
        if let Install::Operator(operator) = self.options.install.clone() {
            // The snapshot controller is the cluster's, not the driver's: installed as for
            // the fixtures; the operator installs the rest.
            self.options.secret_name = super::DRIVER_SECRET.into();
            for file in ["snapshot-controller-rbac.yaml", "snapshot-controller.yaml"] {
                self.applier.apply_file(&dir.join(file), &vars).await?;
            }
            self.deploy_operator(&operator, &vars).await?;
            if operator.wait_for_driver {
                self.wait_pod_ready(SNAPSHOT_CONTROLLER_SELECTOR, self.options.ready_timeout)
                    .await?;
            }
            return Ok(());
        }
        self.create_secret().await?;
        for file in ["snapshot-controller-rbac.yaml", "snapshot-controller.yaml"] {
            self.applier.apply_file(&dir.join(file), &vars).await?;
        }
        self.apply_driver(&vars, self.options.attach_required)
            .await?;
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

    /// Applies one deployment of the driver with `vars`: its CSIDriver (attach-required or
    /// not), RBAC, controller plugin and one node-plugin DaemonSet per zone.
    pub(super) async fn apply_driver(
        &mut self,
        vars: &BTreeMap<String, String>,
        attach_required: bool,
    ) -> Result<()> {
        let dir = manifests::fixtures_dir();
        let csidriver = if attach_required {
            "csidriver-attach-required.yaml"
        } else {
            "csidriver.yaml"
        };
        for file in [
            csidriver,
            "controllerplugin-rbac.yaml",
            "nodeplugin-rbac.yaml",
            "controllerplugin.yaml",
        ] {
            self.applier.apply_file(&dir.join(file), vars).await?;
        }
        for zone in self.zones() {
            let mut vars = vars.clone();
            vars.insert("ZONE".into(), zone);
            self.applier
                .apply_file(&dir.join("nodeplugin.yaml"), &vars)
                .await?;
        }
        Ok(())
    }

    /// The NFS node plugin's `--mounter`: `local` (bind the export directory, on this host)
    /// unless the cloud's exports are reached by the kernel client.
    fn nfs_mounter(&self) -> &'static str {
        match &self.options.cloud_source {
            super::CloudSource::External(super::ExternalCloud {
                nfs: super::NfsAccess::Kernel,
                ..
            }) => "kernel",
            _ => "local",
        }
    }

    /// The cluster's zones, each once, sorted.
    pub(super) fn zones(&self) -> Vec<String> {
        let mut zones: Vec<String> = self
            .cluster
            .description()
            .nodes
            .iter()
            .map(|n| n.zone.clone())
            .collect();
        zones.sort();
        zones.dedup();
        zones
    }

    async fn create_secret(&self) -> Result<()> {
        self.create_secret_in(&self.options.namespace, &self.options.secret_name)
            .await
    }

    /// Creates the credentials Secret `name` (the fake cloud's flat `os-*` map) in
    /// `namespace`.
    pub(super) async fn create_secret_in(&self, namespace: &str, name: &str) -> Result<()> {
        let secrets: Api<Secret> = Api::namespaced(self.client(), namespace);
        let mut secret = Secret::default();
        secret.metadata.name = Some(name.to_string());
        secret.data = Some(
            self.cloud
                .driver_secret()
                .into_iter()
                .map(|(k, v)| (k, ByteString(v.into_bytes())))
                .collect(),
        );
        // The error names the Secret, never its data.
        secrets
            .create(&PostParams::default(), &secret)
            .await
            .map_err(Error::kube(format!("creating Secret {namespace}/{name}")))?;
        Ok(())
    }

    /// Waits until a pod of the driver's namespace matching `selector` is Ready.
    pub async fn wait_pod_ready(&self, selector: &str, timeout: Duration) -> Result<Pod> {
        self.wait_pod_ready_in(&self.options.namespace, selector, timeout)
            .await
    }

    /// Waits until a pod of `namespace` matching `selector` is Ready.
    pub async fn wait_pod_ready_in(
        &self,
        namespace: &str,
        selector: &str,
        timeout: Duration,
    ) -> Result<Pod> {
        wait_pod_ready_in(&self.client(), namespace, selector, timeout).await
    }

    /// Waits until every node's CSINode lists the default instance's driver.
    pub(super) async fn wait_registered(&self, timeout: Duration) -> Result<()> {
        self.wait_registered_as(DRIVER_NAME, timeout).await
    }

    /// Waits until every node's CSINode lists the driver `driver`.
    pub(super) async fn wait_registered_as(&self, driver: &str, timeout: Duration) -> Result<()> {
        let nodes = self.cluster.node_names();
        wait::wait_csi_drivers(&self.client(), &nodes, &[driver], timeout).await?;
        Ok(())
    }
}

/// Applies the CRDs of `fixtures/crds/` (the snapshot API's and the operator's) with
/// `applier`, so the teardown deletes them, and waits (at most `timeout` in all) until they
/// are Established.
pub(crate) async fn apply_snapshot_crds(
    applier: &mut manifests::Applier,
    client: &kube::Client,
    timeout: Duration,
) -> Result<()> {
    let crd_dir = manifests::crds_dir();
    let mut crd_files = list_yaml(&crd_dir)?;
    crd_files.sort();
    let mut names = Vec::new();
    for path in crd_files {
        let text = std::fs::read_to_string(&path).map_err(|e| Error::Fixture {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        for object in manifests::parse(&path, &text)? {
            names.push(applier.apply(object).await?.name);
        }
    }
    kube_support::crd::wait_established(client, &names, timeout).await?;
    Ok(())
}

/// Waits until a pod of `namespace` matching `selector` is Ready; a timeout names what the
/// pods were doing.
pub(crate) async fn wait_pod_ready_in(
    client: &kube::Client,
    namespace: &str,
    selector: &str,
    timeout: Duration,
) -> Result<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let params = ListParams::default().labels(selector);
    let pod = wait::wait_until(
        format!("a Ready pod {selector} in {namespace}"),
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
                        .map(describe_pod)
                        .collect::<Vec<_>>()
                        .join("; ")
                })
            }
        },
    )
    .await?;
    Ok(pod)
}

pub(crate) fn list_yaml(dir: &Path) -> Result<Vec<PathBuf>> {
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
pub(crate) fn free_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
        .map_err(Error::io("binding", "127.0.0.1:0"))?;
    let port = listener
        .local_addr()
        .map_err(Error::io("reading the address of", "127.0.0.1:0"))?
        .port();
    Ok(port)
}
