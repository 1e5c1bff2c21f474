//! Installing the Cinder driver the operator's way: the operator from
//! `fixtures/cinder-operator/`, the `cloud-credentials` Secret (clouds.yaml for the fake
//! cloud) and the `cloud-provider-config` ConfigMap (the user's `config`, and `ca-bundle.pem`
//! when the cloud speaks TLS); the operator then installs the driver. Teardown removes what
//! the operator made that outlives it by design (its StorageClass, the ClusterOperator) and
//! checks that nothing it labelled is left.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::ApiResource;
use kube_support::wait;

use super::super::binaries::workspace_root;
use super::super::environment::deploy::free_port;
use super::super::environment::teardown::ignore_not_found;
use super::super::environment::{
    cluster_csi_driver_resource, cluster_operator_resource, condition, describe_conditions,
};
use super::super::error::{Error, Result};
use super::{CINDER_CONTROLLER_SELECTOR, CINDER_DRIVER_NAME, CinderCsiEnvironment, CinderInstall};

/// The ClusterOperator the Cinder operator reports on.
pub const CINDER_CLUSTER_OPERATOR: &str = "openstack-cinder-csi-driver-operator";
/// The operator's leader-election Lease.
pub const CINDER_OPERATOR_LEASE: &str = "openstack-cinder-csi-driver-operator-lock";
/// The operator's Deployment (`fixtures/cinder-operator/operator.yaml`).
pub const CINDER_OPERATOR_DEPLOYMENT: &str = "cinder-csi-driver-operator";
/// The label selecting the operator's pods.
pub const CINDER_OPERATOR_SELECTOR: &str = "app=cinder-csi-driver-operator";
/// The label on everything the operator creates.
pub const CINDER_OPERATOR_MANAGED_SELECTOR: &str =
    "app.kubernetes.io/managed-by=cinder-csi-driver-operator";
/// The operator's StorageClass and VolumeSnapshotClass.
pub const CINDER_OPERATOR_CLASS: &str = "standard-csi";
/// The Secret with clouds.yaml the operator reads.
pub const CINDER_CREDENTIALS_SECRET: &str = "cloud-credentials";
/// The key of clouds.yaml in it.
pub const CLOUDS_YAML_KEY: &str = "clouds.yaml";
/// The ConfigMap with the user's cloud.conf (`config`) and the CA bundle (`ca-bundle.pem`).
pub const CINDER_CONFIG_MAP: &str = "cloud-provider-config";
/// The ConfigMap's key of the user's cloud.conf.
pub const CONFIG_KEY: &str = "config";
/// The ConfigMap's key of the CA bundle.
pub const CA_BUNDLE_KEY: &str = "ca-bundle.pem";
/// The Secret the operator writes for the driver (cloud.conf and the CA bundle).
pub const CINDER_DRIVER_SECRET: &str = "openstack-cinder-config";
/// The driver's controller Deployment as the operator names it.
pub const CINDER_CONTROLLER_DEPLOYMENT: &str = "openstack-cinder-csi-controllerplugin";
/// The driver's node DaemonSet as the operator names it.
pub const CINDER_NODE_DAEMON_SET: &str = "openstack-cinder-csi-nodeplugin";
/// The pod-template annotation whose change restarts the driver's pods.
pub const CINDER_CONFIG_HASH_ANNOTATION: &str = "cinder.csi.openstack.org/config-hash";

/// Which release of the driver's objects the Cinder operator installs: its
/// `OPERATOR_RELEASE` (`--release`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CinderOperatorRelease {
    /// N-1: one ClusterRole shared by every controller sidecar, no resizer; it reports
    /// `<version>-previous`.
    Previous,
    /// The current release.
    #[default]
    Current,
}

impl CinderOperatorRelease {
    /// The value of `${OPERATOR_RELEASE}`.
    pub fn as_str(self) -> &'static str {
        match self {
            CinderOperatorRelease::Previous => "previous",
            CinderOperatorRelease::Current => "current",
        }
    }

    /// The version the operator reports for this release: the `cinder-operator` crate's
    /// version of this workspace, with `-previous` for N-1 (the operator README, "Releases").
    pub fn version(self) -> Result<String> {
        let path = workspace_root().join("operators/cinder-operator/Cargo.toml");
        let text = std::fs::read_to_string(&path).map_err(Error::io("reading", &path))?;
        let version = package_version(&text).ok_or_else(|| Error::Fixture {
            path: path.clone(),
            reason: "no version in [package]".into(),
        })?;
        Ok(match self {
            CinderOperatorRelease::Previous => format!("{version}-previous"),
            CinderOperatorRelease::Current => version,
        })
    }
}

