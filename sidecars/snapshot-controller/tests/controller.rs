//! The snapshot controller against a real control plane (one boot for the whole file): the
//! CRDs install and validate, dynamic and pre-provisioned snapshots bind and mirror their
//! content's status, finalizers come and go, deletion policies hold, and errors are reported.
//!
//! The CSI snapshotter is played by the test: it writes the content status and, on deletion,
//! removes the content finalizer, as the sidecar does after DeleteSnapshot.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use control_plane::ControlPlane;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use kube_support::wait::wait_deleted;
use serde_json::json;
use snapshot_controller::api::{
    BEING_DELETED_ANNOTATION, PVC_AS_SOURCE_FINALIZER, VOLUME_SNAPSHOT_AS_SOURCE_FINALIZER,
    VOLUME_SNAPSHOT_BOUND_FINALIZER, VOLUME_SNAPSHOT_CONTENT_FINALIZER,
    VolumeSnapshotContentSource, VolumeSnapshotSource,
};
use snapshot_controller::{
    DeletionPolicy, VolumeSnapshot, VolumeSnapshotClass, VolumeSnapshotContent, VolumeSnapshotSpec,
};
use testkit::drivers::MANILA_DRIVER as DRIVER;
use testkit::objects::{delete_and_wait_gone, events, namespace, wait_events, wait_object};
use testkit::snapshots::{
    create_snapshot_of_claim, dynamic_content_name, pre_provisioned_content, snapshot_class,
    snapshot_of_content,
};
use testkit::task::InProcess;
use testkit::volumes::StaticVolume;
use testkit::wait_for;

const NS: &str = "snap-test";
const WAIT: Duration = Duration::from_secs(60);
const GI: i64 = 1 << 30;

#[tokio::test]
async fn snapshot_controller_on_a_real_control_plane() {
    let cp = ControlPlane::builder()
        .start()
        .await
        .expect("control plane starts");
    let client = cp.client();
    snapshot_controller::crds::install(&client, "snapshot-controller-tests", WAIT)
        .await
        .expect("CRDs become Established");
    namespace(&client, NS).await;

    invalid_snapshots_are_rejected_by_the_schema(&client).await;

    let controller =
        InProcess::spawn(|stopped| snapshot_controller::controller::run(client.clone(), stopped));

    StaticVolume::new("pv-data", NS, "data", DRIVER, "share-data")
        .create_bound(&client, WAIT)
        .await;
    let classes: Api<VolumeSnapshotClass> = Api::all(client.clone());
    for (name, policy, default) in [
        ("manila-delete", "Delete", true),
        ("manila-retain", "Retain", false),
    ] {
        let class = snapshot_class(name, DRIVER, policy, default, &[]);
        classes
            .create(&PostParams::default(), &class)
            .await
            .unwrap();
    }

    dynamic_snapshot_with_delete_policy(&client).await;
    dynamic_snapshot_with_retain_policy(&client).await;
    missing_pvc_is_reported(&client).await;
    pre_provisioned_snapshot_binds(&client).await;

    controller.stop().await;
    cp.shutdown().await.expect("shutdown");
}

