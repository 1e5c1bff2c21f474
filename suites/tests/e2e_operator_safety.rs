//! The Manila CSI driver operator made safe for production, on its own embedded cluster
//! with the fake cloud: managementState Removed refused while volumes of the driver exist;
//! the driver controller highly available (two replicas, every sidecar leader-elected, a
//! PodDisruptionBudget); node plugins on a tainted node.
//! One environment per test.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

// The shared steps of the operator tests; this binary uses only some of them.
#[allow(dead_code)]
mod operator_steps;
#[path = "operator_steps/safety.rs"]
mod safety;

use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams};
use kube_support::wait;
use operator_steps::{
    CONTROLLER_DEPLOYMENT, LOGS, WAIT, operator_events, operator_options, rwx_claim, set_spec,
    status_of, wait_driver_condition,
};
use safety::{
    NFS_PLUGIN_SELECTOR, OTHER_SIDECAR_LEASES, PROVISIONER_LEASE, REMOVAL_DEGRADED,
    lease_holder_pod, pod_disruption_budget, pods_on_node, set_taints, tolerate_taint,
    wait_deployment_ready, wait_no_daemon_sets,
};
use suites::e2e::workload::{PodBuilder, Workload};
use suites::e2e::{
    CONTROLLER_SELECTOR, ManilaCsiEnvironment, NODE_PLUGIN_SELECTOR, OperatorOptions,
    describe_conditions,
};

/// Removed while a claim is bound: refused (the driver's pods stay, a Degraded condition
/// names the count, a Warning Event); the claim deleted, the removal goes ahead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removed_is_refused_while_a_volume_of_the_driver_exists_and_proceeds_once_none_is_left()
-> anyhow::Result<()> {
    testkit::init_tracing(LOGS);
    let env = ManilaCsiEnvironment::start(operator_options(OperatorOptions::default())).await?;
    let client = env.client();
    let namespace = env.namespace().to_string();
    let workload = Workload::create(&env, "operator-removal").await?;
    workload.bound_claim(&rwx_claim("data")).await?;

    set_spec(&env, serde_json::json!({ "managementState": "Removed" })).await;
    let driver = wait_driver_condition(
        &env,
        REMOVAL_DEGRADED,
        "True",
        "1 PersistentVolume(s) of manila.csi.openstack.org",
    )
    .await;
    let (_, reason, message) = status_of(&driver, REMOVAL_DEGRADED);
    assert_eq!(reason, "RemovalRefused");
    assert!(message.contains("Delete the claims"), "{message}");
    // Refused, the driver is still Available: only Degraded says why.
    let operator = env
        .wait_cluster_operator("Degraded naming the refusal, Available", WAIT, |o| {
            status_of(o, "Degraded").0 == "True"
                && status_of(o, "Degraded").2.contains("refused")
                && status_of(o, "Available").0 == "True"
        })
        .await?;
    tracing::info!("refused: {}", describe_conditions(&operator));
    let events = operator_events(&env).await;
    assert!(
        events
            .iter()
            .any(|e| e.reason.as_deref() == Some("RemovalRefused")
                && e.type_.as_deref() == Some("Warning")),
        "{events:?}"
    );
    assert!(
        !events
            .iter()
            .any(|e| e.reason.as_deref() == Some("DaemonSetDeleted")),
        "{events:?}"
    );
    // Nothing deleted: the Deployment, both DaemonSets and their pods are there.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &namespace);
    assert!(deployments.get_opt(CONTROLLER_DEPLOYMENT).await?.is_some());
    let daemon_sets: Api<DaemonSet> = Api::namespaced(client.clone(), &namespace);
    assert_eq!(
        daemon_sets.list(&ListParams::default()).await?.items.len(),
        2
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    for selector in [CONTROLLER_SELECTOR, NODE_PLUGIN_SELECTOR] {
        let found = pods.list(&ListParams::default().labels(selector)).await?;
        assert!(!found.items.is_empty(), "no pod of {selector}");
    }

    // The claim goes (its PV with it): the removal proceeds.
    workload.cleanup().await?;
    wait::wait_deleted(
        &deployments,
        CONTROLLER_DEPLOYMENT,
        Duration::from_secs(120),
    )
    .await?;
    wait_no_daemon_sets(&daemon_sets).await;
    let driver = wait_driver_condition(&env, REMOVAL_DEGRADED, "False", "").await;
    let available = status_of(&driver, "ManilaDriverRemovalControllerAvailable");
    assert!(available.2.contains("removed"), "{available:?}");

    env.teardown().await?;
    Ok(())
}

/// Two controller replicas, one leader per sidecar; the provisioner's leader pod deleted, the
/// other replica takes the Lease and a claim created right after binds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provisioning_continues_when_the_controller_leader_pod_is_deleted() -> anyhow::Result<()> {
    testkit::init_tracing(LOGS);
    let env = ManilaCsiEnvironment::start(operator_options(OperatorOptions::default())).await?;
    let client = env.client();
    let namespace = env.namespace().to_string();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &namespace);
    wait_deployment_ready(&deployments, CONTROLLER_DEPLOYMENT, 2).await;
    let deployment = deployments.get(CONTROLLER_DEPLOYMENT).await?;
    let strategy = deployment.spec.as_ref().unwrap().strategy.clone().unwrap();
    assert_eq!(strategy.type_.as_deref(), Some("RollingUpdate"));

    // The budget: one pod at a time, and with both ready one disruption allowed.
    let budget = pod_disruption_budget(&client, &namespace, CONTROLLER_DEPLOYMENT).await;
    assert_eq!(budget.data["spec"]["maxUnavailable"], 1);
    wait::wait_until("the budget to allow one disruption", WAIT, || {
        let client = client.clone();
        let namespace = namespace.clone();
        async move {
            let budget = pod_disruption_budget(&client, &namespace, CONTROLLER_DEPLOYMENT).await;
            let status = &budget.data["status"];
            if status["disruptionsAllowed"] == 1 && status["currentHealthy"] == 2 {
                Ok(Some(()))
            } else {
                Err(format!("status {status}"))
            }
        }
    })
    .await?;

    // Each sidecar has its leader among the two pods.
    let leases: Api<Lease> = Api::namespaced(client.clone(), &namespace);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let controllers: Vec<String> = pods
        .list(&ListParams::default().labels(CONTROLLER_SELECTOR))
        .await?
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    assert_eq!(controllers.len(), 2, "{controllers:?}");
    let leader = lease_holder_pod(&leases, PROVISIONER_LEASE, None).await;
    assert!(controllers.contains(&leader), "{leader} of {controllers:?}");
    for lease in OTHER_SIDECAR_LEASES {
        let holder = lease_holder_pod(&leases, lease, None).await;
        assert!(controllers.contains(&holder), "{lease}: {holder}");
    }

    // The leader goes; a claim created right after binds, provisioned by whichever
    // replica took the Lease.
    let workload = Workload::create(&env, "operator-ha").await?;
    workload.bound_claim(&rwx_claim("before")).await?;
    pods.delete(&leader, &DeleteParams::default()).await?;
    workload.bound_claim(&rwx_claim("after")).await?;
    let successor = lease_holder_pod(&leases, PROVISIONER_LEASE, Some(&leader)).await;
    assert_ne!(successor, leader);
    tracing::info!(%leader, %successor, "the provisioner's Lease moved");
    wait_deployment_ready(&deployments, CONTROLLER_DEPLOYMENT, 2).await;
    workload.cleanup().await?;

    env.teardown().await?;
    Ok(())
}