/// The `version = "…"` of a Cargo manifest's `[package]` section.
pub(super) fn package_version(manifest: &str) -> Option<String> {
    let mut in_package = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package && let Some(rest) = line.strip_prefix("version") {
            let value = rest.trim_start().strip_prefix('=')?.trim();
            return Some(value.trim_matches('"').to_string());
        }
    }
    None
}

/// How the Cinder operator is installed.
#[derive(Debug, Clone)]
pub struct CinderOperatorOptions {
    /// Operator replicas (default 1; leader election keeps one active).
    pub replicas: u32,
    /// The clouds.yaml cloud name the Secret holds (default `openstack`, the operator's
    /// default).
    pub cloud_name: String,
    /// The ConfigMap's `config` (an INI cloud.conf without credentials; default none). The
    /// environment's attach limit is added as `[BlockStorage] node-volume-attach-limit`.
    pub config: Option<String>,
    /// The operator's `--resync-interval` (default 1 min).
    pub resync_interval: Duration,
    /// Wait until the operator reports the driver installed and ready (default true).
    pub wait_for_driver: bool,
    /// The release the operator installs (default the current one; N-1 is
    /// [`CinderOperatorOptions::PREVIOUS_RELEASE`]).
    pub release: CinderOperatorRelease,
    /// The driver controller plugin's liveness port (`--controller-health-port`; default: a
    /// free port chosen at start, kept for an upgrade).
    pub controller_health_port: Option<u16>,
}

impl CinderOperatorOptions {
    /// Release N-1 of the operator's driver objects.
    pub const PREVIOUS_RELEASE: CinderOperatorRelease = CinderOperatorRelease::Previous;
    /// The current release.
    pub const CURRENT_RELEASE: CinderOperatorRelease = CinderOperatorRelease::Current;
}

impl Default for CinderOperatorOptions {
    fn default() -> Self {
        CinderOperatorOptions {
            replicas: 1,
            cloud_name: "openstack".into(),
            config: None,
            resync_interval: Duration::from_secs(60),
            wait_for_driver: true,
            release: CinderOperatorRelease::Current,
            controller_health_port: None,
        }
    }
}

/// `fixtures/cinder-operator/`.
pub fn operator_fixtures_dir() -> std::path::PathBuf {
    super::super::binaries::workspace_root().join("fixtures/cinder-operator")
}

/// `(status, reason, message)` of condition `type_` of an object (empty strings when
/// absent).
pub fn condition_of(object: &DynamicObject, type_: &str) -> (String, String, String) {
    let text = |key: &str| {
        condition(object, type_)
            .and_then(|c| c.get(key))
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string()
    };
    (text("status"), text("reason"), text("message"))
}

/// Whether an object's conditions say Available=True, Progressing=False, Degraded=False.
fn available(object: &DynamicObject) -> bool {
    let is = |type_: &str, status: &str| condition_of(object, type_).0 == status;
    is("Available", "True") && is("Progressing", "False") && is("Degraded", "False")
}

impl CinderCsiEnvironment {
    /// The operator's way: the credentials Secret, the ConfigMap, the operator manifests,
    /// then (optionally) the waits until the operator reports Available and the driver is
    /// ready on every node.
    pub(super) async fn deploy_operator(&mut self, operator: &CinderOperatorOptions) -> Result<()> {
        let mut operator = operator.clone();
        if operator.controller_health_port.is_none() {
            operator.controller_health_port = Some(free_port()?);
        }
        // Remembered (with the port) for an upgrade, which applies the same values again.
        self.options.install = CinderInstall::Operator(operator.clone());
        let operator = &operator;
        self.create_credentials_secret(&operator.cloud_name).await?;
        let mut data = BTreeMap::new();
        let mut config = operator.config.clone().unwrap_or_default();
        if let Some(limit) = self.options.attach_limit {
            config.push_str(&format!(
                "\n[BlockStorage]\nnode-volume-attach-limit = {limit}\n"
            ));
        }
        if !config.trim().is_empty() {
            data.insert(CONFIG_KEY.to_string(), config);
        }
        if let Some(ca) = self.cloud.ca_pem() {
            data.insert(CA_BUNDLE_KEY.to_string(), ca);
        }
        if !data.is_empty() {
            self.create_config_map(data).await?;
        }
        let vars = self.operator_vars(operator)?;
        let dir = operator_fixtures_dir();
        for file in ["rbac.yaml", "operator.yaml", "clustercsidriver.yaml"] {
            self.applier.apply_file(&dir.join(file), &vars).await?;
        }
        if operator.wait_for_driver {
            let timeout = self.options.ready_timeout;
            self.wait_operator_available(timeout).await?;
            self.wait_pod_ready(CINDER_CONTROLLER_SELECTOR, timeout)
                .await?;
            kube_support::wait::wait_csi_drivers(
                &self.client(),
                &self.cluster.node_names(),
                &[CINDER_DRIVER_NAME],
                timeout,
            )
            .await?;
        }
        Ok(())
    }

