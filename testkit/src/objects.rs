//! Kubernetes objects tests create and wait on: namespaces and their service accounts,
//! StorageClasses, CSIDrivers, claims, pods and their Events.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    ContainerStatus, Event, Namespace, PersistentVolumeClaim, Pod, Secret, ServiceAccount,
};
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::{Client, Resource};
use kube_support::wait;
use serde_json::json;

use crate::wait::wait_for;

/// Creates the namespace `name`.
pub async fn namespace(client: &Client, name: &str) {
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap_or_else(|e| panic!("creating namespace {name}: {e}"));
}

/// Creates a StorageClass `name` for `provisioner` with `parameters`, reclaim policy Delete,
/// `binding_mode` (`Immediate` or `WaitForFirstConsumer`) and the mount option
/// `nfsvers=4.1`.
pub async fn storage_class(
    client: &Client,
    name: &str,
    provisioner: &str,
    parameters: &[(&str, &str)],
    binding_mode: &str,
) -> StorageClass {
    let class = StorageClass {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        provisioner: provisioner.into(),
        parameters: Some(
            parameters
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        reclaim_policy: Some("Delete".into()),
        volume_binding_mode: Some(binding_mode.into()),
        mount_options: Some(vec!["nfsvers=4.1".into()]),
        ..Default::default()
    };
    Api::<StorageClass>::all(client.clone())
        .create(&PostParams::default(), &class)
        .await
        .unwrap_or_else(|e| panic!("creating StorageClass {name}: {e}"))
}

/// Creates a ReadWriteMany claim `namespace/name` of `size` in `class`, with `annotations`.
pub async fn claim(
    client: &Client,
    namespace: &str,
    name: &str,
    class: &str,
    size: &str,
    annotations: &[(&str, &str)],
) -> PersistentVolumeClaim {
    let annotations: BTreeMap<String, String> = annotations
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": class,
            "resources": {"requests": {"storage": size}},
        }
    }))
    .unwrap();
    Api::<PersistentVolumeClaim>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &claim)
        .await
        .unwrap_or_else(|e| panic!("creating claim {namespace}/{name}: {e}"))
}

/// Waits until the claim `namespace/name` is Bound and returns it
/// ([`kube_support::wait::wait_claim_bound`]).
pub async fn bound(
    client: &Client,
    namespace: &str,
    name: &str,
    timeout: Duration,
) -> PersistentVolumeClaim {
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), namespace);
    wait::wait_claim_bound(&claims, name, timeout)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A pod's phase (`""` before the first status).
pub fn phase(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default()
}

/// Waits until the pod `name` is in `phase` and returns it.
pub async fn wait_pod_phase(pods: &Api<Pod>, name: &str, wanted: &str, timeout: Duration) -> Pod {
    wait_for(&format!("pod {name} {wanted}"), timeout, || async {
        let pod = pods.get(name).await.map_err(|e| e.to_string())?;
        if phase(&pod) == wanted {
            Ok(Some(pod))
        } else {
            Err(format!("phase {:?}: {:?}", phase(&pod), pod.status))
        }
    })
    .await
}

