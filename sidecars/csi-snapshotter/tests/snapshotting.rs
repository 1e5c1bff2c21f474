//! The snapshotter against a real control plane (one boot for the whole file), with the
//! snapshot controller (in-process), the real Manila driver (controller only) and the fake
//! cloud: dynamic snapshots become Manila snapshots and turn ready (also when Manila takes
//! its time), the deletion policies hold, pre-provisioned snapshots bind and are deleted,
//! creation errors are reported, leader election holds the Lease, and nothing is left over.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use csi_snapshotter::{Config, LEASE_PREFIX, Snapshotter};
use fakes::Delays;
use harness::cluster::wait::{wait_deleted, wait_for_described, wait_until};
use harness::control_plane::ControlPlane;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, ObjectReference, PersistentVolume, PersistentVolumeClaim,
    PersistentVolumeClaimSpec, PersistentVolumeSpec, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use snapshot_controller::api::{
    IS_DEFAULT_CLASS_ANNOTATION, SNAPSHOTTER_SECRET_NAME_PARAMETER,
    SNAPSHOTTER_SECRET_NAMESPACE_PARAMETER, VOLUME_SNAPSHOT_CONTENT_FINALIZER,
    VolumeSnapshotContentSource, VolumeSnapshotSource,
};
use snapshot_controller::{
    DeletionPolicy, VolumeSnapshot, VolumeSnapshotClass, VolumeSnapshotContent,
    VolumeSnapshotContentSpec, VolumeSnapshotSpec,
};
use support::*;

const NS: &str = "snapshotter-test";
const CREDENTIALS: &str = "manila-creds";
const WAIT: Duration = Duration::from_secs(60);
const GI: i64 = 1 << 30;

#[tokio::test]
async fn csi_snapshotter_on_a_real_control_plane() {
    let cp = ControlPlane::builder()
        .start()
        .await
        .expect("control plane starts");
    let client = cp.client();
    snapshot_controller::crds::install(&client, "csi-snapshotter-tests", WAIT)
        .await
        .expect("CRDs become Established");
    namespace(&client, NS).await;
    let cloud = start_cloud().await;
    credentials_secret(&client, &cloud, NS, CREDENTIALS).await;
    let dir = tempfile::tempdir().unwrap();
    let driver = ManilaDriver::start(dir.path());

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
    let running = Running::spawn(snapshotter);
    let (stop_controller, controller_stopped) = tokio::sync::oneshot::channel::<()>();
    let controller = tokio::spawn(snapshot_controller::controller::run(
        client.clone(),
        async move {
            let _ = controller_stopped.await;
        },
    ));

    let share = create_share(&driver, &cloud, "share-data").await;
    create_bound_claim(&client, "data", "pv-data", &share).await;
    create_class(
        &client,
        "manila-delete",
        DeletionPolicy::Delete,
        true,
        CREDENTIALS,
    )
    .await;
    create_class(
        &client,
        "manila-retain",
        DeletionPolicy::Retain,
        false,
        CREDENTIALS,
    )
    .await;
    create_class(
        &client,
        "manila-bad-secret",
        DeletionPolicy::Delete,
        false,
        "missing-creds",
    )
    .await;

    the_leader_holds_the_lease(&client, &identity).await;
    dynamic_snapshot_turns_ready_and_is_deleted(&client, &cloud, &share).await;
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
    retained_snapshot_outlives_its_volume_snapshot(&client, &cloud, &driver).await;
    pre_provisioned_snapshot_binds_and_is_deleted(&client, &cloud, &driver, &share).await;
    creation_errors_are_reported(&client).await;

    // Everything the sidecars made is gone; only the test's own share remains, then not.
    assert!(
        manila_snapshots(&cloud).is_empty(),
        "{:?}",
        manila_snapshots(&cloud)
    );
    delete_share(&driver, &cloud, &share).await;
    wait_until("no leftovers in the fake cloud", WAIT, || async {
        let leftovers = cloud.leftovers();
        if leftovers.is_empty() {
            Ok(Some(()))
        } else {
            Err(format!("{leftovers:?}"))
        }
    })
    .await
    .unwrap();

    running.stop().await.expect("the snapshotter stops cleanly");
    let _ = stop_controller.send(());
    tokio::time::timeout(Duration::from_secs(30), controller)
        .await
        .expect("controller stops on shutdown")
        .expect("controller task");
    cp.shutdown().await.expect("shutdown");
}