    /// The values of the operator manifests' `${VARS}`.
    pub(super) fn operator_vars(
        &self,
        operator: &CinderOperatorOptions,
    ) -> Result<BTreeMap<String, String>> {
        let port = operator.controller_health_port.ok_or_else(|| {
            Error::Unexpected("the operator's controller health port is not known".into())
        })?;
        Ok(BTreeMap::from([
            ("NAMESPACE".to_string(), self.options.namespace.clone()),
            (
                "OPERATOR_REPLICAS".to_string(),
                operator.replicas.to_string(),
            ),
            (
                "DISK_ROOT".to_string(),
                self.disk_root().display().to_string(),
            ),
            ("CONTROLLER_HEALTH_PORT".to_string(), port.to_string()),
            (
                "OPERATOR_RELEASE".to_string(),
                operator.release.as_str().to_string(),
            ),
            (
                "RESYNC_INTERVAL".to_string(),
                format!("{}ms", operator.resync_interval.as_millis()),
            ),
        ]))
    }

    /// The Secret `cloud-credentials`: the fake cloud's clouds.yaml, without `cacert` (a
    /// file of this host; the CA comes from the ConfigMap, as on OpenShift).
    async fn create_credentials_secret(&self, cloud_name: &str) -> Result<()> {
        let namespace = &self.options.namespace;
        let clouds_yaml: String = self
            .cloud
            .clouds_yaml(cloud_name)
            .lines()
            .filter(|line| !line.trim_start().starts_with("cacert:"))
            .map(|line| format!("{line}\n"))
            .collect();
        let mut secret = Secret::default();
        secret.metadata.name = Some(CINDER_CREDENTIALS_SECRET.into());
        secret.string_data = Some(BTreeMap::from([(CLOUDS_YAML_KEY.to_string(), clouds_yaml)]));
        let secrets: Api<Secret> = Api::namespaced(self.client(), namespace);
        // The error names the Secret, never its data.
        secrets
            .create(&PostParams::default(), &secret)
            .await
            .map_err(Error::kube(format!(
                "creating Secret {namespace}/{CINDER_CREDENTIALS_SECRET}"
            )))?;
        Ok(())
    }

    async fn create_config_map(&self, data: BTreeMap<String, String>) -> Result<()> {
        let namespace = &self.options.namespace;
        let mut map = ConfigMap::default();
        map.metadata.name = Some(CINDER_CONFIG_MAP.into());
        map.data = Some(data);
        let maps: Api<ConfigMap> = Api::namespaced(self.client(), namespace);
        maps.create(&PostParams::default(), &map)
            .await
            .map_err(Error::kube(format!(
                "creating ConfigMap {namespace}/{CINDER_CONFIG_MAP}"
            )))?;
        Ok(())
    }

    /// Waits until the ClusterOperator says Available=True, Progressing=False,
    /// Degraded=False; returns it.
    pub async fn wait_operator_available(&self, timeout: Duration) -> Result<DynamicObject> {
        self.wait_cluster_operator(
            "Available, not Progressing, not Degraded",
            timeout,
            available,
        )
        .await
    }

    /// Waits until the ClusterOperator satisfies `ready`; the error shows the conditions
    /// last seen and the driver's pods.
    pub async fn wait_cluster_operator(
        &self,
        what: &str,
        timeout: Duration,
        ready: impl Fn(&DynamicObject) -> bool,
    ) -> Result<DynamicObject> {
        let api: Api<DynamicObject> = Api::all_with(self.client(), &cluster_operator_resource());
        self.wait_object(
            &api,
            &format!("ClusterOperator {CINDER_CLUSTER_OPERATOR}"),
            CINDER_CLUSTER_OPERATOR,
            what,
            timeout,
            ready,
        )
        .await
    }

    /// Waits until the ClusterCSIDriver `cinder.csi.openstack.org` satisfies `ready`; the
    /// error shows the conditions last seen and the driver's pods.
    pub async fn wait_cluster_csi_driver(
        &self,
        what: &str,
        timeout: Duration,
        ready: impl Fn(&DynamicObject) -> bool,
    ) -> Result<DynamicObject> {
        let api: Api<DynamicObject> = Api::all_with(self.client(), &cluster_csi_driver_resource());
        self.wait_object(
            &api,
            &format!("ClusterCSIDriver {CINDER_DRIVER_NAME}"),
            CINDER_DRIVER_NAME,
            what,
            timeout,
            ready,
        )
        .await
    }

