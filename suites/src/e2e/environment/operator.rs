//! Installing the driver the operator's way: the operator from `fixtures/manila-operator/`,
//! the `cloud-credentials` Secret (clouds.yaml) and, for a TLS cloud, the CA ConfigMap; the
//! operator then installs the driver. Teardown removes what the operator made that outlives
//! it by design (its StorageClasses, the ClusterOperator).
//!
//! The operator may be installed as release N-1 ([`OperatorOptions::PREVIOUS_RELEASE`]) and
//! upgraded to the current release the way a user would: the operator manifests applied again
//! with the new release ([`ManilaCsiEnvironment::upgrade_operator`]), a rollout of the
//! operator's Deployment.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube_support::wait;

use super::super::binaries::workspace_root;
use super::super::error::{Error, Result};
use super::super::manifests::{self, Applier};
use super::super::timeline::Timeline;
use super::teardown::ignore_not_found;
use super::{CONTROLLER_SELECTOR, Install, ManilaCsiEnvironment};

/// The label on everything the operator creates.
pub const OPERATOR_MANAGED_SELECTOR: &str =
    "app.kubernetes.io/managed-by=manila-csi-driver-operator";
/// The label selecting the operator's pods.
pub const OPERATOR_SELECTOR: &str = "app=manila-csi-driver-operator";
/// The operator's credentials Secret.
pub const CREDENTIALS_SECRET: &str = "cloud-credentials";
/// The ConfigMap with the CA bundle.
pub const CA_CONFIG_MAP: &str = "cloud-provider-config";
/// The Secret the operator writes for the driver.
pub const DRIVER_SECRET: &str = "csi-manila-secrets";
/// The ClusterOperator the operator reports on.
pub const CLUSTER_OPERATOR: &str = "manila-csi-driver-operator";
/// The operator's Deployment (`fixtures/manila-operator/operator.yaml`).
pub const OPERATOR_DEPLOYMENT: &str = "manila-csi-driver-operator";
/// The operator's `--metrics-address`: a port the kernel picks for each replica (the
/// embedded cluster's pods share one network); each logs `serving /metrics bound=<address>`.
pub const OPERATOR_METRICS_ADDRESS: &str = "127.0.0.1:0";

/// Which release of the operator's driver objects the operator installs: its
/// `OPERATOR_RELEASE` (`--release`). Reach the values through
/// [`OperatorOptions::PREVIOUS_RELEASE`] and [`OperatorOptions::CURRENT_RELEASE`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OperatorRelease {
    /// N-1: the older layout (no resizer, one ClusterRole for every sidecar, the CA mounted
    /// from the ConfigMap, classes without expansion), reporting its own version.
    Previous,
    /// The current release.
    #[default]
    Current,
}

impl OperatorRelease {
    /// The value of `${OPERATOR_RELEASE}`.
    pub fn as_str(self) -> &'static str {
        match self {
            OperatorRelease::Previous => "previous",
            OperatorRelease::Current => "current",
        }
    }

    /// The version the operator reports for this release (`status.version`, the
    /// ClusterOperator's versions): the version of the `manila-operator` crate of this
    /// workspace, with the suffix `-previous` for N-1 (see the operator's README,
    /// "Releases").
    pub fn version(self) -> Result<String> {
        let path = workspace_root().join("operators/manila-operator/Cargo.toml");
        let text = std::fs::read_to_string(&path).map_err(Error::io("reading", &path))?;
        let version = package_version(&text).ok_or_else(|| Error::Fixture {
            path: path.clone(),
            reason: "no version in [package]".into(),
        })?;
        Ok(match self {
            OperatorRelease::Previous => format!("{version}-previous"),
            OperatorRelease::Current => version,
        })
    }
}

/// The `version` of a Cargo manifest's `[package]` section.
fn package_version(manifest: &str) -> Option<String> {
    let mut in_package = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package && let Some(value) = line.strip_prefix("version") {
            let value = value.trim_start().strip_prefix('=')?.trim();
            return Some(value.trim_matches('"').to_string());
        }
    }
    None
}

