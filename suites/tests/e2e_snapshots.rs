//! Snapshots with the driver deployed from `fixtures/manila-csi/` on its own embedded cluster:
//! a VolumeSnapshot of a claim becomes ready with a Manila snapshot behind it, and (with the
//! node agents' CSI mount flow) a claim restored from it holds the data. One environment per
//! test.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use harness::cluster::wait;
use kube::api::{DeleteParams, DynamicObject};
use suites::e2e::snapshots;
use suites::e2e::workload::{WAIT, Workload, claim, claim_from_snapshot, pod_with_claim};
use suites::e2e::{DRIVER_NAME, EnvironmentOptions, ManilaCsiEnvironment, SNAPSHOT_CLASS};

const LOGS: &str = "suites=info,harness=info";

/// The VolumeSnapshotContent bound to a snapshot.
fn bound_content(snapshot: &DynamicObject) -> String {
    let status = &snapshot.data["status"];
    status["boundVolumeSnapshotContentName"]
        .as_str()
        .unwrap_or_else(|| panic!("no bound content in {status}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_snapshot_becomes_ready_with_a_manila_snapshot_and_goes_with_it()
-> anyhow::Result<()> {
    testkit::init_tracing(LOGS);
    let env = ManilaCsiEnvironment::start(EnvironmentOptions::default()).await?;
    let workload = Workload::create(&env, "e2e-snapshot").await?;
    let source = workload
        .bound_claim(&claim("source", None, "1Gi", "ReadWriteMany"))
        .await?;

    let ready = workload
        .ready_snapshot("snap", "source", SNAPSHOT_CLASS)
        .await?;
    let content_name = bound_content(&ready);
    let contents = snapshots::volume_snapshot_contents(&env.client());
    let content = contents.get(&content_name).await?;
    let handle = content.data["status"]["snapshotHandle"]
        .as_str()
        .unwrap_or_else(|| panic!("no snapshotHandle in {}", content.data["status"]))
        .to_string();
    assert!(snapshots::is_ready(&content), "{}", content.data["status"]);
    assert_eq!(content.data["spec"]["driver"].as_str(), Some(DRIVER_NAME));

    // The Manila snapshot behind it copies the claim's share.
    let cloud_snapshots = env.inspector().snapshots().await?;
    let cloud_snapshot = cloud_snapshots
        .iter()
        .find(|s| s.id == handle)
        .unwrap_or_else(|| panic!("no Manila snapshot {handle} in {cloud_snapshots:?}"));
    assert_eq!(cloud_snapshot.share_id, source.share_id);
    assert_eq!(cloud_snapshot.status, "available");

    // Deleting the VolumeSnapshot (policy Delete) deletes the content and the snapshot.
    workload
        .snapshots()
        .delete("snap", &DeleteParams::default())
        .await?;
    let content_gone = wait::wait_for_described(
        &contents,
        &content_name,
        &format!("VolumeSnapshotContent {content_name} deleted"),
        |c: Option<&DynamicObject>| c.is_none(),
        WAIT,
    )
    .await;
    workload
        .check("VolumeSnapshotContent deleted", content_gone)
        .await?;
    let leftover_snapshots = env.cloud().leftovers().snapshots;
    assert!(leftover_snapshots.is_empty(), "{leftover_snapshots:?}");

    workload.cleanup().await?;
    env.teardown().await?;
    Ok(())
}

/// Needs the node agents' CSI mount flow (NodeStage/NodePublish) to run pods with claims.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_restored_from_a_snapshot_holds_the_snapshotted_data() -> anyhow::Result<()> {
    testkit::init_tracing(LOGS);
    let env = ManilaCsiEnvironment::start(EnvironmentOptions::default()).await?;
    let workload = Workload::create(&env, "e2e-restore").await?;
    workload
        .bound_claim(&claim("source", None, "1Gi", "ReadWriteMany"))
        .await?;
    workload
        .ready_pod(&pod_with_claim(
            "writer",
            "source",
            None,
            "echo snapshotted > /data/payload && sync",
        ))
        .await?;
    assert_eq!(
        workload.exec("writer", "cat /data/payload").await?,
        "snapshotted\n"
    );

    workload
        .ready_snapshot("snap", "source", SNAPSHOT_CLASS)
        .await?;
    // Written after the snapshot: must not appear in the restored claim.
    workload
        .exec("writer", "echo later > /data/after-snapshot")
        .await?;

    let restored = workload
        .bound_claim(&claim_from_snapshot(
            "restored",
            None,
            "1Gi",
            "ReadWriteMany",
            "snap",
        ))
        .await?;
    let share = env
        .inspector()
        .share(&restored.share_id)
        .await?
        .expect("the restored share exists");
    assert!(share.snapshot_id.is_some(), "{share:?}");

    workload
        .ready_pod(&pod_with_claim("reader", "restored", None, "true"))
        .await?;
    assert_eq!(
        workload.exec("reader", "cat /data/payload").await?,
        "snapshotted\n"
    );
    assert_eq!(workload.exec("reader", "ls /data").await?, "payload\n");

    workload.delete_pods(&["writer", "reader"]).await?;
    workload
        .snapshots()
        .delete("snap", &DeleteParams::default())
        .await?;
    workload.cleanup().await?;
    env.teardown().await?;
    Ok(())
}