/// A node tainted NoSchedule and NoExecute keeps both node plugins (they tolerate every
/// taint, at system-node-critical priority), while a pod that does not tolerate the taint is
/// evicted; a pod that does tolerate it mounts a claim there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tainted_node_keeps_its_node_plugins_and_mounts_for_a_tolerating_pod()
-> anyhow::Result<()> {
    testkit::init_tracing(LOGS);
    let env = ManilaCsiEnvironment::start(operator_options(OperatorOptions::default())).await?;
    let client = env.client();
    let namespace = env.namespace().to_string();
    let node = env.cluster().node_names().last().cloned().unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let plugins = [NODE_PLUGIN_SELECTOR, NFS_PLUGIN_SELECTOR];
    let mut before = Vec::new();
    for selector in plugins {
        let found = pods_on_node(&pods, selector, &node).await;
        assert_eq!(found.len(), 1, "{selector} on {node}: {found:?}");
        let pod = pods.get(&found[0].0).await?;
        let spec = pod.spec.unwrap();
        assert_eq!(
            spec.priority_class_name.as_deref(),
            Some("system-node-critical")
        );
        assert_eq!(spec.priority, Some(2_000_001_000));
        before.extend(found);
    }

    // A pod on the node that does not tolerate the taint, to see NoExecute act.
    let workload = Workload::create(&env, "operator-taint").await?;
    let mut canary = PodBuilder::new("canary", "true").build();
    let spec = canary.spec.as_mut().unwrap();
    spec.node_selector = None;
    spec.node_name = Some(node.clone());
    workload.ready_pod(&canary).await?;
    set_taints(&client, &node, &["NoSchedule", "NoExecute"]).await;
    let workload_pods: Api<Pod> = Api::namespaced(client.clone(), workload.namespace());
    wait::wait_deleted(&workload_pods, "canary", WAIT).await?;

    // The node plugins are the same pods, still ready.
    for selector in plugins {
        for (name, uid) in pods_on_node(&pods, selector, &node).await {
            assert!(before.contains(&(name.clone(), uid)), "{name} is new");
            let pod = pods.get(&name).await?;
            assert!(suites::e2e::workload::pod_is_ready(&pod), "{name}");
        }
    }
    assert_eq!(
        before.len(),
        plugins.len(),
        "one pod of each node plugin was on {node}"
    );

    // A pod that tolerates the taint mounts a claim on the tainted node.
    workload.bound_claim(&rwx_claim("data")).await?;
    let mut pod = PodBuilder::new("writer", "echo on-a-tainted-node > /data/file")
        .claim("data", "/data")
        .node(&node)
        .build();
    tolerate_taint(&mut pod);
    let ready = workload.ready_pod(&pod).await?;
    assert_eq!(
        ready.spec.unwrap().node_name.as_deref(),
        Some(node.as_str())
    );
    let read = workload.exec("writer", "cat /data/file").await?;
    assert_eq!(read.trim(), "on-a-tainted-node");

    workload.cleanup().await?;
    set_taints(&client, &node, &[]).await;
    env.teardown().await?;
    Ok(())
}