async fn invalid_snapshots_are_rejected_by_the_schema(client: &Client) {
    let snapshots: Api<VolumeSnapshot> = Api::namespaced(client.clone(), NS);
    for (name, source) in [
        (
            "both-sources",
            VolumeSnapshotSource {
                persistent_volume_claim_name: Some("data".into()),
                volume_snapshot_content_name: Some("content".into()),
            },
        ),
        ("no-source", VolumeSnapshotSource::default()),
    ] {
        let vs = VolumeSnapshot::new(
            name,
            VolumeSnapshotSpec {
                source,
                volume_snapshot_class_name: None,
            },
        );
        let err = snapshots
            .create(&PostParams::default(), &vs)
            .await
            .expect_err(name);
        match err {
            kube::Error::Api(status) => {
                assert_eq!(status.code, 422, "{name}: {status:?}");
                assert!(
                    status.message.contains("spec.source"),
                    "{name}: {}",
                    status.message
                );
            }
            other => panic!("{name}: expected a validation error, got {other}"),
        }
    }
    // A content with an unknown deletion policy is refused as well.
    let contents: Api<VolumeSnapshotContent> = Api::all(client.clone());
    let mut raw_bad: serde_json::Value =
        pre_provisioned_content("bad-policy", DRIVER, "handle", NS, "x");
    raw_bad["spec"]["deletionPolicy"] = json!("Sometimes");
    let err = contents
        .patch(
            "bad-policy",
            &PatchParams::apply("tests"),
            &Patch::Apply(&raw_bad),
        )
        .await
        .expect_err("unknown deletion policy");
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 422 && s.message.contains("deletionPolicy")),
        "{err}"
    );
}

async fn dynamic_snapshot_with_delete_policy(client: &Client) {
    let snapshots: Api<VolumeSnapshot> = Api::namespaced(client.clone(), NS);
    let contents: Api<VolumeSnapshotContent> = Api::all(client.clone());
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NS);

    // No class named: the driver's default class is chosen and recorded.
    let vs = create_snapshot_of_claim(&snapshots, "snap-delete", "data", None).await;
    let uid = vs.uid().unwrap();
    let content_name = dynamic_content_name(&vs);

    let vs = wait_snapshot(&snapshots, "snap-delete", "bound, not ready", |vs| {
        let status = vs.status.as_ref()?;
        (status.bound_volume_snapshot_content_name.as_deref() == Some(content_name.as_str())
            && status.ready_to_use == Some(false)
            && has_finalizer(vs, VOLUME_SNAPSHOT_BOUND_FINALIZER))
        .then_some(())
    })
    .await;
    assert_eq!(
        vs.spec.volume_snapshot_class_name.as_deref(),
        Some("manila-delete")
    );
    assert!(has_finalizer(&vs, VOLUME_SNAPSHOT_AS_SOURCE_FINALIZER));

    let content = contents.get(&content_name).await.unwrap();
    assert_eq!(content.spec.driver, DRIVER);
    assert_eq!(content.spec.deletion_policy, DeletionPolicy::Delete);
    assert_eq!(
        content.spec.source,
        VolumeSnapshotContentSource {
            volume_handle: Some("share-data".into()),
            snapshot_handle: None
        }
    );
    assert_eq!(
        content.spec.volume_snapshot_class_name.as_deref(),
        Some("manila-delete")
    );
    assert_eq!(
        content.spec.source_volume_mode.as_deref(),
        Some("Filesystem")
    );
    let reference = &content.spec.volume_snapshot_ref;
    assert_eq!(
        (
            reference.name.as_deref(),
            reference.namespace.as_deref(),
            reference.uid.as_deref()
        ),
        (Some("snap-delete"), Some(NS), Some(uid.as_str()))
    );
    wait_for("the content finalizer", WAIT, || async {
        let c = contents
            .get(&content_name)
            .await
            .map_err(|e| e.to_string())?;
        Ok(has_finalizer(&c, VOLUME_SNAPSHOT_CONTENT_FINALIZER).then_some(()))
    })
    .await;
    // The PVC is protected while the snapshot is being taken.
    assert!(has_finalizer(
        &pvcs.get("data").await.unwrap(),
        PVC_AS_SOURCE_FINALIZER
    ));

    // The "snapshotter" reports the snapshot taken and ready.
    play_snapshotter_created(client, &content_name, "manila-snap-1").await;
    let vs = wait_snapshot(&snapshots, "snap-delete", "ready to use", |vs| {
        vs.is_ready().then_some(())
    })
    .await;
    let status = vs.status.unwrap();
    assert_eq!(status.restore_size, Some(Quantity("1Gi".into())));
    assert_eq!(
        status.creation_time.unwrap().0.as_second(),
        1_700_000_000,
        "creation time from the content's nanoseconds"
    );
    assert!(status.error.is_none());
    // Ready: the PVC is released.
    wait_for("the PVC finalizer removed", WAIT, || async {
        let pvc = pvcs.get("data").await.map_err(|e| e.to_string())?;
        Ok((!has_finalizer(&pvc, PVC_AS_SOURCE_FINALIZER)).then_some(()))
    })
    .await;
    wait_for("SnapshotCreated and SnapshotReady events", WAIT, || async {
        let reasons: Vec<String> = events(client, NS, "snap-delete")
            .await
            .into_iter()
            .map(|(_, reason, _)| reason)
            .collect();
        let both = reasons.iter().any(|r| r == "SnapshotCreated")
            && reasons.iter().any(|r| r == "SnapshotReady");
        if both {
            Ok(Some(()))
        } else {
            Err(format!("events: {reasons:?}"))
        }
    })
    .await;

    // Delete policy: deleting the snapshot marks the content and deletes it; the
    // snapshotter's finalizer holds it until the physical snapshot is gone.
    delete_and_wait_gone(&snapshots, "snap-delete", WAIT).await;
    let content = wait_for("the content marked for deletion", WAIT, || async {
        let c = contents
            .get(&content_name)
            .await
            .map_err(|e| e.to_string())?;
        Ok(c.metadata.deletion_timestamp.is_some().then_some(c))
    })
    .await;
    assert_eq!(
        content
            .annotations()
            .get(BEING_DELETED_ANNOTATION)
            .map(String::as_str),
        Some("yes")
    );
    play_snapshotter_deleted(client, &content_name).await;
    wait_deleted(&contents, &content_name, WAIT).await.unwrap();
}