async fn the_leader_holds_the_lease(client: &Client, identity: &str) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), NS);
    let name = format!("{LEASE_PREFIX}manila-csi-openstack-org");
    wait_for_described(
        &leases,
        &name,
        &format!("Lease {name} held by {identity}"),
        |lease: Option<&Lease>| {
            lease
                .and_then(|l| l.spec.as_ref())
                .and_then(|s| s.holder_identity.as_deref())
                == Some(identity)
        },
        WAIT,
    )
    .await
    .unwrap();
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
        ..Delays::default()
    });
    let snapshots: Api<VolumeSnapshot> = Api::namespaced(client.clone(), NS);
    let contents: Api<VolumeSnapshotContent> = Api::all(client.clone());
    let vs = snapshots
        .create(
            &PostParams::default(),
            &snapshot_of("snap-delete", "data", None),
        )
        .await
        .unwrap();
    let uid = vs.uid().unwrap();
    let content_name = format!("snapcontent-{uid}");

    let pending = wait_content(&contents, &content_name, "with a handle, not ready", |c| {
        let status = c.status.as_ref()?;
        (status.snapshot_handle.is_some() && status.ready_to_use == Some(false)).then_some(())
    })
    .await;
    let handle = pending.status.unwrap().snapshot_handle.unwrap();
    let ready = wait_content(&contents, &content_name, "ready", |c| {
        (c.status.as_ref()?.ready_to_use == Some(true)).then_some(())
    })
    .await;
    cloud.set_delays(Delays::default());

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

    let vs = wait_for_described(
        &snapshots,
        "snap-delete",
        "VolumeSnapshot snap-delete ready",
        |vs: Option<&VolumeSnapshot>| vs.is_some_and(VolumeSnapshot::is_ready),
        WAIT,
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(
        vs.status.unwrap().restore_size,
        Some(Quantity("1Gi".into()))
    );

    snapshots
        .delete("snap-delete", &DeleteParams::default())
        .await
        .unwrap();
    wait_deleted(&contents, &content_name, WAIT).await.unwrap();
    wait_deleted(&snapshots, "snap-delete", WAIT).await.unwrap();
    wait_until("the Manila snapshot deleted", WAIT, || async {
        let left = manila_snapshots(cloud);
        if left.iter().any(|(id, _, _)| *id == handle) {
            Err(format!("{left:?}"))
        } else {
            Ok(Some(()))
        }
    })
    .await
    .unwrap();
}

/// Retain: the VolumeSnapshot goes, the content and the Manila snapshot stay; deleting the
/// content by hand then only releases it (the snapshot is the test's to delete).
async fn retained_snapshot_outlives_its_volume_snapshot(
    client: &Client,
    cloud: &fakes::FakeCloud,
    driver: &ManilaDriver,
) {
    let snapshots: Api<VolumeSnapshot> = Api::namespaced(client.clone(), NS);
    let contents: Api<VolumeSnapshotContent> = Api::all(client.clone());
    let vs = snapshots
        .create(
            &PostParams::default(),
            &snapshot_of("snap-retain", "data", Some("manila-retain")),
        )
        .await
        .unwrap();
    let content_name = format!("snapcontent-{}", vs.uid().unwrap());
    let ready = wait_content(&contents, &content_name, "ready", |c| {
        (c.status.as_ref()?.ready_to_use == Some(true)).then_some(())
    })
    .await;
    let handle = ready.status.unwrap().snapshot_handle.unwrap();

    snapshots
        .delete("snap-retain", &DeleteParams::default())
        .await
        .unwrap();
    wait_deleted(&snapshots, "snap-retain", WAIT).await.unwrap();
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

    contents
        .delete(&content_name, &DeleteParams::default())
        .await
        .unwrap();
    wait_deleted(&contents, &content_name, WAIT).await.unwrap();
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
    driver: &ManilaDriver,
    share: &str,
) {
    let (handle, _) = create_snapshot(driver, cloud, "pre-made", share).await;
    let contents: Api<VolumeSnapshotContent> = Api::all(client.clone());
    let snapshots: Api<VolumeSnapshot> = Api::namespaced(client.clone(), NS);
    // Another driver's content, created first, is left alone.
    contents
        .create(
            &PostParams::default(),
            &pre_provisioned_content("foreign-content", "foreign-snap", "other.csi.example", "x"),
        )
        .await
        .unwrap();
    let mut content = pre_provisioned_content("pre-content", "pre-snap", DRIVER, &handle);
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
    let vs = VolumeSnapshot::new(
        "pre-snap",
        VolumeSnapshotSpec {
            source: VolumeSnapshotSource {
                persistent_volume_claim_name: None,
                volume_snapshot_content_name: Some("pre-content".into()),
            },
            volume_snapshot_class_name: None,
        },
    );
    snapshots.create(&PostParams::default(), &vs).await.unwrap();

    let ready = wait_content(&contents, "pre-content", "ready", |c| {
        (c.status.as_ref()?.ready_to_use == Some(true)).then_some(())
    })
    .await;
    assert_eq!(
        ready.status.unwrap().snapshot_handle.as_deref(),
        Some(handle.as_str())
    );
    wait_for_described(
        &snapshots,
        "pre-snap",
        "VolumeSnapshot pre-snap ready",
        |vs: Option<&VolumeSnapshot>| vs.is_some_and(VolumeSnapshot::is_ready),
        WAIT,
    )
    .await
    .unwrap();

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
    wait_until(
        "the pre-provisioned Manila snapshot deleted",
        WAIT,
        || async {
            let left = manila_snapshots(cloud);
            if left.iter().any(|(id, _, _)| *id == handle) {
                Err(format!("{left:?}"))
            } else {
                Ok(Some(()))
            }
        },
    )
    .await
    .unwrap();
}

