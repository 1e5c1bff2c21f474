//! The snapshotter against a real control plane (one boot for the whole file), with the
//! snapshot controller (in-process), the real Manila driver (controller only) and the fake
//! cloud: dynamic snapshots become Manila snapshots and turn ready (also when Manila takes
//! its time), the deletion policies hold, pre-provisioned snapshots bind and are deleted,
//! creation errors are reported, leader election holds the Lease, and nothing is left over.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use csi_proto::v1::DeleteVolumeRequest;
use csi_snapshotter::LEASE_PREFIX;
use fakes::Delays;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use kube_support::wait::wait_deleted;
use snapshot_controller::api::{
    SNAPSHOTTER_SECRET_NAME_PARAMETER, SNAPSHOTTER_SECRET_NAMESPACE_PARAMETER,
    VOLUME_SNAPSHOT_CONTENT_FINALIZER,
};
use snapshot_controller::{VolumeSnapshot, VolumeSnapshotClass, VolumeSnapshotContent};
use support::{
    create_snapshot, delete_snapshot, manila_snapshots, snapshotter, wait_manila_snapshot_gone,
};
use testkit::cloud::{credentials_secret, csi_secrets, wait_no_leftovers};
use testkit::drivers::{MANILA_DRIVER as DRIVER, ManilaController, create_volume_request};
use testkit::objects::{delete_and_wait_gone, namespace, wait_events, wait_object};
use testkit::sidecars::ControllerBed;
use testkit::snapshots::{
    create_snapshot_of_claim, dynamic_content_name, pre_provisioned_content, snapshot_class,
    snapshot_of_content,
};
use testkit::task::InProcess;
use testkit::volumes::StaticVolume;

const NS: &str = "snapshotter-test";
const CREDENTIALS: &str = "manila-creds";
const WAIT: Duration = Duration::from_secs(60);
const GI: i64 = 1 << 30;

#[tokio::test]
async fn csi_snapshotter_on_a_real_control_plane() {
    let bed = ControllerBed::start(&["nova"], &[]).await;
    let (client, cloud, driver) = (bed.client(), &bed.cloud, &bed.driver);
    snapshot_controller::crds::install(&client, "csi-snapshotter-tests", WAIT)
        .await
        .expect("CRDs become Established");
    namespace(&client, NS).await;
    credentials_secret(&client, cloud, NS, CREDENTIALS).await;

    let snapshotter = snapshotter(
        client.clone(),
        &driver.socket,
        &[
            "--leader-election",
            &format!("--leader-election-namespace={NS}"),
            "--extra-create-metadata",
        ],
    )
    .await;
    assert_eq!(snapshotter.driver_name(), DRIVER);
    let identity = snapshotter.leader_identity().unwrap().to_owned();
    let metrics = snapshotter.metrics();
    let running = InProcess::spawn(|stopped| snapshotter.run(stopped));
    let controller =
        InProcess::spawn(|stopped| snapshot_controller::controller::run(client.clone(), stopped));

    // A share made behind the sidecars' backs, and a static PV/claim bound to it.
    let share = driver
        .controller()
        .create_volume(create_volume_request("share-data", GI, csi_secrets(cloud)))
        .await
        .unwrap_or_else(|e| panic!("CreateVolume share-data: {e}\n{}", driver.log()))
        .into_inner()
        .volume
        .unwrap()
        .volume_id;
    StaticVolume::new("pv-data", NS, "data", DRIVER, &share)
        .create_bound(&client, WAIT)
        .await;
    let classes: Api<VolumeSnapshotClass> = Api::all(client.clone());
    for (name, policy, default, secret) in [
        ("manila-delete", "Delete", true, CREDENTIALS),
        ("manila-retain", "Retain", false, CREDENTIALS),
        ("manila-bad-secret", "Delete", false, "missing-creds"),
    ] {
        // The snapshotter's secret is `secret` in the test namespace.
        let parameters = [
            (SNAPSHOTTER_SECRET_NAME_PARAMETER, secret),
            (SNAPSHOTTER_SECRET_NAMESPACE_PARAMETER, NS),
        ];
        let class = snapshot_class(name, DRIVER, policy, default, &parameters);
        classes
            .create(&PostParams::default(), &class)
            .await
            .unwrap();
    }

    the_leader_holds_the_lease(&client, &identity).await;
    dynamic_snapshot_turns_ready_and_is_deleted(&client, cloud, &share).await;
    // The slow snapshot was asked for again until ready, and deleted once.
    let text = metrics.render();
    let count = |method: &str| -> u64 {
        let prefix = format!(
            "csi_sidecar_operations_seconds_count{{method_name=\"/csi.v1.Controller/{method}\",grpc_status_code=\"Ok\"}} "
        );
        text.lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .map_or(0, |n| n.parse().unwrap())
    };
    assert!(count("CreateSnapshot") >= 2, "{text}");
    assert_eq!(count("DeleteSnapshot"), 1, "{text}");
    retained_snapshot_outlives_its_volume_snapshot(&client, cloud, driver).await;
    pre_provisioned_snapshot_binds_and_is_deleted(&client, cloud, driver, &share).await;
    creation_errors_are_reported(&client).await;

    // Everything the sidecars made is gone; only the test's own share remains, then not.
    assert!(
        manila_snapshots(cloud).is_empty(),
        "{:?}",
        manila_snapshots(cloud)
    );
    driver
        .controller()
        .delete_volume(DeleteVolumeRequest {
            volume_id: share,
            secrets: csi_secrets(cloud),
        })
        .await
        .unwrap();
    wait_no_leftovers(cloud, WAIT).await;

    running.stop().await.expect("the snapshotter stops cleanly");
    controller.stop().await;
    bed.shutdown().await;
}

