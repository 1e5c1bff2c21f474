//! The steps and waits of the operator's safety tests (`e2e_operator_safety`, which includes
//! this file as its module `safety`): a refused
//! removal, the driver controller's leader, node taints.

use k8s_openapi::api::apps::v1::DaemonSet;
use kube::api::{Api, ListParams};
use kube_support::wait;

use crate::operator_steps::WAIT;

/// The condition of a refused managementState Removed.
pub const REMOVAL_DEGRADED: &str = "ManilaDriverRemovalControllerDegraded";

/// Waits until no DaemonSet is left in the driver's namespace.
pub async fn wait_no_daemon_sets(daemon_sets: &Api<DaemonSet>) {
    wait::wait_until("no driver DaemonSet", WAIT, || {
        let daemon_sets = daemon_sets.clone();
        async move {
            let left = daemon_sets
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?;
            if left.items.is_empty() {
                Ok(Some(()))
            } else {
                Err(format!("{} left", left.items.len()))
            }
        }
    })
    .await
    .unwrap();
}

/// The provisioner's leader Lease (upstream's name: the sanitised driver name).
pub const PROVISIONER_LEASE: &str = "manila-csi-openstack-org";
/// The snapshotter's and the resizer's leader Leases.
pub const OTHER_SIDECAR_LEASES: [&str; 2] = [
    "external-snapshotter-leader-manila-csi-openstack-org",
    "external-resizer-manila-csi-openstack-org",
];

/// The pod whose sidecar holds the Lease `name` (identities are `<pod>_<random>`), once it
/// has a holder other than `not`.
pub async fn lease_holder_pod(
    leases: &Api<k8s_openapi::api::coordination::v1::Lease>,
    name: &str,
    not: Option<&str>,
) -> String {
    wait::wait_until(format!("a holder of Lease {name}"), WAIT, || {
        let leases = leases.clone();
        async move {
            let lease = leases
                .get_opt(name)
                .await
                .map_err(|e| e.to_string())?
                .ok_or_else(|| "no Lease".to_string())?;
            let holder = lease
                .spec
                .and_then(|s| s.holder_identity)
                .filter(|h| !h.is_empty())
                .ok_or_else(|| "no holder".to_string())?;
            let pod = holder
                .rsplit_once('_')
                .map(|(pod, _)| pod.to_string())
                .unwrap_or(holder.clone());
            if Some(pod.as_str()) == not {
                Err(format!("still held by {holder}"))
            } else {
                Ok(Some(pod))
            }
        }
    })
    .await
    .unwrap()
}

/// The PodDisruptionBudget `name`, through whichever of `policy/v1` and `policy/v1beta1` the
/// cluster serves (the embedded cluster's Kubernetes 1.20 only the latter).
pub async fn pod_disruption_budget(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> kube::api::DynamicObject {
    let mut last = String::new();
    for version in ["v1", "v1beta1"] {
        let resource = kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("policy", version, "PodDisruptionBudget"),
            "poddisruptionbudgets",
        );
        let api: Api<kube::api::DynamicObject> =
            Api::namespaced_with(client.clone(), namespace, &resource);
        match api.get(name).await {
            Ok(object) => return object,
            Err(error) => last = format!("policy/{version}: {error}"),
        }
    }
    panic!("PodDisruptionBudget {namespace}/{name}: {last}");
}

/// Waits until the controller Deployment has all its replicas ready and up to date.
pub async fn wait_deployment_ready(
    deployments: &Api<k8s_openapi::api::apps::v1::Deployment>,
    name: &str,
    replicas: i32,
) {
    wait::wait_until(format!("{replicas} ready replicas of {name}"), WAIT, || {
        let deployments = deployments.clone();
        async move {
            let deployment = deployments.get(name).await.map_err(|e| e.to_string())?;
            let status = deployment.status.unwrap_or_default();
            let (ready, updated, total) = (
                status.ready_replicas.unwrap_or(0),
                status.updated_replicas.unwrap_or(0),
                status.replicas.unwrap_or(0),
            );
            if ready == replicas && updated == replicas && total == replicas {
                Ok(Some(()))
            } else {
                Err(format!("{ready} ready, {updated} updated, {total} in all"))
            }
        }
    })
    .await
    .unwrap();
}
pub const NFS_PLUGIN_SELECTOR: &str = "app=csi-nfsplugin,component=nodeplugin";

/// The taint the node tests put on a node (NoSchedule and NoExecute).
pub const TAINT_KEY: &str = "conformance.openstack-csi.io/maintenance";

/// Sets the node's taints to [`TAINT_KEY`] with `effects` (none: removes them).
pub async fn set_taints(client: &kube::Client, node: &str, effects: &[&str]) {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let taints: Vec<serde_json::Value> = effects
        .iter()
        .map(|effect| serde_json::json!({ "key": TAINT_KEY, "value": "true", "effect": effect }))
        .collect();
    nodes
        .patch(
            node,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&serde_json::json!({ "spec": { "taints": taints } })),
        )
        .await
        .unwrap();
}

/// The pod's tolerations of [`TAINT_KEY`], whatever the effect.
pub fn tolerate_taint(pod: &mut k8s_openapi::api::core::v1::Pod) {
    let spec = pod.spec.as_mut().unwrap();
    spec.tolerations = Some(vec![k8s_openapi::api::core::v1::Toleration {
        key: Some(TAINT_KEY.into()),
        operator: Some("Exists".into()),
        ..Default::default()
    }]);
}

/// The pods of `selector` on `node`, by name and uid.
pub async fn pods_on_node(
    pods: &Api<k8s_openapi::api::core::v1::Pod>,
    selector: &str,
    node: &str,
) -> Vec<(String, String)> {
    pods.list(
        &ListParams::default()
            .labels(selector)
            .fields(&format!("spec.nodeName={node}")),
    )
    .await
    .unwrap()
    .items
    .into_iter()
    .map(|p| {
        (
            p.metadata.name.unwrap_or_default(),
            p.metadata.uid.unwrap_or_default(),
        )
    })
    .collect()
}