    /// Waits until the ClusterCSIDriver's condition `type_` has `status`, and `reason` if
    /// given, and a message containing each of `message_contains`; returns the object.
    pub async fn wait_driver_condition(
        &self,
        type_: &str,
        status: &str,
        reason: Option<&str>,
        message_contains: &[&str],
        timeout: Duration,
    ) -> Result<DynamicObject> {
        let mut what = format!("{type_}={status}");
        if let Some(reason) = reason {
            what.push_str(&format!(" reason {reason}"));
        }
        if !message_contains.is_empty() {
            what.push_str(&format!(" message naming {message_contains:?}"));
        }
        self.wait_cluster_csi_driver(&what, timeout, |object| {
            let (found, found_reason, message) = condition_of(object, type_);
            found == status
                && reason.is_none_or(|r| r == found_reason)
                && message_contains.iter().all(|m| message.contains(m))
        })
        .await
    }

    async fn wait_object(
        &self,
        api: &Api<DynamicObject>,
        kind_and_name: &str,
        name: &str,
        what: &str,
        timeout: Duration,
        ready: impl Fn(&DynamicObject) -> bool,
    ) -> Result<DynamicObject> {
        let ready = &ready;
        let found = wait::wait_until(format!("{kind_and_name}: {what}"), timeout, || {
            let api = api.clone();
            async move {
                match api.get_opt(name).await.map_err(|e| e.to_string())? {
                    Some(object) if ready(&object) => Ok(Some(object)),
                    Some(object) => Err(describe_conditions(&object)),
                    None => Err(format!("no {kind_and_name} yet")),
                }
            }
        })
        .await;
        match found {
            Ok(object) => Ok(object),
            Err(e) => Err(Error::Diagnosed {
                what: format!("waiting for {kind_and_name}: {what}"),
                cause: e.to_string(),
                diagnostics: self.diagnostics().await,
            }),
        }
    }

    /// The ClusterCSIDriver `cinder.csi.openstack.org`.
    pub async fn cluster_csi_driver(&self) -> Result<DynamicObject> {
        let api: Api<DynamicObject> = Api::all_with(self.client(), &cluster_csi_driver_resource());
        api.get(CINDER_DRIVER_NAME)
            .await
            .map_err(Error::kube(format!(
                "reading ClusterCSIDriver {CINDER_DRIVER_NAME}"
            )))
    }

    /// Whether the environment installed the driver by its operator.
    pub fn installed_by_operator(&self) -> bool {
        matches!(self.options.install, CinderInstall::Operator(_))
    }

    /// After the applied objects are gone: deletes what the operator made that outlives it
    /// by design (its StorageClass, the ClusterOperator) and waits until no cluster-scoped
    /// object it labelled is left (the garbage collector removes those the ClusterCSIDriver
    /// owned).
    pub(super) async fn remove_operator_leftovers(&self, timeout: Duration) -> Result<()> {
        let client = self.client();
        let managed = ListParams::default().labels(CINDER_OPERATOR_MANAGED_SELECTOR);
        let classes: Api<StorageClass> = Api::all(client.clone());
        for class in classes
            .list_metadata(&managed)
            .await
            .map_err(Error::kube("listing the Cinder operator's StorageClasses"))?
        {
            let name = class.metadata.name.unwrap_or_default();
            ignore_not_found(classes.delete(&name, &DeleteParams::default()).await)
                .map_err(Error::kube(format!("deleting StorageClass {name}")))?;
        }
        let operators: Api<DynamicObject> =
            Api::all_with(client.clone(), &cluster_operator_resource());
        ignore_not_found(
            operators
                .delete(CINDER_CLUSTER_OPERATOR, &DeleteParams::default())
                .await,
        )
        .map_err(Error::kube(format!(
            "deleting ClusterOperator {CINDER_CLUSTER_OPERATOR}"
        )))?;
        let kinds: [(ApiResource, &str); 4] = [
            (ApiResource::erase::<StorageClass>(&()), "StorageClass"),
            (ApiResource::erase::<ClusterRole>(&()), "ClusterRole"),
            (
                ApiResource::erase::<ClusterRoleBinding>(&()),
                "ClusterRoleBinding",
            ),
            (ApiResource::erase::<CSIDriver>(&()), "CSIDriver"),
        ];
        wait::wait_until("no object of the Cinder operator left", timeout, || {
            let client = client.clone();
            let kinds = kinds.clone();
            let managed = managed.clone();
            async move {
                let mut left = Vec::new();
                for (resource, kind) in &kinds {
                    let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
                    let list = api
                        .list_metadata(&managed)
                        .await
                        .map_err(|e| e.to_string())?;
                    left.extend(
                        list.items
                            .into_iter()
                            .map(|o| format!("{kind} {}", o.metadata.name.unwrap_or_default())),
                    );
                }
                if left.is_empty() {
                    Ok(Some(()))
                } else {
                    Err(left.join(", "))
                }
            }
        })
        .await?;
        Ok(())
    }
}