/// How the operator is installed.
#[derive(Debug, Clone)]
pub struct OperatorOptions {
    /// Wait until the operator reports the driver installed and ready (default true); off for
    /// scenarios where Manila is missing.
    pub wait_for_driver: bool,
    /// How often the operator lists share types (default 2 s, the test's interval).
    pub share_type_sync_interval: Duration,
    /// Operator replicas (default 1).
    pub replicas: u32,
    /// The clouds.yaml cloud name the Secret holds (default `openstack`).
    pub cloud_name: String,
    /// The release the operator installs (default the current one; N-1 is
    /// [`OperatorOptions::PREVIOUS_RELEASE`]).
    pub release: OperatorRelease,
    /// The driver controller plugin's liveness port (`--controller-health-port`; default: a
    /// free port chosen at start, kept for an upgrade).
    pub controller_health_port: Option<u16>,
    /// The Manila and the NFS node plugins' liveness ports (`--node-health-port`,
    /// `--nfs-node-health-port`; default: free ports chosen at start, kept for an upgrade).
    pub node_health_ports: Option<(u16, u16)>,
}

impl OperatorOptions {
    /// Release N-1 of the operator's driver objects.
    pub const PREVIOUS_RELEASE: OperatorRelease = OperatorRelease::Previous;
    /// The current release.
    pub const CURRENT_RELEASE: OperatorRelease = OperatorRelease::Current;
}

impl Default for OperatorOptions {
    fn default() -> Self {
        OperatorOptions {
            wait_for_driver: true,
            share_type_sync_interval: Duration::from_secs(2),
            replicas: 1,
            cloud_name: "openstack".into(),
            release: OperatorRelease::Current,
            controller_health_port: None,
            node_health_ports: None,
        }
    }
}

/// When the steps of [`ManilaCsiEnvironment::upgrade_operator_and_wait`] were done.
#[derive(Debug, Clone, Copy)]
pub struct UpgradeTimings {
    /// When the operator manifests were applied.
    pub applied: Instant,
    /// From the apply until the operator's Deployment had rolled out.
    pub rolled_out: Duration,
    /// From the apply until the operator reported the new version, Available.
    pub available: Duration,
}

/// The ClusterCSIDriver / ClusterOperator resources, for dynamic access.
pub fn cluster_csi_driver_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("operator.openshift.io", "v1", "ClusterCSIDriver"),
        "clustercsidrivers",
    )
}

/// The ClusterOperator resource, for dynamic access.
pub fn cluster_operator_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("config.openshift.io", "v1", "ClusterOperator"),
        "clusteroperators",
    )
}

/// The status of condition `type_` in an object's `status.conditions`.
pub fn condition<'a>(object: &'a DynamicObject, type_: &str) -> Option<&'a serde_json::Value> {
    object
        .data
        .get("status")?
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(|t| t.as_str()) == Some(type_))
}

/// The `(name, version)` pairs of a ClusterOperator's `status.versions`.
pub fn operand_versions(object: &DynamicObject) -> Vec<(String, String)> {
    object
        .data
        .pointer("/status/versions")
        .and_then(|v| v.as_array())
        .into_iter()
        .flatten()
        .map(|v| {
            let text = |key: &str| {
                v.get(key)
                    .and_then(|t| t.as_str())
                    .unwrap_or("")
                    .to_string()
            };
            (text("name"), text("version"))
        })
        .collect()
}

/// `fixtures/manila-operator/`.
fn operator_fixtures_dir() -> std::path::PathBuf {
    manifests::fixtures_dir().join("../manila-operator")
}

/// `type=status (reason: message)` of every condition, for failure messages.
pub fn describe_conditions(object: &DynamicObject) -> String {
    let Some(conditions) = object
        .data
        .get("status")
        .and_then(|s| s.get("conditions"))
        .and_then(|c| c.as_array())
    else {
        return "no conditions yet".into();
    };
    conditions
        .iter()
        .map(|c| {
            let text = |key: &str| c.get(key).and_then(|v| v.as_str()).unwrap_or("");
            let mut line = format!("{}={}", text("type"), text("status"));
            if !text("reason").is_empty() || !text("message").is_empty() {
                line.push_str(&format!(" ({}: {})", text("reason"), text("message")));
            }
            line
        })
        .collect::<Vec<_>>()
        .join("; ")
}

