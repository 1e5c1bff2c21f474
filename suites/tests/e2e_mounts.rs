//! Pods using Manila shares, with the driver deployed from `fixtures/manila-csi/` on its own
//! embedded cluster (one environment per test). These need the node agents' CSI mount flow
//! (NodeStage/NodePublish at kubelet's paths) and Bidirectional mount propagation for the
//! node plugin: ReadWriteMany across nodes, ReadWriteOnce with an attach-required CSIDriver
//! (Multi-Attach refused until the first pod is gone), online expansion, and
//! WaitForFirstConsumer with zones.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use harness::cluster::wait;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{Api, Patch, PatchParams};
use suites::e2e::workload::{
    WAIT, Workload, claim, claim_capacity, describe_pod, pod_is_ready, pod_with_claim,
    volume_capacity, wait_pod_ready,
};
use suites::e2e::{
    EXPANDABLE_STORAGE_CLASS, EnvironmentOptions, ManilaCsiEnvironment, TOPOLOGY_KEY,
    WFFC_STORAGE_CLASS,
};

const LOGS: &str = "suites=info,harness=info";

fn node_of(pod: &Pod) -> Option<String> {
    pod.spec.as_ref().and_then(|s| s.node_name.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_write_many_pods_on_two_nodes_see_each_others_files() -> anyhow::Result<()> {
    testkit::init_tracing(LOGS);
    let env = ManilaCsiEnvironment::start(EnvironmentOptions::default()).await?;
    let nodes = env.cluster().node_names();
    let workload = Workload::create(&env, "e2e-rwx").await?;
    let shared = workload
        .bound_claim(&claim("shared", None, "1Gi", "ReadWriteMany"))
        .await?;

    let script = "echo from-a > /data/a.txt";
    workload
        .ready_pod(&pod_with_claim("a", "shared", Some(&nodes[0]), script))
        .await?;
    // Pod b starts once a has written, reads it and answers.
    let script = "cat /data/a.txt > /data/b-read.txt && echo from-b > /data/b.txt";
    let b = workload
        .ready_pod(&pod_with_claim("b", "shared", Some(&nodes[1]), script))
        .await?;
    let a = workload.pods.get("a").await?;
    assert_ne!(
        node_of(&a),
        node_of(&b),
        "{} / {}",
        describe_pod(&a),
        describe_pod(&b)
    );

    assert_eq!(
        workload.exec("b", "cat /data/b-read.txt").await?,
        "from-a\n"
    );
    assert_eq!(workload.exec("a", "cat /data/b.txt").await?, "from-b\n");
    // Both write more and see it on the other side, and in the share's directory.
    workload.exec("a", "echo again-a >> /data/a.txt").await?;
    assert_eq!(
        workload.exec("b", "cat /data/a.txt").await?,
        "from-a\nagain-a\n"
    );
    let on_host = std::fs::read_to_string(env.cloud().share_dir(&shared.share_id).join("b.txt"))?;
    assert_eq!(on_host, "from-b\n");

    workload.delete_pods(&["a", "b"]).await?;
    workload.cleanup().await?;
    env.teardown().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_write_once_is_refused_on_a_second_node_until_the_first_pod_is_gone()
-> anyhow::Result<()> {
    testkit::init_tracing(LOGS);
    let env = ManilaCsiEnvironment::start(EnvironmentOptions {
        attach_required: true,
        ..Default::default()
    })
    .await?;
    let nodes = env.cluster().node_names();
    let workload = Workload::create(&env, "e2e-rwo").await?;
    workload
        .bound_claim(&claim("single", None, "1Gi", "ReadWriteOnce"))
        .await?;
    let script = "echo first > /data/owner";
    workload
        .ready_pod(&pod_with_claim("first", "single", Some(&nodes[0]), script))
        .await?;

    let script = "cat /data/owner > /data/seen";
    workload
        .create_pod(&pod_with_claim("second", "single", Some(&nodes[1]), script))
        .await?;
    let event = workload
        .wait_event("second", "FailedAttachVolume", "Multi-Attach error")
        .await?;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    // The second pod waits in ContainerCreating while the first keeps running.
    let second = workload.pods.get("second").await?;
    let status = second.status.clone().unwrap_or_default();
    assert_eq!(
        status.phase.as_deref(),
        Some("Pending"),
        "{}",
        describe_pod(&second)
    );
    let waiting = status
        .container_statuses
        .unwrap_or_default()
        .iter()
        .filter_map(|c| c.state.as_ref()?.waiting.as_ref()?.reason.clone())
        .collect::<Vec<_>>();
    assert_eq!(waiting, ["ContainerCreating"], "{}", describe_pod(&second));
    let first = workload.pods.get("first").await?;
    assert!(pod_is_ready(&first), "{}", describe_pod(&first));

    // Once the first pod is gone the volume moves, and the second pod sees the data.
    workload.delete_pods(&["first"]).await?;
    let moved = wait_pod_ready(&workload.pods, "second", Duration::from_secs(240)).await;
    workload.check("second Ready", moved).await?;
    assert_eq!(workload.exec("second", "cat /data/seen").await?, "first\n");

    workload.delete_pods(&["second"]).await?;
    workload.cleanup().await?;
    env.teardown().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn online_expansion_extends_the_share_and_updates_the_capacities() -> anyhow::Result<()> {
    testkit::init_tracing(LOGS);
    let env = ManilaCsiEnvironment::start(EnvironmentOptions::default()).await?;
    let workload = Workload::create(&env, "e2e-expand").await?;
    let growing = workload
        .bound_claim(&claim(
            "growing",
            Some(EXPANDABLE_STORAGE_CLASS),
            "1Gi",
            "ReadWriteMany",
        ))
        .await?;
    let pv_name = growing.volume_name();
    let share_id = &growing.share_id;
    let running = workload
        .ready_pod(&pod_with_claim(
            "user",
            "growing",
            None,
            "echo before > /data/before",
        ))
        .await?;

    let patch = serde_json::json!({"spec": {"resources": {"requests": {"storage": "3Gi"}}}});
    workload
        .claims
        .patch("growing", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let inspector = env.inspector().clone();
    let extended = wait::wait_until(format!("share {share_id} extended to 3 GiB"), WAIT, || {
        let inspector = inspector.clone();
        let share_id = share_id.clone();
        async move {
            match inspector.share(&share_id).await {
                Ok(Some(share)) if share.size == 3 && share.status == "available" => {
                    Ok(Some(share))
                }
                Ok(share) => Err(format!("{share:?}")),
                Err(e) => Err(e.to_string()),
            }
        }
    })
    .await;
    workload.check("share extended", extended).await?;
    let volumes: Api<PersistentVolume> = Api::all(env.client());
    let pv_grown = wait::wait_for_described(
        &volumes,
        pv_name,
        &format!("PV {pv_name} capacity 3Gi"),
        |pv: Option<&PersistentVolume>| pv.and_then(volume_capacity).as_deref() == Some("3Gi"),
        WAIT,
    )
    .await;
    workload.check("PV capacity 3Gi", pv_grown).await?;
    let claim_grown = wait::wait_for_described(
        &workload.claims,
        "growing",
        "PVC growing status capacity 3Gi",
        |c: Option<&PersistentVolumeClaim>| c.and_then(claim_capacity).as_deref() == Some("3Gi"),
        WAIT,
    )
    .await;
    workload.check("PVC capacity 3Gi", claim_grown).await?;

    // The pod kept running through it (same pod, no restart) and still uses the share.
    let after = workload.pods.get("user").await?;
    assert_eq!(after.metadata.uid, running.metadata.uid);
    assert!(pod_is_ready(&after), "{}", describe_pod(&after));
    let restarts: i32 = after
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map(|c| c.iter().map(|c| c.restart_count).sum())
        .unwrap_or_default();
    assert_eq!(restarts, 0, "{}", describe_pod(&after));
    workload.exec("user", "echo after > /data/after").await?;
    assert_eq!(workload.exec("user", "cat /data/before").await?, "before\n");
    assert!(env.cloud().share_dir(share_id).join("after").is_file());

    workload.delete_pods(&["user"]).await?;
    workload.cleanup().await?;
    env.teardown().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_first_consumer_provisions_in_the_zone_of_the_pods_node() -> anyhow::Result<()> {
    testkit::init_tracing(LOGS);
    let env = ManilaCsiEnvironment::start(EnvironmentOptions {
        topology: true,
        ..Default::default()
    })
    .await?;
    let nodes = env.cluster().node_names();
    // The second node is the only one in its zone (zones are assigned in turn).
    let node = nodes[1].clone();
    let zone = env.zone_of(&node).unwrap();
    let workload = Workload::create(&env, "e2e-wffc").await?;
    workload
        .create_claim(&claim(
            "zonal",
            Some(WFFC_STORAGE_CLASS),
            "1Gi",
            "ReadWriteMany",
        ))
        .await?;
    // No consumer yet: the claim waits, and no share is made.
    workload
        .wait_event("zonal", "WaitForFirstConsumer", "")
        .await?;
    let pending = workload.claims.get("zonal").await?;
    assert_eq!(
        pending.status.and_then(|s| s.phase).as_deref(),
        Some("Pending")
    );
    assert!(env.inspector().shares().await?.is_empty());

    workload
        .create_pod(&pod_with_claim(
            "consumer",
            "zonal",
            Some(&node),
            "echo zonal > /data/z",
        ))
        .await?;
    let zonal = workload.wait_bound("zonal").await?;
    let terms = zonal
        .volume
        .spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref())
        .map(|r| r.node_selector_terms.clone())
        .unwrap_or_default();
    let zones: Vec<(String, Vec<String>)> = terms
        .iter()
        .flat_map(|t| t.match_expressions.clone().unwrap_or_default())
        .map(|e| (e.key, e.values.unwrap_or_default()))
        .collect();
    assert_eq!(
        zones,
        [(TOPOLOGY_KEY.to_string(), vec![zone.clone()])],
        "{terms:?}"
    );
    let share = env
        .inspector()
        .share(&zonal.share_id)
        .await?
        .expect("the share exists");
    assert_eq!(
        share.availability_zone.as_deref(),
        Some(zone.as_str()),
        "{share:?}"
    );

    let consumer = workload.wait_ready("consumer").await?;
    assert_eq!(node_of(&consumer).as_deref(), Some(node.as_str()));
    assert_eq!(workload.exec("consumer", "cat /data/z").await?, "zonal\n");

    workload.delete_pods(&["consumer"]).await?;
    workload.cleanup().await?;
    env.teardown().await?;
    Ok(())
}