async fn dynamic_snapshot_with_retain_policy(client: &Client) {
    let snapshots: Api<VolumeSnapshot> = Api::namespaced(client.clone(), NS);
    let contents: Api<VolumeSnapshotContent> = Api::all(client.clone());
    let vs =
        create_snapshot_of_claim(&snapshots, "snap-retain", "data", Some("manila-retain")).await;
    let content_name = dynamic_content_name(&vs);
    wait_snapshot(&snapshots, "snap-retain", "bound", |vs| {
        vs.status
            .as_ref()?
            .bound_volume_snapshot_content_name
            .as_ref()
            .map(|_| ())
    })
    .await;
    let content = contents.get(&content_name).await.unwrap();
    assert_eq!(content.spec.deletion_policy, DeletionPolicy::Retain);
    play_snapshotter_created(client, &content_name, "manila-snap-2").await;
    wait_snapshot(&snapshots, "snap-retain", "ready", |vs| {
        vs.is_ready().then_some(())
    })
    .await;

    delete_and_wait_gone(&snapshots, "snap-retain", WAIT).await;
    // Retained: the content outlives its snapshot, not marked for deletion.
    let content = contents.get(&content_name).await.unwrap();
    assert!(content.metadata.deletion_timestamp.is_none());
    assert!(!content.annotations().contains_key(BEING_DELETED_ANNOTATION));
    assert!(content.status.unwrap().ready_to_use.unwrap());
}

async fn missing_pvc_is_reported(client: &Client) {
    let snapshots: Api<VolumeSnapshot> = Api::namespaced(client.clone(), NS);
    create_snapshot_of_claim(
        &snapshots,
        "snap-missing",
        "no-such-claim",
        Some("manila-delete"),
    )
    .await;
    let vs = wait_snapshot(&snapshots, "snap-missing", "an error status", |vs| {
        vs.status.as_ref()?.error.as_ref().map(|_| ())
    })
    .await;
    let message = vs.status.unwrap().error.unwrap().message.unwrap();
    assert_eq!(
        message,
        format!("the source PVC {NS}/no-such-claim does not exist")
    );
    let warnings = wait_events(client, NS, "snap-missing", 1, WAIT, |type_, _, _| {
        type_ == "Warning"
    })
    .await;
    let (_, reason, message) = &warnings[0];
    assert_eq!(reason, "SnapshotContentCreationFailed");
    assert!(message.contains("no-such-claim"), "{warnings:?}");
    // No content was created for it.
    let contents: Api<VolumeSnapshotContent> = Api::all(client.clone());
    let vs = snapshots.get("snap-missing").await.unwrap();
    assert!(
        contents
            .get_opt(&dynamic_content_name(&vs))
            .await
            .unwrap()
            .is_none()
    );
}

