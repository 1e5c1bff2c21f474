//! Snapshots with the driver deployed from `fixtures/manila-csi/` on its own embedded cluster:
//! a VolumeSnapshot of a claim becomes ready with a Manila snapshot behind it, and (with the
//! node agents' CSI mount flow) a claim restored from it holds the data. One environment per
//! test.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::fmt::Display;
use std::time::Duration;

use harness::cluster::wait;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use suites::e2e::snapshots::{self, volume_snapshot};
use suites::e2e::workload::{
    bound_volume, claim, claim_from_snapshot, pod_with_claim, volume_handle, wait_claim_bound,
    wait_pod_ready,
};
use suites::e2e::{EnvironmentOptions, ManilaCsiEnvironment, SNAPSHOT_CLASS};

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

/// The VolumeSnapshotContent bound to a snapshot.
fn bound_content(snapshot: &DynamicObject) -> String {
    let status = &snapshot.data["status"];
    status["boundVolumeSnapshotContentName"]
        .as_str()
        .unwrap_or_else(|| panic!("no bound content in {status}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_snapshot_becomes_ready_with_a_manila_snapshot_and_goes_with_it() {
    init_tracing();
    let env = ManilaCsiEnvironment::start(EnvironmentOptions::default())
        .await
        .expect("the driver deploys");
    let client = env.client();
    let ns = env.cluster().namespace("e2e-snapshot").await.unwrap();
    let claims: Api<PersistentVolumeClaim> = ns.api();
    claims
        .create(
            &PostParams::default(),
            &claim("source", None, "1Gi", "ReadWriteMany"),
        )
        .await
        .unwrap();
    let bound = check(
        &env,
        "claim Bound",
        wait_claim_bound(&claims, "source", WAIT).await,
    )
    .await;
    let share_id = volume_handle(&bound_volume(&client, &bound).await.unwrap()).unwrap();

    let snapshots_api = snapshots::volume_snapshots(&client, ns.name());
    snapshots_api
        .create(
            &PostParams::default(),
            &volume_snapshot("snap", "source", SNAPSHOT_CLASS),
        )
        .await
        .unwrap();
    let ready = check(
        &env,
        "VolumeSnapshot readyToUse",
        snapshots::wait_ready(&snapshots_api, "snap", WAIT).await,
    )
    .await;
    let content_name = bound_content(&ready);
    let contents = snapshots::volume_snapshot_contents(&client);
    let content = contents.get(&content_name).await.unwrap();
    let handle = content.data["status"]["snapshotHandle"]
        .as_str()
        .unwrap_or_else(|| panic!("no snapshotHandle in {}", content.data["status"]))
        .to_string();
    assert!(snapshots::is_ready(&content), "{}", content.data["status"]);
    assert_eq!(
        content.data["spec"]["driver"].as_str(),
        Some(suites::e2e::DRIVER_NAME)
    );

    // The Manila snapshot behind it copies the claim's share.
    let cloud_snapshots = env.inspector().snapshots().await.unwrap();
    let cloud_snapshot = cloud_snapshots
        .iter()
        .find(|s| s.id == handle)
        .unwrap_or_else(|| panic!("no Manila snapshot {handle} in {cloud_snapshots:?}"));
    assert_eq!(cloud_snapshot.share_id, share_id);
    assert_eq!(cloud_snapshot.status, "available");

    // Deleting the VolumeSnapshot (policy Delete) deletes the content and the snapshot.
    snapshots_api
        .delete("snap", &DeleteParams::default())
        .await
        .unwrap();
    check(
        &env,
        "VolumeSnapshotContent deleted",
        wait::wait_for_described(
            &contents,
            &content_name,
            &format!("VolumeSnapshotContent {content_name} deleted"),
            |c: Option<&DynamicObject>| c.is_none(),
            WAIT,
        )
        .await,
    )
    .await;
    let leftover_snapshots = env.cloud().leftovers().snapshots;
    assert!(leftover_snapshots.is_empty(), "{leftover_snapshots:?}");

    ns.cleanup().await.unwrap();
    env.teardown().await.expect("clean teardown");
}

/// Needs the node agents' CSI mount flow (NodeStage/NodePublish) to run pods with claims.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_restored_from_a_snapshot_holds_the_snapshotted_data() {
    init_tracing();
    let env = ManilaCsiEnvironment::start(EnvironmentOptions::default())
        .await
        .expect("the driver deploys");
    let client = env.client();
    let ns = env.cluster().namespace("e2e-restore").await.unwrap();
    let claims: Api<PersistentVolumeClaim> = ns.api();
    let pods: Api<Pod> = ns.api();
    claims
        .create(
            &PostParams::default(),
            &claim("source", None, "1Gi", "ReadWriteMany"),
        )
        .await
        .unwrap();
    check(
        &env,
        "claim Bound",
        wait_claim_bound(&claims, "source", WAIT).await,
    )
    .await;
    pods.create(
        &PostParams::default(),
        &pod_with_claim(
            "writer",
            "source",
            None,
            "echo snapshotted > /data/payload && sync",
        ),
    )
    .await
    .unwrap();
    check(
        &env,
        "writer Ready",
        wait_pod_ready(&pods, "writer", WAIT).await,
    )
    .await;
    let out = env
        .cluster()
        .exec(ns.name(), "writer", "app", &["cat", "/data/payload"])
        .await
        .unwrap();
    assert_eq!(out.stdout, b"snapshotted\n");

    let snapshots_api = snapshots::volume_snapshots(&client, ns.name());
    snapshots_api
        .create(
            &PostParams::default(),
            &volume_snapshot("snap", "source", SNAPSHOT_CLASS),
        )
        .await
        .unwrap();
    check(
        &env,
        "VolumeSnapshot readyToUse",
        snapshots::wait_ready(&snapshots_api, "snap", WAIT).await,
    )
    .await;
    // Written after the snapshot: must not appear in the restored claim.
    let out = env
        .cluster()
        .exec(
            ns.name(),
            "writer",
            "app",
            &["sh", "-c", "echo later > /data/after-snapshot"],
        )
        .await
        .unwrap();
    assert_eq!(out.code(), 0, "{out:?}");

    claims
        .create(
            &PostParams::default(),
            &claim_from_snapshot("restored", None, "1Gi", "ReadWriteMany", "snap"),
        )
        .await
        .unwrap();
    let restored = check(
        &env,
        "restored claim Bound",
        wait_claim_bound(&claims, "restored", WAIT).await,
    )
    .await;
    let restored_share = volume_handle(&bound_volume(&client, &restored).await.unwrap()).unwrap();
    let share = env
        .inspector()
        .share(&restored_share)
        .await
        .unwrap()
        .expect("the restored share exists");
    assert!(share.snapshot_id.is_some(), "{share:?}");

    pods.create(
        &PostParams::default(),
        &pod_with_claim("reader", "restored", None, "true"),
    )
    .await
    .unwrap();
    check(
        &env,
        "reader Ready",
        wait_pod_ready(&pods, "reader", WAIT).await,
    )
    .await;
    let out = env
        .cluster()
        .exec(ns.name(), "reader", "app", &["cat", "/data/payload"])
        .await
        .unwrap();
    assert_eq!(out.stdout, b"snapshotted\n", "{out:?}");
    let out = env
        .cluster()
        .exec(ns.name(), "reader", "app", &["ls", "/data"])
        .await
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "payload\n");

    for pod in ["writer", "reader"] {
        pods.delete(pod, &DeleteParams::default()).await.unwrap();
    }
    for pod in ["writer", "reader"] {
        wait::wait_deleted(&pods, pod, WAIT).await.unwrap();
    }
    snapshots_api
        .delete("snap", &DeleteParams::default())
        .await
        .unwrap();
    ns.cleanup().await.unwrap();
    env.teardown().await.expect("clean teardown");
}