impl ManilaCsiEnvironment {
    /// The operator's way: Secret (+ CA), operator manifests, then (optionally) the waits.
    /// The options actually used (the liveness port chosen) are kept in the environment's
    /// options for [`ManilaCsiEnvironment::upgrade_operator`].
    pub(super) async fn deploy_operator(
        &mut self,
        operator: &OperatorOptions,
        vars: &BTreeMap<String, String>,
    ) -> Result<()> {
        let mut operator = operator.clone();
        if operator.controller_health_port.is_none() {
            operator.controller_health_port = vars
                .get("CONTROLLER_HEALTH_PORT")
                .and_then(|port| port.parse().ok());
        }
        if operator.node_health_ports.is_none() {
            let port = |name: &str| vars.get(name).and_then(|port| port.parse().ok());
            operator.node_health_ports = port("NODE_HEALTH_PORT").zip(port("NFS_NODE_HEALTH_PORT"));
        }
        self.options.install = Install::Operator(operator.clone());
        self.create_credentials_secret(&operator.cloud_name).await?;
        if let Some(ca) = self.cloud.fake().and_then(|c| c.ca_pem()) {
            self.create_ca_config_map(&ca).await?;
        }
        let vars = self.operator_vars(&operator)?;
        let dir = operator_fixtures_dir();
        for file in ["rbac.yaml", "operator.yaml", "clustercsidriver.yaml"] {
            self.applier.apply_file(&dir.join(file), &vars).await?;
        }
        let timeout = self.options.ready_timeout;
        if operator.wait_for_driver {
            self.wait_operator_available(timeout).await?;
            self.wait_pod_ready(CONTROLLER_SELECTOR, timeout).await?;
            self.wait_registered(timeout).await?;
        }
        Ok(())
    }

    /// The values of the operator manifests' `${VARS}` for `operator`.
    fn operator_vars(&self, operator: &OperatorOptions) -> Result<BTreeMap<String, String>> {
        let port = operator.controller_health_port.ok_or_else(|| {
            Error::Unexpected("the operator's controller health port is not known".into())
        })?;
        let (node_port, nfs_node_port) = operator.node_health_ports.ok_or_else(|| {
            Error::Unexpected("the operator's node plugin health ports are not known".into())
        })?;
        Ok(BTreeMap::from([
            ("NAMESPACE".to_string(), self.options.namespace.clone()),
            (
                "EXPORT_ROOT".to_string(),
                self.export_root.display().to_string(),
            ),
            ("CONTROLLER_HEALTH_PORT".to_string(), port.to_string()),
            ("NODE_HEALTH_PORT".to_string(), node_port.to_string()),
            (
                "NFS_NODE_HEALTH_PORT".to_string(),
                nfs_node_port.to_string(),
            ),
            (
                "SHARE_TYPE_SYNC_INTERVAL".to_string(),
                format!("{}ms", operator.share_type_sync_interval.as_millis()),
            ),
            (
                "OPERATOR_REPLICAS".to_string(),
                operator.replicas.to_string(),
            ),
            (
                "METRICS_ADDRESS".to_string(),
                OPERATOR_METRICS_ADDRESS.to_string(),
            ),
            (
                "OPERATOR_RELEASE".to_string(),
                operator.release.as_str().to_string(),
            ),
        ]))
    }

    /// Upgrades (or downgrades) the installed operator to `release` the way a user would:
    /// the operator manifests (`rbac.yaml`, `operator.yaml`) applied again with the same
    /// values and the new `${OPERATOR_RELEASE}` — a rollout of the operator's Deployment —
    /// then waits until the rollout is complete: every replica updated and available, none
    /// of the old ones left. What the new operator then does to the driver is for the caller
    /// to wait on (e.g. [`ManilaCsiEnvironment::wait_operator_version`]).
    pub async fn upgrade_operator(&self, release: OperatorRelease) -> Result<()> {
        let Install::Operator(installed) = &self.options.install else {
            return Err(Error::Unexpected(
                "the environment did not install the operator (Install::Operator)".into(),
            ));
        };
        let operator = OperatorOptions {
            release,
            ..installed.clone()
        };
        let vars = self.operator_vars(&operator)?;
        // The same field manager as the environment's applier, which already remembers
        // these objects for teardown.
        let mut applier = Applier::new(self.client());
        let dir = operator_fixtures_dir();
        for file in ["rbac.yaml", "operator.yaml"] {
            applier.apply_file(&dir.join(file), &vars).await?;
        }
        tracing::info!(
            release = release.as_str(),
            "operator manifests applied: rolling out"
        );
        self.wait_operator_rollout(self.options.ready_timeout).await
    }