/// Waits until the object `name` exists and `check` answers `Some(())` for it (a check can
/// use `?` on optional fields), and returns the object as it was then. On timeout the test
/// fails with `what` and the object last seen.
pub async fn wait_object<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    timeout: Duration,
    check: impl Fn(&K) -> Option<()>,
) -> K
where
    K: Resource + Clone + Debug + serde::de::DeserializeOwned + serde::Serialize + Send + 'static,
{
    let object = wait::wait_for_described(
        api,
        name,
        what,
        |object: Option<&K>| object.and_then(&check).is_some(),
        timeout,
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    object.unwrap_or_else(|| panic!("{what}: {name} was not found"))
}

/// Deletes the object `name` (namespaced or not) and waits until it is gone.
pub async fn delete_and_wait_gone<K>(api: &Api<K>, name: &str, timeout: Duration)
where
    K: Resource + Clone + Debug + serde::de::DeserializeOwned,
{
    api.delete(name, &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("deleting {name}: {e}"));
    wait_for(&format!("{name} gone"), timeout, || async {
        match api.get_opt(name).await.map_err(|e| e.to_string())? {
            None => Ok(Some(())),
            Some(object) => Err(format!(
                "{name} still there, finalizers {:?}",
                object.meta().finalizers
            )),
        }
    })
    .await;
}

/// The Events about the object `name` in `namespace`, as (type, reason, message).
pub async fn events(client: &Client, namespace: &str, name: &str) -> Vec<(String, String, String)> {
    Api::<Event>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .unwrap_or_else(|e| panic!("listing events of {namespace}/{name}: {e}"))
        .items
        .into_iter()
        .map(|e| {
            (
                e.type_.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.message.unwrap_or_default(),
            )
        })
        .collect()
}

/// Waits until at least `count` Events about `namespace/name` satisfy `matches` (given type,
/// reason and message, as [`events`] lists them) and returns those.
pub async fn wait_events(
    client: &Client,
    namespace: &str,
    name: &str,
    count: usize,
    timeout: Duration,
    matches: impl Fn(&str, &str, &str) -> bool,
) -> Vec<(String, String, String)> {
    let what = format!("{count} matching events of {namespace}/{name}");
    wait_for(&what, timeout, || async {
        let all = events(client, namespace, name).await;
        let matching: Vec<_> = all
            .iter()
            .filter(|(type_, reason, message)| matches(type_, reason, message))
            .cloned()
            .collect();
        if matching.len() >= count {
            Ok(Some(matching))
        } else {
            Err(format!("events {all:?}"))
        }
    })
    .await
}

/// Waits for an Event about `namespace/name` with `reason` whose message contains `text`,
/// and returns that message ([`kube_support::wait::wait_event`]).
pub async fn wait_event(
    client: &Client,
    namespace: &str,
    name: &str,
    reason: &str,
    text: &str,
    timeout: Duration,
) -> String {
    wait::wait_event(client, namespace, name, reason, text, timeout)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .message
        .unwrap_or_default()
}

/// Waits for an Event about `namespace/name` with `reason` and returns it whole (e.g. to
/// check its source).
pub async fn wait_event_with_reason(
    client: &Client,
    namespace: &str,
    name: &str,
    reason: &str,
    timeout: Duration,
) -> Event {
    wait::wait_event(client, namespace, name, reason, "", timeout)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The status of the pod's first container (the default before it has one).
pub fn container_status(pod: &Pod) -> ContainerStatus {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first().cloned())
        .unwrap_or_default()
}

/// A pod `name` on `node` running `script` (`sh -c`, busybox) once, with the claim `claim`
/// mounted at `/data`; no service-account token and a 2 s grace period, so it goes quickly.
pub fn pod_using_claim(name: &str, node: &str, claim: &str, script: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 2,
            "containers": [{
                "name": "main", "image": "busybox",
                "command": ["sh", "-c", script],
                "volumeMounts": [{"name": "data", "mountPath": "/data"}]
            }],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
        }
    }))
    .expect("a valid pod")
}

/// Waits until the ServiceAccount `namespace/name` exists (the controller-manager creates
/// each namespace's `default` shortly after the namespace) and returns it.
pub async fn wait_service_account(
    client: &Client,
    namespace: &str,
    name: &str,
    timeout: Duration,
) -> ServiceAccount {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let what = format!("the ServiceAccount {namespace}/{name}");
    wait_for(&what, timeout, || async {
        accounts.get_opt(name).await.map_err(|e| e.to_string())
    })
    .await
}

/// Waits until `namespace` holds a service-account token Secret and returns it: the legacy
/// token controller (Kubernetes 1.20) creates one per ServiceAccount, and admission refuses
/// pods of an account whose token is not there yet.
pub async fn wait_token_secret(client: &Client, namespace: &str, timeout: Duration) -> Secret {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let what = format!("a service-account token Secret in {namespace}");
    wait_for(&what, timeout, || async {
        let list = secrets
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        Ok(list
            .items
            .into_iter()
            .find(|s| s.type_.as_deref() == Some("kubernetes.io/service-account-token")))
    })
    .await
}

/// Creates the CSIDriver `name` without attachment (`attachRequired: false`) and with the
/// pod's information in NodePublishVolume's volume context (`podInfoOnMount: true`).
pub async fn csi_driver_without_attach(client: &Client, name: &str) -> CSIDriver {
    let driver: CSIDriver = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"attachRequired": false, "podInfoOnMount": true}
    }))
    .expect("a valid CSIDriver");
    Api::<CSIDriver>::all(client.clone())
        .create(&PostParams::default(), &driver)
        .await
        .unwrap_or_else(|e| panic!("creating CSIDriver {name}: {e}"))
}