/// A class naming a secret that does not exist: the content's status.error and a
/// SnapshotCreationFailed Warning event name it (the VolumeSnapshot mirrors the error);
/// deleting the snapshot lets the content go without a DeleteSnapshot.
async fn creation_errors_are_reported(client: &Client) {
    let snapshots: Api<VolumeSnapshot> = Api::namespaced(client.clone(), NS);
    let contents: Api<VolumeSnapshotContent> = Api::all(client.clone());
    let vs = snapshots
        .create(
            &PostParams::default(),
            &snapshot_of("snap-bad", "data", Some("manila-bad-secret")),
        )
        .await
        .unwrap();
    let content_name = format!("snapcontent-{}", vs.uid().unwrap());
    let failed = wait_content(&contents, &content_name, "with an error", |c| {
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
    wait_until(
        "a SnapshotCreationFailed event naming the secret",
        WAIT,
        || async {
            let events = events(client, "default", &content_name).await;
            if events.iter().any(|(type_, reason, msg)| {
                type_ == "Warning"
                    && reason == "SnapshotCreationFailed"
                    && msg.contains("missing-creds")
            }) {
                Ok(Some(()))
            } else {
                Err(format!("{events:?}"))
            }
        },
    )
    .await
    .unwrap();
    wait_for_described(
        &snapshots,
        "snap-bad",
        "VolumeSnapshot snap-bad with the content's error",
        |vs: Option<&VolumeSnapshot>| {
            vs.and_then(|v| v.status.as_ref())
                .and_then(|s| s.error.as_ref())
                .and_then(|e| e.message.as_deref())
                .is_some_and(|m| m.contains("missing-creds"))
        },
        WAIT,
    )
    .await
    .unwrap();

    snapshots
        .delete("snap-bad", &DeleteParams::default())
        .await
        .unwrap();
    wait_deleted(&contents, &content_name, WAIT).await.unwrap();
    wait_deleted(&snapshots, "snap-bad", WAIT).await.unwrap();
}

// ---- set-up ----

async fn snapshotter(client: Client, socket: &Path, extra: &[&str]) -> Snapshotter {
    let mut args = vec![
        "csi-snapshotter".to_string(),
        format!("--csi-address={}", socket.display()),
        "--timeout=60s".into(),
        "--retry-interval-start=100ms".into(),
        "--retry-interval-max=1s".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let config = <Config as clap::Parser>::try_parse_from(args).unwrap();
    Snapshotter::new(config, client).await.unwrap()
}

/// A running snapshotter; stopped by [`Running::stop`] (or aborted on drop).
struct Running {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<sidecar_common::Result<()>>>,
}

impl Running {
    fn spawn(snapshotter: Snapshotter) -> Running {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(snapshotter.run(async {
            let _ = stopped.await;
        }));
        Running {
            stop: Some(stop),
            task: Some(task),
        }
    }

    async fn stop(mut self) -> sidecar_common::Result<()> {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(Duration::from_secs(30), self.task.take().unwrap())
            .await
            .expect("the snapshotter stops within 30 s")
            .unwrap()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// A static PV for the share and a claim the real PV controller binds to it.
async fn create_bound_claim(client: &Client, claim: &str, pv_name: &str, handle: &str) {
    let capacity = BTreeMap::from([("storage".to_owned(), Quantity("1Gi".into()))]);
    let pv = PersistentVolume {
        metadata: ObjectMeta {
            name: Some(pv_name.into()),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            capacity: Some(capacity.clone()),
            access_modes: Some(vec!["ReadWriteMany".into()]),
            persistent_volume_reclaim_policy: Some("Retain".into()),
            storage_class_name: Some(String::new()),
            claim_ref: Some(ObjectReference {
                namespace: Some(NS.into()),
                name: Some(claim.into()),
                ..Default::default()
            }),
            csi: Some(CSIPersistentVolumeSource {
                driver: DRIVER.into(),
                volume_handle: handle.into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    Api::<PersistentVolume>::all(client.clone())
        .create(&PostParams::default(), &pv)
        .await
        .unwrap();
    let pvc = PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(claim.into()),
            ..Default::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteMany".into()]),
            storage_class_name: Some(String::new()),
            resources: Some(VolumeResourceRequirements {
                requests: Some(capacity),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NS);
    pvcs.create(&PostParams::default(), &pvc).await.unwrap();
    wait_for_described(
        &pvcs,
        claim,
        &format!("PVC {claim} Bound by the PV controller"),
        |pvc: Option<&PersistentVolumeClaim>| {
            pvc.and_then(|p| p.status.as_ref())
                .and_then(|s| s.phase.as_deref())
                == Some("Bound")
        },
        WAIT,
    )
    .await
    .unwrap();
}

/// A class of our driver whose snapshotter secret is `secret` in the test namespace.
async fn create_class(
    client: &Client,
    name: &str,
    policy: DeletionPolicy,
    default: bool,
    secret: &str,
) {
    let mut class = VolumeSnapshotClass::new(name, DRIVER, policy);
    class.parameters = BTreeMap::from([
        (
            SNAPSHOTTER_SECRET_NAME_PARAMETER.to_owned(),
            secret.to_owned(),
        ),
        (
            SNAPSHOTTER_SECRET_NAMESPACE_PARAMETER.to_owned(),
            NS.to_owned(),
        ),
    ]);
    if default {
        class.metadata.annotations = Some(BTreeMap::from([(
            IS_DEFAULT_CLASS_ANNOTATION.to_owned(),
            "true".to_owned(),
        )]));
    }
    Api::<VolumeSnapshotClass>::all(client.clone())
        .create(&PostParams::default(), &class)
        .await
        .unwrap();
}

/// A pre-provisioned content for `driver`'s snapshot `handle`, meant for `snapshot`.
fn pre_provisioned_content(
    name: &str,
    snapshot: &str,
    driver: &str,
    handle: &str,
) -> VolumeSnapshotContent {
    VolumeSnapshotContent::new(
        name,
        VolumeSnapshotContentSpec {
            volume_snapshot_ref: ObjectReference {
                name: Some(snapshot.into()),
                namespace: Some(NS.into()),
                ..Default::default()
            },
            deletion_policy: DeletionPolicy::Delete,
            driver: driver.into(),
            source: VolumeSnapshotContentSource {
                volume_handle: None,
                snapshot_handle: Some(handle.into()),
            },
            volume_snapshot_class_name: None,
            source_volume_mode: None,
        },
    )
}

fn snapshot_of(name: &str, pvc: &str, class: Option<&str>) -> VolumeSnapshot {
    VolumeSnapshot::new(
        name,
        VolumeSnapshotSpec {
            source: VolumeSnapshotSource {
                persistent_volume_claim_name: Some(pvc.into()),
                volume_snapshot_content_name: None,
            },
            volume_snapshot_class_name: class.map(str::to_owned),
        },
    )
}

/// Waits until `check` holds for the content; returns it as it was then.
async fn wait_content(
    api: &Api<VolumeSnapshotContent>,
    name: &str,
    what: &str,
    check: impl Fn(&VolumeSnapshotContent) -> Option<()>,
) -> VolumeSnapshotContent {
    wait_for_described(
        api,
        name,
        &format!("VolumeSnapshotContent {name} {what}"),
        |c: Option<&VolumeSnapshotContent>| c.and_then(&check).is_some(),
        WAIT,
    )
    .await
    .unwrap()
    .unwrap()
}
