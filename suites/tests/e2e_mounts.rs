//! Pods using Manila shares, with the driver deployed from `fixtures/manila-csi/` on its own
//! embedded cluster (one environment per test). These need the node agents' CSI mount flow
//! (NodeStage/NodePublish at kubelet's paths) and Bidirectional mount propagation for the
//! node plugin: ReadWriteMany across nodes, ReadWriteOnce with an attach-required CSIDriver
//! (Multi-Attach refused until the first pod is gone), online expansion, and
//! WaitForFirstConsumer with zones.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::fmt::Display;
use std::time::Duration;

use harness::cluster::wait;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use suites::e2e::workload::{
    bound_volume, claim, claim_capacity, describe_pod, pod_with_claim, volume_capacity,
    volume_handle, wait_claim_bound, wait_event, wait_pod_ready,
};
use suites::e2e::{
    EXPANDABLE_STORAGE_CLASS, EnvironmentOptions, ManilaCsiEnvironment, TOPOLOGY_KEY,
    WFFC_STORAGE_CLASS,
};

const WAIT: Duration = Duration::from_secs(120);

fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "suites=info,harness=info".into()),
        )
        .with_test_writer()
        .try_init();
}

async fn check<T, E: Display>(env: &ManilaCsiEnvironment, what: &str, result: Result<T, E>) -> T {
    match result {
        Ok(value) => value,
        Err(e) => panic!("{what}: {e}\n{}", env.diagnostics().await),
    }
}