async fn pre_provisioned_snapshot_binds(client: &Client) {
    let snapshots: Api<VolumeSnapshot> = Api::namespaced(client.clone(), NS);
    let contents: Api<VolumeSnapshotContent> = Api::all(client.clone());
    contents
        .create(
            &PostParams::default(),
            &pre_provisioned_content(
                "pre-content",
                DRIVER,
                "existing-snapshot-id",
                NS,
                "snap-pre",
            ),
        )
        .await
        .unwrap();
    // The snapshotter would read the snapshot with ListSnapshots.
    let status = json!({"status": {"snapshotHandle": "existing-snapshot-id", "readyToUse": true, "restoreSize": 2 * GI}});
    contents
        .patch_status(
            "pre-content",
            &PatchParams::default(),
            &Patch::Merge(&status),
        )
        .await
        .unwrap();
    let vs = snapshots
        .create(
            &PostParams::default(),
            &snapshot_of_content("snap-pre", "pre-content"),
        )
        .await
        .unwrap();
    let ready = wait_snapshot(&snapshots, "snap-pre", "bound and ready", |vs| {
        vs.is_ready().then_some(())
    })
    .await;
    let status = ready.status.unwrap();
    assert_eq!(
        status.bound_volume_snapshot_content_name.as_deref(),
        Some("pre-content")
    );
    assert_eq!(status.restore_size, Some(Quantity("2Gi".into())));
    // The content is now bound to this very snapshot.
    let content = contents.get("pre-content").await.unwrap();
    assert_eq!(content.spec.volume_snapshot_ref.uid, vs.uid());
}

// --- fixtures -------------------------------------------------------------------------------
/// What the CSI snapshotter writes after a successful CreateSnapshot.
async fn play_snapshotter_created(client: &Client, content: &str, handle: &str) {
    let contents: Api<VolumeSnapshotContent> = Api::all(client.clone());
    let status = json!({"status": {
        "snapshotHandle": handle,
        "creationTime": 1_700_000_000_000_000_000_i64,
        "readyToUse": true,
        "restoreSize": GI,
    }});
    contents
        .patch_status(content, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

/// What the CSI snapshotter does after DeleteSnapshot: let the content go.
async fn play_snapshotter_deleted(client: &Client, content: &str) {
    let contents: Api<VolumeSnapshotContent> = Api::all(client.clone());
    let current = contents.get(content).await.unwrap();
    let kept: Vec<String> = current
        .finalizers()
        .iter()
        .filter(|f| *f != VOLUME_SNAPSHOT_CONTENT_FINALIZER)
        .cloned()
        .collect();
    let patch = json!({"metadata": {"finalizers": kept}});
    contents
        .patch(content, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

fn has_finalizer<K: kube::Resource>(obj: &K, finalizer: &str) -> bool {
    obj.finalizers().iter().any(|f| f == finalizer)
}

/// Waits until `check` holds for the snapshot; returns the snapshot as it was then.
async fn wait_snapshot(
    api: &Api<VolumeSnapshot>,
    name: &str,
    what: &str,
    check: impl Fn(&VolumeSnapshot) -> Option<()>,
) -> VolumeSnapshot {
    wait_object(
        api,
        name,
        &format!("VolumeSnapshot {name} {what}"),
        WAIT,
        check,
    )
    .await
}