async fn the_leader_holds_the_lease(client: &Client, identity: &str) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), NS);
    let name = format!("{LEASE_PREFIX}manila-csi-openstack-org");
    let what = format!("Lease {name} held by {identity}");
    wait_object(&leases, &name, &what, WAIT, |lease: &Lease| {
        (lease.spec.as_ref()?.holder_identity.as_deref() == Some(identity)).then_some(())
    })
    .await;
}

/// With a slow Manila, the content is first not ready, then ready; the VolumeSnapshot
/// follows; deleting it (Delete policy) deletes the Manila snapshot and the content.
async fn dynamic_snapshot_turns_ready_and_is_deleted(
    client: &Client,
    cloud: &fakes::FakeCloud,
    share: &str,
) {
    cloud.set_delays(Delays {
        snapshot_create_ms: 1500,
        ..Delays::none()
    });
    let snapshots: Api<VolumeSnapshot> = Api::namespaced(client.clone(), NS);
    let contents: Api<VolumeSnapshotContent> = Api::all(client.clone());
    let vs = create_snapshot_of_claim(&snapshots, "snap-delete", "data", None).await;
    let uid = vs.uid().unwrap();
    let content_name = dynamic_content_name(&vs);

    let what = format!("VolumeSnapshotContent {content_name} with a handle, not ready");
    let pending = wait_object(&contents, &content_name, &what, WAIT, |c| {
        let status = c.status.as_ref()?;
        (status.snapshot_handle.is_some() && status.ready_to_use == Some(false)).then_some(())
    })
    .await;
    let handle = pending.status.unwrap().snapshot_handle.unwrap();
    let ready = content_ready(&contents, &content_name).await;
    cloud.set_delays(Delays::none());

    let status = ready.status.unwrap();
    assert_eq!(status.snapshot_handle.as_deref(), Some(handle.as_str()));
    assert_eq!(status.restore_size, Some(GI));
    assert!(status.creation_time.is_some_and(|t| t > 0), "{status:?}");
    assert_eq!(status.error, None);
    // The handle is the Manila snapshot, named after the VolumeSnapshot's uid, of our share.
    let manila = cloud.leftovers().snapshots;
    let snapshot = manila
        .iter()
        .find(|s| s.id == handle)
        .expect("Manila snapshot exists");
    assert_eq!(
        snapshot.name.as_deref(),
        Some(format!("snapshot-{uid}").as_str())
    );
    assert_eq!(snapshot.share_id.as_deref(), Some(share));
    assert_eq!(snapshot.status, "available");

    let vs = snapshot_ready(&snapshots, "snap-delete").await;
    assert_eq!(
        vs.status.unwrap().restore_size,
        Some(Quantity("1Gi".into()))
    );

    delete_and_wait_gone(&snapshots, "snap-delete", WAIT).await;
    wait_deleted(&contents, &content_name, WAIT).await.unwrap();
    wait_manila_snapshot_gone(cloud, &handle, WAIT).await;
}