async fn exec(env: &ManilaCsiEnvironment, ns: &str, pod: &str, script: &str) -> String {
    let out = env
        .cluster()
        .exec(ns, pod, "app", &["sh", "-c", script])
        .await
        .unwrap();
    assert_eq!(
        out.code(),
        0,
        "`{script}` in {pod}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

async fn delete_pods(pods: &Api<Pod>, names: &[&str]) {
    for name in names {
        pods.delete(name, &DeleteParams::default()).await.unwrap();
    }
    for name in names {
        wait::wait_deleted(pods, name, WAIT).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_write_many_pods_on_two_nodes_see_each_others_files() {
    init_tracing();
    let env = ManilaCsiEnvironment::start(EnvironmentOptions::default())
        .await
        .expect("the driver deploys");
    let nodes = env.cluster().node_names();
    let ns = env.cluster().namespace("e2e-rwx").await.unwrap();
    let claims: Api<PersistentVolumeClaim> = ns.api();
    let pods: Api<Pod> = ns.api();
    claims
        .create(
            &PostParams::default(),
            &claim("shared", None, "1Gi", "ReadWriteMany"),
        )
        .await
        .unwrap();
    let bound = check(
        &env,
        "claim Bound",
        wait_claim_bound(&claims, "shared", WAIT).await,
    )
    .await;
    let share_id = volume_handle(&bound_volume(&env.client(), &bound).await.unwrap()).unwrap();

    pods.create(
        &PostParams::default(),
        &pod_with_claim("a", "shared", Some(&nodes[0]), "echo from-a > /data/a.txt"),
    )
    .await
    .unwrap();
    check(&env, "pod a Ready", wait_pod_ready(&pods, "a", WAIT).await).await;
    // Pod b starts once a has written, reads it and answers.
    pods.create(
        &PostParams::default(),
        &pod_with_claim(
            "b",
            "shared",
            Some(&nodes[1]),
            "cat /data/a.txt > /data/b-read.txt && echo from-b > /data/b.txt",
        ),
    )
    .await
    .unwrap();
    let b = check(&env, "pod b Ready", wait_pod_ready(&pods, "b", WAIT).await).await;
    let a = pods.get("a").await.unwrap();
    let node_of = |p: &Pod| p.spec.as_ref().and_then(|s| s.node_name.clone());
    assert_ne!(
        node_of(&a),
        node_of(&b),
        "{} / {}",
        describe_pod(&a),
        describe_pod(&b)
    );

    assert_eq!(
        exec(&env, ns.name(), "b", "cat /data/b-read.txt").await,
        "from-a\n"
    );
    assert_eq!(
        exec(&env, ns.name(), "a", "cat /data/b.txt").await,
        "from-b\n"
    );
    // Both write more and see it on the other side, and in the share's directory.
    exec(&env, ns.name(), "a", "echo again-a >> /data/a.txt").await;
    assert_eq!(
        exec(&env, ns.name(), "b", "cat /data/a.txt").await,
        "from-a\nagain-a\n"
    );
    let on_host = std::fs::read_to_string(env.cloud().share_dir(&share_id).join("b.txt")).unwrap();
    assert_eq!(on_host, "from-b\n");

    delete_pods(&pods, &["a", "b"]).await;
    ns.cleanup().await.unwrap();
    env.teardown().await.expect("clean teardown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_write_once_is_refused_on_a_second_node_until_the_first_pod_is_gone() {
    init_tracing();
    let env = ManilaCsiEnvironment::start(EnvironmentOptions {
        attach_required: true,
        ..Default::default()
    })
    .await
    .expect("the driver deploys");
    let nodes = env.cluster().node_names();
    let ns = env.cluster().namespace("e2e-rwo").await.unwrap();
    let claims: Api<PersistentVolumeClaim> = ns.api();
    let pods: Api<Pod> = ns.api();
    claims
        .create(
            &PostParams::default(),
            &claim("single", None, "1Gi", "ReadWriteOnce"),
        )
        .await
        .unwrap();
    check(
        &env,
        "claim Bound",
        wait_claim_bound(&claims, "single", WAIT).await,
    )
    .await;
    pods.create(
        &PostParams::default(),
        &pod_with_claim(
            "first",
            "single",
            Some(&nodes[0]),
            "echo first > /data/owner",
        ),
    )
    .await
    .unwrap();
    check(
        &env,
        "first Ready",
        wait_pod_ready(&pods, "first", WAIT).await,
    )
    .await;

    pods.create(
        &PostParams::default(),
        &pod_with_claim(
            "second",
            "single",
            Some(&nodes[1]),
            "cat /data/owner > /data/seen",
        ),
    )
    .await
    .unwrap();
    let event = check(
        &env,
        "Multi-Attach event",
        wait_event(
            &env.client(),
            ns.name(),
            "second",
            "FailedAttachVolume",
            "Multi-Attach error",
            WAIT,
        )
        .await,
    )
    .await;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    // The second pod waits in ContainerCreating while the first keeps running.
    let second = pods.get("second").await.unwrap();
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
    let first = pods.get("first").await.unwrap();
    assert!(
        suites::e2e::workload::pod_is_ready(&first),
        "{}",
        describe_pod(&first)
    );

    // Once the first pod is gone the volume moves, and the second pod sees the data.
    delete_pods(&pods, &["first"]).await;
    check(
        &env,
        "second Ready",
        wait_pod_ready(&pods, "second", Duration::from_secs(240)).await,
    )
    .await;
    assert_eq!(
        exec(&env, ns.name(), "second", "cat /data/seen").await,
        "first\n"
    );

    delete_pods(&pods, &["second"]).await;
    ns.cleanup().await.unwrap();
    env.teardown().await.expect("clean teardown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn online_expansion_extends_the_share_and_updates_the_capacities() {
    init_tracing();
    let env = ManilaCsiEnvironment::start(EnvironmentOptions::default())
        .await
        .expect("the driver deploys");
    let client = env.client();
    let ns = env.cluster().namespace("e2e-expand").await.unwrap();
    let claims: Api<PersistentVolumeClaim> = ns.api();
    let pods: Api<Pod> = ns.api();
    claims
        .create(
            &PostParams::default(),
            &claim(
                "growing",
                Some(EXPANDABLE_STORAGE_CLASS),
                "1Gi",
                "ReadWriteMany",
            ),
        )
        .await
        .unwrap();
    let bound = check(
        &env,
        "claim Bound",
        wait_claim_bound(&claims, "growing", WAIT).await,
    )
    .await;
    let pv = bound_volume(&client, &bound).await.unwrap();
    let pv_name = pv.metadata.name.clone().unwrap();
    let share_id = volume_handle(&pv).unwrap();
    pods.create(
        &PostParams::default(),
        &pod_with_claim("user", "growing", None, "echo before > /data/before"),
    )
    .await
    .unwrap();
    let running = check(&env, "pod Ready", wait_pod_ready(&pods, "user", WAIT).await).await;

    let patch = serde_json::json!({"spec": {"resources": {"requests": {"storage": "3Gi"}}}});
    claims
        .patch("growing", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
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
    check(&env, "share extended", extended).await;
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    check(
        &env,
        "PV capacity 3Gi",
        wait::wait_for_described(
            &volumes,
            &pv_name,
            &format!("PV {pv_name} capacity 3Gi"),
            |pv: Option<&PersistentVolume>| pv.and_then(volume_capacity).as_deref() == Some("3Gi"),
            WAIT,
        )
        .await,
    )
    .await;
    check(
        &env,
        "PVC capacity 3Gi",
        wait::wait_for_described(
            &claims,
            "growing",
            "PVC growing status capacity 3Gi",
            |c: Option<&PersistentVolumeClaim>| {
                c.and_then(claim_capacity).as_deref() == Some("3Gi")
            },
            WAIT,
        )
        .await,
    )
    .await;

    // The pod kept running through it (same pod, no restart) and still uses the share.
    let after = pods.get("user").await.unwrap();
    assert_eq!(after.metadata.uid, running.metadata.uid);
    assert!(
        suites::e2e::workload::pod_is_ready(&after),
        "{}",
        describe_pod(&after)
    );
    let restarts: i32 = after
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map(|c| c.iter().map(|c| c.restart_count).sum())
        .unwrap_or_default();
    assert_eq!(restarts, 0, "{}", describe_pod(&after));
    exec(&env, ns.name(), "user", "echo after > /data/after").await;
    assert_eq!(
        exec(&env, ns.name(), "user", "cat /data/before").await,
        "before\n"
    );
    assert!(env.cloud().share_dir(&share_id).join("after").is_file());

    delete_pods(&pods, &["user"]).await;
    ns.cleanup().await.unwrap();
    env.teardown().await.expect("clean teardown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_first_consumer_provisions_in_the_zone_of_the_pods_node() {
    init_tracing();
    let env = ManilaCsiEnvironment::start(EnvironmentOptions {
        topology: true,
        ..Default::default()
    })
    .await
    .expect("the driver deploys");
    let client = env.client();
    let nodes = env.cluster().node_names();
    // The second node is the only one in its zone (zones are assigned in turn).
    let node = nodes[1].clone();
    let zone = env.zone_of(&node).unwrap();
    let ns = env.cluster().namespace("e2e-wffc").await.unwrap();
    let claims: Api<PersistentVolumeClaim> = ns.api();
    let pods: Api<Pod> = ns.api();
    claims
        .create(
            &PostParams::default(),
            &claim("zonal", Some(WFFC_STORAGE_CLASS), "1Gi", "ReadWriteMany"),
        )
        .await
        .unwrap();
    // No consumer yet: the claim waits, and no share is made.
    check(
        &env,
        "WaitForFirstConsumer event",
        wait_event(
            &client,
            ns.name(),
            "zonal",
            "WaitForFirstConsumer",
            "",
            WAIT,
        )
        .await,
    )
    .await;
    let pending = claims.get("zonal").await.unwrap();
    assert_eq!(
        pending.status.and_then(|s| s.phase).as_deref(),
        Some("Pending")
    );
    assert!(env.inspector().shares().await.unwrap().is_empty());

    pods.create(
        &PostParams::default(),
        &pod_with_claim("consumer", "zonal", Some(&node), "echo zonal > /data/z"),
    )
    .await
    .unwrap();
    let bound = check(
        &env,
        "claim Bound",
        wait_claim_bound(&claims, "zonal", WAIT).await,
    )
    .await;
    let pv = bound_volume(&client, &bound).await.unwrap();
    let terms = pv
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
        .share(&volume_handle(&pv).unwrap())
        .await
        .unwrap()
        .expect("the share exists");
    assert_eq!(
        share.availability_zone.as_deref(),
        Some(zone.as_str()),
        "{share:?}"
    );

    let consumer = check(
        &env,
        "consumer Ready",
        wait_pod_ready(&pods, "consumer", WAIT).await,
    )
    .await;
    assert_eq!(
        consumer.spec.as_ref().and_then(|s| s.node_name.as_deref()),
        Some(node.as_str())
    );
    assert_eq!(
        exec(&env, ns.name(), "consumer", "cat /data/z").await,
        "zonal\n"
    );

    delete_pods(&pods, &["consumer"]).await;
    ns.cleanup().await.unwrap();
    env.teardown().await.expect("clean teardown");
}
