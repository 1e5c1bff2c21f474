//! Installing the driver the operator's way: the operator from `fixtures/manila-operator/`,
//! the `cloud-credentials` Secret (clouds.yaml) and, for a TLS cloud, the CA ConfigMap; the
//! operator then installs the driver. Teardown removes what the operator made that outlives
//! it by design (its StorageClasses, the ClusterOperator).

use std::collections::BTreeMap;
use std::time::Duration;

use harness::cluster::wait;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};

use super::super::error::{Error, Result};
use super::super::manifests;
use super::teardown::ignore_not_found;
use super::{CONTROLLER_SELECTOR, ManilaCsiEnvironment};

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
}

impl Default for OperatorOptions {
    fn default() -> Self {
        OperatorOptions {
            wait_for_driver: true,
            share_type_sync_interval: Duration::from_secs(2),
            replicas: 1,
            cloud_name: "openstack".into(),
        }
    }
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
    pub(super) async fn deploy_operator(
        &mut self,
        operator: &OperatorOptions,
        vars: &BTreeMap<String, String>,
    ) -> Result<()> {
        self.create_credentials_secret(&operator.cloud_name).await?;
        if let Some(ca) = self.cloud.ca_pem() {
            self.create_ca_config_map(&ca).await?;
        }
        let mut vars = vars.clone();
        vars.insert(
            "SHARE_TYPE_SYNC_INTERVAL".into(),
            format!("{}ms", operator.share_type_sync_interval.as_millis()),
        );
        vars.insert("OPERATOR_REPLICAS".into(), operator.replicas.to_string());
        let dir = manifests::fixtures_dir().join("../manila-operator");
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

    async fn create_credentials_secret(&self, cloud_name: &str) -> Result<()> {
        let secrets: Api<Secret> = Api::namespaced(self.client(), &self.options.namespace);
        let mut secret = Secret::default();
        secret.metadata.name = Some(CREDENTIALS_SECRET.into());
        // As on OpenShift, the CA comes from the `cloud-provider-config` ConfigMap, not from
        // a `cacert` path of clouds.yaml (a file of this host, not of the operator's pod).
        let clouds_yaml: String = self
            .cloud
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