/// Retain: the VolumeSnapshot goes, the content and the Manila snapshot stay; deleting the
/// content by hand then only releases it (the snapshot is the test's to delete).
async fn retained_snapshot_outlives_its_volume_snapshot(
    client: &Client,
    cloud: &fakes::FakeCloud,
    driver: &ManilaController,
) {
    let snapshots: Api<VolumeSnapshot> = Api::namespaced(client.clone(), NS);
    let contents: Api<VolumeSnapshotContent> = Api::all(client.clone());
    let vs =
        create_snapshot_of_claim(&snapshots, "snap-retain", "data", Some("manila-retain")).await;
    let content_name = dynamic_content_name(&vs);
    let ready = content_ready(&contents, &content_name).await;
    let handle = ready.status.unwrap().snapshot_handle.unwrap();

    delete_and_wait_gone(&snapshots, "snap-retain", WAIT).await;
    let content = contents.get(&content_name).await.unwrap();
    assert!(content.metadata.deletion_timestamp.is_none());
    assert!(
        content
            .finalizers()
            .iter()
            .any(|f| f == VOLUME_SNAPSHOT_CONTENT_FINALIZER),
        "{:?}",
        content.finalizers()
    );
    assert!(
        manila_snapshots(cloud)
            .iter()
            .any(|(id, _, _)| *id == handle),
        "the retained Manila snapshot is kept: {:?}",
        manila_snapshots(cloud)
    );

    delete_and_wait_gone(&contents, &content_name, WAIT).await;
    assert!(
        manila_snapshots(cloud)
            .iter()
            .any(|(id, _, _)| *id == handle),
        "deleting a Retain content keeps the Manila snapshot"
    );
    delete_snapshot(driver, cloud, &handle).await;
}

