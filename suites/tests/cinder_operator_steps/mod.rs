//! The steps and waits of the Cinder operator test: the ClusterCSIDriver's spec, the operator's inputs (Secret, ConfigMap), objects re-created, driver pods replaced, hash annotations, the leader Lease.

pub mod upgrade;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube_support::wait;
use suites::e2e::cinder::{
    CINDER_CONFIG_HASH_ANNOTATION, CINDER_CONFIG_MAP, CINDER_DRIVER_NAME, CINDER_OPERATOR_LEASE,
    CinderCsiEnvironment,
};
use suites::e2e::cluster_csi_driver_resource;
use suites::e2e::workload::pod_is_ready;

pub const LOGS: &str = "e2e_cinder_operator=info,suites=info,cluster=info,control_plane=info,node_agent=info,pod_runtime=info,fakes=warn";
/// How long a condition or a re-created object may take.
pub const WAIT: Duration = Duration::from_secs(60);
/// How long the operator may take to put back a deleted child ("within seconds").
pub const HEAL: Duration = Duration::from_secs(20);

/// Merges `spec` into the ClusterCSIDriver's spec.
pub async fn set_spec(env: &CinderCsiEnvironment, spec: serde_json::Value) {
    let api: Api<DynamicObject> = Api::all_with(env.client(), &cluster_csi_driver_resource());
    api.patch(
        CINDER_DRIVER_NAME,
        &PatchParams::default(),
        &Patch::Merge(&serde_json::json!({ "spec": spec })),
    )
    .await
    .unwrap();
}

/// Merges `data` into the ConfigMap `cloud-provider-config` (a `null` value removes a key).
pub async fn patch_config_map(env: &CinderCsiEnvironment, data: serde_json::Value) {
    let maps: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    maps.patch(
        CINDER_CONFIG_MAP,
        &PatchParams::default(),
        &Patch::Merge(&serde_json::json!({ "data": data })),
    )
    .await
    .unwrap();
}

/// Waits until `name` exists again with a uid other than `old_uid`; how long it took.
pub async fn wait_recreated<K>(api: &Api<K>, name: &str, old_uid: Option<String>) -> Duration
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + 'static,
{
    let started = Instant::now();
    wait::wait_until(format!("{name} re-created"), HEAL, || {
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
    started.elapsed()
}

/// The config-hash annotation of a pod template.
pub fn template_hash(template: Option<&k8s_openapi::api::core::v1::PodTemplateSpec>) -> String {
    template
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.annotations.as_ref())
        .and_then(|a| a.get(CINDER_CONFIG_HASH_ANNOTATION).cloned())
        .unwrap_or_default()
}

/// The config hash of the controller Deployment's and the node DaemonSet's pod templates.
pub async fn driver_hashes(env: &CinderCsiEnvironment) -> (String, String) {
    let deployments: Api<Deployment> = Api::namespaced(env.client(), env.namespace());
    let daemon_sets: Api<DaemonSet> = Api::namespaced(env.client(), env.namespace());
    let deployment = deployments
        .get(suites::e2e::cinder::CINDER_CONTROLLER_DEPLOYMENT)
        .await
        .unwrap();
    let daemon_set = daemon_sets
        .get(suites::e2e::cinder::CINDER_NODE_DAEMON_SET)
        .await
        .unwrap();
    (
        template_hash(deployment.spec.as_ref().map(|s| &s.template)),
        template_hash(daemon_set.spec.as_ref().map(|s| &s.template)),
    )
}

/// The uids of the pods of the driver's namespace matching `selector`.
pub async fn pod_uids(env: &CinderCsiEnvironment, selector: &str) -> BTreeSet<String> {
    let pods: Api<Pod> = Api::namespaced(env.client(), env.namespace());
    pods.list(&ListParams::default().labels(selector))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| p.metadata.uid)
        .collect()
}

/// Waits until exactly `count` pods match `selector`, all Ready, none of them one of `old`
/// and each with the config hash `hash`.
pub async fn wait_pods_replaced(
    env: &CinderCsiEnvironment,
    selector: &str,
    old: &BTreeSet<String>,
    count: usize,
    hash: &str,
) {
    let pods: Api<Pod> = Api::namespaced(env.client(), env.namespace());
    let found = wait::wait_until(
        format!("{count} new Ready pods {selector} with hash {hash}"),
        Duration::from_secs(120),
        || {
            let pods = pods.clone();
            async move {
                let list = pods
                    .list(&ListParams::default().labels(selector))
                    .await
                    .map_err(|e| e.to_string())?;
                let done = list.items.len() == count
                    && list.items.iter().all(|p| {
                        pod_is_ready(p)
                            && !p.metadata.uid.as_ref().is_some_and(|u| old.contains(u))
                            && p.metadata
                                .annotations
                                .as_ref()
                                .and_then(|a| a.get(CINDER_CONFIG_HASH_ANNOTATION))
                                .map(String::as_str)
                                == Some(hash)
                    });
                if done {
                    Ok(Some(()))
                } else {
                    Err(list
                        .items
                        .iter()
                        .map(|p| {
                            format!(
                                "{} (old: {}, {})",
                                suites::e2e::workload::describe_pod(p),
                                p.metadata.uid.as_ref().is_some_and(|u| old.contains(u)),
                                p.metadata
                                    .annotations
                                    .as_ref()
                                    .and_then(|a| a.get(CINDER_CONFIG_HASH_ANNOTATION))
                                    .cloned()
                                    .unwrap_or_default()
                            )
                        })
                        .collect::<Vec<_>>()
                        .join("; "))
                }
            }
        },
    )
    .await;
    if let Err(e) = found {
        panic!("{e}\n{}", env.diagnostics().await);
    }
}

/// The holder of the operator's leader Lease.
pub async fn lease_holder(env: &CinderCsiEnvironment) -> String {
    let leases: Api<Lease> = Api::namespaced(env.client(), env.namespace());
    let found = wait::wait_until("the operator's Lease to have a holder", WAIT, || {
        let leases = leases.clone();
        async move {
            let lease = leases
                .get_opt(CINDER_OPERATOR_LEASE)
                .await
                .map_err(|e| e.to_string())?
                .ok_or("no Lease yet")?;
            match lease.spec.and_then(|s| s.holder_identity) {
                Some(holder) if !holder.is_empty() => Ok(Some(holder)),
                _ => Err("no holder".to_string()),
            }
        }
    })
    .await;
    found.unwrap()
}