    /// [`ManilaCsiEnvironment::upgrade_operator`] to `release`, then
    /// [`ManilaCsiEnvironment::wait_operator_version`] with its version: the upgrade as a
    /// user sees it, from applying the manifests until the operator reports the new version,
    /// Available, not Progressing, not Degraded (the driver rolled). Each step is recorded
    /// on `timeline`; returns when each was done, counted from the apply.
    pub async fn upgrade_operator_and_wait(
        &self,
        release: OperatorRelease,
        timeout: Duration,
        timeline: &Timeline,
    ) -> Result<UpgradeTimings> {
        let version = release.version()?;
        let applied = Instant::now();
        timeline.record(
            "inject",
            format!(
                "operator manifests applied with release {} ({version})",
                release.as_str()
            ),
        );
        self.upgrade_operator(release).await?;
        let rolled_out = applied.elapsed();
        timeline.record("operator", "operator Deployment rolled out");
        self.wait_operator_version(&version, timeout).await?;
        timeline.record(
            "operator",
            format!("{version} Available, not Progressing, not Degraded"),
        );
        Ok(UpgradeTimings {
            applied,
            rolled_out,
            available: applied.elapsed(),
        })
    }

    /// Waits until the operator's Deployment has rolled out: its current generation
    /// observed, every replica updated and available, no old replica left.
    pub async fn wait_operator_rollout(&self, timeout: Duration) -> Result<()> {
        let api: Api<Deployment> = Api::namespaced(self.client(), &self.options.namespace);
        let found = wait::wait_until(
            format!("Deployment {OPERATOR_DEPLOYMENT} rolled out"),
            timeout,
            || {
                let api = api.clone();
                async move {
                    let deployment = api
                        .get(OPERATOR_DEPLOYMENT)
                        .await
                        .map_err(|e| e.to_string())?;
                    let wanted = deployment
                        .spec
                        .as_ref()
                        .and_then(|s| s.replicas)
                        .unwrap_or(1);
                    let status = deployment.status.unwrap_or_default();
                    let observed = status.observed_generation.unwrap_or(0)
                        >= deployment.metadata.generation.unwrap_or(0);
                    let updated = status.updated_replicas.unwrap_or(0);
                    let available = status.available_replicas.unwrap_or(0);
                    let total = status.replicas.unwrap_or(0);
                    if observed && updated == wanted && available == wanted && total == wanted {
                        Ok(Some(()))
                    } else {
                        Err(format!(
                            "generation observed: {observed}; replicas {total}, updated \
                             {updated}, available {available} of {wanted}"
                        ))
                    }
                }
            },
        )
        .await;
        match found {
            Ok(()) => Ok(()),
            Err(e) => Err(Error::Diagnosed {
                what: format!("waiting for Deployment {OPERATOR_DEPLOYMENT} to roll out"),
                cause: e.to_string(),
                diagnostics: self.diagnostics().await,
            }),
        }
    }