/// A content naming an existing Manila snapshot is marked ready (the driver cannot list
/// snapshots); its VolumeSnapshot binds; deleting it (Delete policy) deletes the snapshot.
async fn pre_provisioned_snapshot_binds_and_is_deleted(
    client: &Client,
    cloud: &fakes::FakeCloud,
    driver: &ManilaController,
    share: &str,
) {
    let (handle, _) = create_snapshot(driver, cloud, "pre-made", share).await;
    let contents: Api<VolumeSnapshotContent> = Api::all(client.clone());
    let snapshots: Api<VolumeSnapshot> = Api::namespaced(client.clone(), NS);
    // Another driver's content, created first, is left alone.
    contents
        .create(
            &PostParams::default(),
            &pre_provisioned_content(
                "foreign-content",
                "other.csi.example",
                "x",
                NS,
                "foreign-snap",
            ),
        )
        .await
        .unwrap();
    let mut content: VolumeSnapshotContent =
        pre_provisioned_content("pre-content", DRIVER, &handle, NS, "pre-snap");
    content.metadata.annotations = Some(BTreeMap::from([
        (
            snapshot_controller::api::DELETION_SECRET_NAME_ANNOTATION.to_owned(),
            CREDENTIALS.to_owned(),
        ),
        (
            snapshot_controller::api::DELETION_SECRET_NAMESPACE_ANNOTATION.to_owned(),
            NS.to_owned(),
        ),
    ]));
    contents
        .create(&PostParams::default(), &content)
        .await
        .unwrap();
    snapshots
        .create(
            &PostParams::default(),
            &snapshot_of_content("pre-snap", "pre-content"),
        )
        .await
        .unwrap();

    let ready = content_ready(&contents, "pre-content").await;
    assert_eq!(
        ready.status.unwrap().snapshot_handle.as_deref(),
        Some(handle.as_str())
    );
    snapshot_ready(&snapshots, "pre-snap").await;

    let foreign = contents.get("foreign-content").await.unwrap();
    assert_eq!(foreign.status, None, "another driver's content is not ours");
    // Nobody releases it but the test. Delete first, then drop the finalizers: once the
    // deletion timestamp is set the snapshot controller can no longer add its finalizer
    // back, which it may do between a finalizer removal and a later delete.
    contents
        .delete("foreign-content", &DeleteParams::default())
        .await
        .unwrap();
    contents
        .patch(
            "foreign-content",
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    wait_deleted(&contents, "foreign-content", WAIT)
        .await
        .unwrap();

    snapshots
        .delete("pre-snap", &DeleteParams::default())
        .await
        .unwrap();
    wait_deleted(&contents, "pre-content", WAIT).await.unwrap();
    wait_manila_snapshot_gone(cloud, &handle, WAIT).await;
}

/// A class naming a secret that does not exist: the content's status.error and a
/// SnapshotCreationFailed Warning event name it (the VolumeSnapshot mirrors the error);
/// deleting the snapshot lets the content go without a DeleteSnapshot.
async fn creation_errors_are_reported(client: &Client) {
    let snapshots: Api<VolumeSnapshot> = Api::namespaced(client.clone(), NS);
    let contents: Api<VolumeSnapshotContent> = Api::all(client.clone());
    let vs =
        create_snapshot_of_claim(&snapshots, "snap-bad", "data", Some("manila-bad-secret")).await;
    let content_name = dynamic_content_name(&vs);
    let what = format!("VolumeSnapshotContent {content_name} with an error");
    let failed = wait_object(&contents, &content_name, &what, WAIT, |c| {
        c.status
            .as_ref()?
            .error
            .as_ref()?
            .message
            .as_ref()
            .map(|_| ())
    })
    .await;
    let message = failed.status.unwrap().error.unwrap().message.unwrap();
    assert!(message.contains("missing-creds"), "{message}");
    assert!(
        message.starts_with("Failed to create snapshot"),
        "{message}"
    );
    // The sidecar writes the status before it records the event: wait for the event.
    wait_events(
        client,
        "default",
        &content_name,
        1,
        WAIT,
        |type_, reason, message| {
            type_ == "Warning"
                && reason == "SnapshotCreationFailed"
                && message.contains("missing-creds")
        },
    )
    .await;
    let what = "VolumeSnapshot snap-bad with the content's error";
    wait_object(&snapshots, "snap-bad", what, WAIT, |vs| {
        let message = vs.status.as_ref()?.error.as_ref()?.message.as_deref()?;
        message.contains("missing-creds").then_some(())
    })
    .await;

    delete_and_wait_gone(&snapshots, "snap-bad", WAIT).await;
    wait_deleted(&contents, &content_name, WAIT).await.unwrap();
}

/// Waits until the content `name` is ready to use, and returns it.
async fn content_ready(contents: &Api<VolumeSnapshotContent>, name: &str) -> VolumeSnapshotContent {
    let what = format!("VolumeSnapshotContent {name} ready");
    wait_object(contents, name, &what, WAIT, |c| {
        (c.status.as_ref()?.ready_to_use == Some(true)).then_some(())
    })
    .await
}

/// Waits until the VolumeSnapshot `name` is ready to use, and returns it.
async fn snapshot_ready(snapshots: &Api<VolumeSnapshot>, name: &str) -> VolumeSnapshot {
    let what = format!("VolumeSnapshot {name} ready");
    wait_object(snapshots, name, &what, WAIT, |vs| {
        vs.is_ready().then_some(())
    })
    .await
}
