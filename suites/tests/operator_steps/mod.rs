//! The steps and waits of the operator tests: environment options, objects re-created or appearing, the ClusterCSIDriver's conditions and generation, the operator's Events.
//! Longer steps have modules of their own: `log_level` (logLevel and operatorLogLevel in the
//! pods), `liveness` (the node plugins' liveness sidecars answering), `metrics` (the operator's `/metrics` scraped), `management` (managementState
//! Force, a refused and a forced downgrade, Manila leaving the catalog).

pub mod liveness;
pub mod log_level;
pub mod management;
pub mod metrics;

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube_support::wait;
use std::time::Duration;
use suites::e2e::workload::claim;
use suites::e2e::{
    DEFAULT_STORAGE_CLASS, DRIVER_NAME, EnvironmentOptions, Install, ManilaCsiEnvironment,
    OperatorOptions, cluster_csi_driver_resource, condition, describe_conditions,
};

pub const LOGS: &str =
    "suites=info,cluster=info,control_plane=info,node_agent=info,pod_runtime=info";
pub const WAIT: Duration = Duration::from_secs(60);
pub const CONTROLLER_DEPLOYMENT: &str = "openstack-manila-csi-controllerplugin";

/// A 1Gi ReadWriteMany claim of the operator's default class.
pub fn rwx_claim(name: &str) -> k8s_openapi::api::core::v1::PersistentVolumeClaim {
    claim(name, Some(DEFAULT_STORAGE_CLASS), "1Gi", "ReadWriteMany")
}

/// Waits until `name` exists again with a uid other than `old_uid`.
pub async fn wait_recreated<K>(api: &Api<K>, name: &str, old_uid: Option<String>)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + 'static,
{
    wait::wait_until(format!("{name} re-created"), WAIT, || {
        let api = api.clone();
        let old_uid = old_uid.clone();
        async move {
            match api.get_opt(name).await.map_err(|e| e.to_string())? {
                Some(object) if object.meta().uid != old_uid => Ok(Some(())),
                Some(_) => Err("still the old one".to_string()),
                None => Err("gone".to_string()),
            }
        }
    })
    .await
    .unwrap();
}

pub fn operator_options(operator: OperatorOptions) -> EnvironmentOptions {
    EnvironmentOptions {
        nodes: 2,
        install: Install::Operator(operator),
        ..Default::default()
    }
}

pub fn status_of(object: &DynamicObject, type_: &str) -> (String, String, String) {
    let text = |key: &str| {
        condition(object, type_)
            .and_then(|c| c.get(key))
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string()
    };
    (text("status"), text("reason"), text("message"))
}

/// Waits until the ClusterCSIDriver's condition `type_` has `status` and its reason or
/// message contains `contains`.
pub async fn wait_driver_condition(
    env: &ManilaCsiEnvironment,
    type_: &str,
    status: &str,
    contains: &str,
) -> DynamicObject {
    let api: Api<DynamicObject> = Api::all_with(env.client(), &cluster_csi_driver_resource());
    wait::wait_until(
        format!("ClusterCSIDriver condition {type_}={status} mentioning {contains:?}"),
        WAIT,
        || {
            let api = api.clone();
            async move {
                let object = api.get(DRIVER_NAME).await.map_err(|e| e.to_string())?;
                let (found, reason, message) = status_of(&object, type_);
                if found == status && (reason.contains(contains) || message.contains(contains)) {
                    Ok(Some(object))
                } else {
                    Err(describe_conditions(&object))
                }
            }
        },
    )
    .await
    .unwrap()
}

pub async fn wait_exists<K>(api: &Api<K>, name: &str) -> K
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + 'static,
{
    wait::wait_until(format!("{name} to exist"), WAIT, || {
        let api = api.clone();
        let name = name.to_string();
        async move {
            match api.get_opt(&name).await.map_err(|e| e.to_string())? {
                Some(object) => Ok(Some(object)),
                None => Err("not there".to_string()),
            }
        }
    })
    .await
    .unwrap()
}

pub async fn operator_events(env: &ManilaCsiEnvironment) -> Vec<Event> {
    let events: Api<Event> = Api::namespaced(env.client(), "default");
    events
        .list(&ListParams::default().fields(&format!("involvedObject.name={DRIVER_NAME}")))
        .await
        .unwrap()
        .items
}

/// Waits until the operator has reconciled the ClusterCSIDriver's current generation.
pub async fn wait_generation_observed(env: &ManilaCsiEnvironment) {
    wait::wait_until(
        "the operator to observe the current generation",
        WAIT,
        || async move {
            let driver = env.cluster_csi_driver().await.map_err(|e| e.to_string())?;
            let generation = driver.metadata.generation;
            let observed = driver
                .data
                .get("status")
                .and_then(|s| s.get("observedGeneration"))
                .and_then(|g| g.as_i64());
            if observed.is_some() && observed == generation {
                Ok(Some(()))
            } else {
                Err(format!(
                    "observed generation {observed:?} of {generation:?}"
                ))
            }
        },
    )
    .await
    .unwrap();
}

pub async fn set_spec(env: &ManilaCsiEnvironment, spec: serde_json::Value) {
    let api: Api<DynamicObject> = Api::all_with(env.client(), &cluster_csi_driver_resource());
    api.patch(
        DRIVER_NAME,
        &PatchParams::default(),
        &Patch::Merge(&serde_json::json!({ "spec": spec })),
    )
    .await
    .unwrap();
}