    /// Waits until the ClusterCSIDriver's `status.version` and every version of the
    /// ClusterOperator are `version`, and the ClusterOperator is Available, not Progressing,
    /// not Degraded; returns the ClusterOperator. The error shows the versions and
    /// conditions last seen.
    pub async fn wait_operator_version(
        &self,
        version: &str,
        timeout: Duration,
    ) -> Result<DynamicObject> {
        let drivers: Api<DynamicObject> =
            Api::all_with(self.client(), &cluster_csi_driver_resource());
        let operators: Api<DynamicObject> =
            Api::all_with(self.client(), &cluster_operator_resource());
        let found = wait::wait_until(
            format!("version {version} reported, ClusterOperator {CLUSTER_OPERATOR} Available"),
            timeout,
            || {
                let drivers = drivers.clone();
                let operators = operators.clone();
                async move {
                    let driver = drivers
                        .get(super::DRIVER_NAME)
                        .await
                        .map_err(|e| e.to_string())?;
                    let operator = operators
                        .get_opt(CLUSTER_OPERATOR)
                        .await
                        .map_err(|e| e.to_string())?
                        .ok_or("no ClusterOperator yet")?;
                    let driver_version = driver
                        .data
                        .pointer("/status/version")
                        .and_then(|v| v.as_str())
                        .unwrap_or("")
                        .to_string();
                    let versions = operand_versions(&operator);
                    let is = |type_: &str, status: &str| {
                        condition(&operator, type_)
                            .and_then(|c| c.get("status"))
                            .and_then(|s| s.as_str())
                            == Some(status)
                    };
                    let reported = driver_version == version
                        && !versions.is_empty()
                        && versions.iter().all(|(_, v)| v == version);
                    let healthy = is("Available", "True")
                        && is("Progressing", "False")
                        && is("Degraded", "False");
                    if reported && healthy {
                        Ok(Some(operator))
                    } else {
                        Err(format!(
                            "ClusterCSIDriver version {driver_version:?}, ClusterOperator \
                             versions {versions:?}; {}",
                            describe_conditions(&operator)
                        ))
                    }
                }
            },
        )
        .await;
        match found {
            Ok(object) => Ok(object),
            Err(e) => Err(Error::Diagnosed {
                what: format!("waiting for the operator to report version {version}"),
                cause: e.to_string(),
                diagnostics: self.diagnostics().await,
            }),
        }
    }

    async fn create_credentials_secret(&self, cloud_name: &str) -> Result<()> {
        let secrets: Api<Secret> = Api::namespaced(self.client(), &self.options.namespace);
        let mut secret = Secret::default();
        secret.metadata.name = Some(CREDENTIALS_SECRET.into());
        // As on OpenShift, the CA comes from the `cloud-provider-config` ConfigMap, not from
        // a `cacert` path of clouds.yaml (a file of this host, not of the operator's pod).
        let cloud = self.cloud.fake().ok_or_else(|| {
            Error::Unexpected("installing the driver by its operator needs the fake cloud".into())
        })?;
        let clouds_yaml: String = cloud
            .clouds_yaml(cloud_name)
            .lines()
            .filter(|line| !line.trim_start().starts_with("cacert:"))
            .map(|line| format!("{line}\n"))
            .collect();
        secret.string_data = Some(BTreeMap::from([("clouds.yaml".to_string(), clouds_yaml)]));
        // The error names the Secret, never its data.
        secrets
            .create(&PostParams::default(), &secret)
            .await
            .map_err(Error::kube(format!(
                "creating Secret {}/{CREDENTIALS_SECRET}",
                self.options.namespace
            )))?;
        Ok(())
    }

    async fn create_ca_config_map(&self, ca: &str) -> Result<()> {
        let maps: Api<ConfigMap> = Api::namespaced(self.client(), &self.options.namespace);
        let mut map = ConfigMap::default();
        map.metadata.name = Some(CA_CONFIG_MAP.into());
        map.data = Some(BTreeMap::from([(
            "ca-bundle.pem".to_string(),
            ca.to_string(),
        )]));
        maps.create(&PostParams::default(), &map)
            .await
            .map_err(Error::kube(format!(
                "creating ConfigMap {}/{CA_CONFIG_MAP}",
                self.options.namespace
            )))?;
        Ok(())
    }

    /// Waits until the ClusterOperator says Available=True, Progressing=False, Degraded=False.
    pub async fn wait_operator_available(&self, timeout: Duration) -> Result<DynamicObject> {
        self.wait_cluster_operator("Available, not Progressing, not Degraded", timeout, |o| {
            let is = |type_: &str, status: &str| {
                condition(o, type_)
                    .and_then(|c| c.get("status"))
                    .and_then(|s| s.as_str())
                    == Some(status)
            };
            is("Available", "True") && is("Progressing", "False") && is("Degraded", "False")
        })
        .await
    }

    /// Waits until the ClusterOperator satisfies `ready`; the error shows its conditions.
    pub async fn wait_cluster_operator(
        &self,
        what: &str,
        timeout: Duration,
        ready: impl Fn(&DynamicObject) -> bool,
    ) -> Result<DynamicObject> {
        let api: Api<DynamicObject> = Api::all_with(self.client(), &cluster_operator_resource());
        let ready = &ready;
        let found = wait::wait_until(
            format!("ClusterOperator {CLUSTER_OPERATOR}: {what}"),
            timeout,
            || {
                let api = api.clone();
                async move {
                    match api
                        .get_opt(CLUSTER_OPERATOR)
                        .await
                        .map_err(|e| e.to_string())?
                    {
                        Some(object) if ready(&object) => Ok(Some(object)),
                        Some(object) => Err(describe_conditions(&object)),
                        None => Err("no ClusterOperator yet".to_string()),
                    }
                }
            },
        )
        .await;
        match found {
            Ok(object) => Ok(object),
            Err(e) => Err(Error::Diagnosed {
                what: format!("waiting for ClusterOperator {CLUSTER_OPERATOR}: {what}"),
                cause: e.to_string(),
                diagnostics: self.diagnostics().await,
            }),
        }
    }

    /// The ClusterCSIDriver `manila.csi.openstack.org`.
    pub async fn cluster_csi_driver(&self) -> Result<DynamicObject> {
        let api: Api<DynamicObject> = Api::all_with(self.client(), &cluster_csi_driver_resource());
        api.get(super::DRIVER_NAME)
            .await
            .map_err(Error::kube(format!(
                "reading ClusterCSIDriver {}",
                super::DRIVER_NAME
            )))
    }

    /// After the applied objects are gone: deletes what the operator made that outlives it
    /// by design (its StorageClasses, the ClusterOperator) and waits until no cluster-scoped
    /// object it labelled is left (the garbage collector removes those it owned).
    pub(super) async fn remove_operator_leftovers(&self, timeout: Duration) -> Result<()> {
        let client = self.client();
        let classes: Api<StorageClass> = Api::all(client.clone());
        let managed = ListParams::default().labels(OPERATOR_MANAGED_SELECTOR);
        for class in classes
            .list_metadata(&managed)
            .await
            .map_err(Error::kube("listing the operator's StorageClasses"))?
        {
            let name = class.metadata.name.unwrap_or_default();
            ignore_not_found(classes.delete(&name, &DeleteParams::default()).await)
                .map_err(Error::kube(format!("deleting StorageClass {name}")))?;
        }
        let operators: Api<DynamicObject> =
            Api::all_with(client.clone(), &cluster_operator_resource());
        ignore_not_found(
            operators
                .delete(CLUSTER_OPERATOR, &DeleteParams::default())
                .await,
        )
        .map_err(Error::kube(format!(
            "deleting ClusterOperator {CLUSTER_OPERATOR}"
        )))?;
        let kinds: [(ApiResource, &str); 4] = [
            (ApiResource::erase::<StorageClass>(&()), "StorageClass"),
            (
                ApiResource::erase::<k8s_openapi::api::rbac::v1::ClusterRole>(&()),
                "ClusterRole",
            ),
            (
                ApiResource::erase::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>(&()),
                "ClusterRoleBinding",
            ),
            (
                ApiResource::erase::<k8s_openapi::api::storage::v1::CSIDriver>(&()),
                "CSIDriver",
            ),
        ];
        wait::wait_until("no object of the operator left", timeout, || {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_package_version_is_read_from_the_package_section_only() {
        let manifest = "[workspace]\nversion = \"9\"\n[package]\nname = \"x\"\nversion = \"0.1.0\"\n[dependencies]\nversion = \"2\"\n";
        assert_eq!(package_version(manifest).as_deref(), Some("0.1.0"));
        assert_eq!(package_version("[package]\nname = \"x\"\n"), None);
    }

    #[test]
    fn the_releases_report_the_operator_crates_version() {
        let current = OperatorOptions::CURRENT_RELEASE.version().unwrap();
        assert!(!current.is_empty());
        assert_eq!(
            OperatorOptions::PREVIOUS_RELEASE.version().unwrap(),
            format!("{current}-previous")
        );
        assert_eq!(OperatorOptions::default().release.as_str(), "current");
    }
}
