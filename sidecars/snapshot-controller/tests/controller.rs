//! The snapshot controller against a real control plane (one boot for the whole file): the
//! CRDs install and validate, dynamic and pre-provisioned snapshots bind and mirror their
//! content's status, finalizers come and go, deletion policies hold, and errors are reported.
//!
//! The CSI snapshotter is played by the test: it writes the content status and, on deletion,
//! removes the content finalizer, as the sidecar does after DeleteSnapshot.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use harness::cluster::wait::{wait_deleted, wait_for_described, wait_until};
use harness::control_plane::ControlPlane;
use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, Event, Namespace, ObjectReference, PersistentVolume,
    PersistentVolumeClaim, PersistentVolumeClaimSpec, PersistentVolumeSpec,
    VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use snapshot_controller::api::{
    BEING_DELETED_ANNOTATION, IS_DEFAULT_CLASS_ANNOTATION, PVC_AS_SOURCE_FINALIZER,
    VOLUME_SNAPSHOT_AS_SOURCE_FINALIZER, VOLUME_SNAPSHOT_BOUND_FINALIZER,
    VOLUME_SNAPSHOT_CONTENT_FINALIZER, VolumeSnapshotContentSource, VolumeSnapshotSource,
};
use snapshot_controller::{
    DeletionPolicy, VolumeSnapshot, VolumeSnapshotClass, VolumeSnapshotContent,
    VolumeSnapshotContentSpec, VolumeSnapshotSpec,
};

const NS: &str = "snap-test";
const DRIVER: &str = "manila.csi.openstack.org";
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
    create_namespace(&client).await;

    invalid_snapshots_are_rejected_by_the_schema(&client).await;

    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let controller = tokio::spawn(snapshot_controller::controller::run(
        client.clone(),
        async move {
            let _ = stop_rx.await;
        },
    ));

    create_bound_claim(&client, "data", "pv-data", "share-data").await;
    create_class(&client, "manila-delete", DeletionPolicy::Delete, true).await;
    create_class(&client, "manila-retain", DeletionPolicy::Retain, false).await;

    dynamic_snapshot_with_delete_policy(&client).await;
    dynamic_snapshot_with_retain_policy(&client).await;
    missing_pvc_is_reported(&client).await;
    pre_provisioned_snapshot_binds(&client).await;

    let _ = stop_tx.send(());
    tokio::time::timeout(Duration::from_secs(30), controller)
        .await
        .expect("controller stops on shutdown")
        .expect("controller task");
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
    let mut raw_bad = serde_json::to_value(content_for("bad-policy", "x", "handle")).unwrap();
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
    let vs = snapshots
        .create(
            &PostParams::default(),
            &snapshot_of("snap-delete", "data", None),
        )
        .await
        .unwrap();
    let uid = vs.uid().unwrap();
    let content_name = format!("snapcontent-{uid}");

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
    wait_until("the content finalizer", WAIT, || async {
        let c = contents
            .get(&content_name)
            .await
            .map_err(|e| e.to_string())?;
        Ok(has_finalizer(&c, VOLUME_SNAPSHOT_CONTENT_FINALIZER).then_some(()))
    })
    .await
    .unwrap();
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
    wait_until("the PVC finalizer removed", WAIT, || async {
        let pvc = pvcs.get("data").await.map_err(|e| e.to_string())?;
        Ok((!has_finalizer(&pvc, PVC_AS_SOURCE_FINALIZER)).then_some(()))
    })
    .await
    .unwrap();
    wait_until("SnapshotCreated and SnapshotReady events", WAIT, || async {
        let reasons = event_reasons(client, "snap-delete").await;
        let both = reasons.iter().any(|r| r == "SnapshotCreated")
            && reasons.iter().any(|r| r == "SnapshotReady");
        if both {
            Ok(Some(()))
        } else {
            Err(format!("events: {reasons:?}"))
        }
    })
    .await
    .unwrap();

    // Delete policy: deleting the snapshot marks the content and deletes it; the
    // snapshotter's finalizer holds it until the physical snapshot is gone.
    snapshots
        .delete("snap-delete", &DeleteParams::default())
        .await
        .unwrap();
    wait_deleted(&snapshots, "snap-delete", WAIT).await.unwrap();
    let content = wait_until("the content marked for deletion", WAIT, || async {
        let c = contents
            .get(&content_name)
            .await
            .map_err(|e| e.to_string())?;
        Ok(c.metadata.deletion_timestamp.is_some().then_some(c))
    })
    .await
    .unwrap();
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
    let vs = snapshots
        .create(
            &PostParams::default(),
            &snapshot_of("snap-retain", "data", Some("manila-retain")),
        )
        .await
        .unwrap();
    let content_name = format!("snapcontent-{}", vs.uid().unwrap());
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

    snapshots
        .delete("snap-retain", &DeleteParams::default())
        .await
        .unwrap();
    wait_deleted(&snapshots, "snap-retain", WAIT).await.unwrap();
    // Retained: the content outlives its snapshot, not marked for deletion.
    let content = contents.get(&content_name).await.unwrap();
    assert!(content.metadata.deletion_timestamp.is_none());
    assert!(!content.annotations().contains_key(BEING_DELETED_ANNOTATION));
    assert!(content.status.unwrap().ready_to_use.unwrap());
}

async fn missing_pvc_is_reported(client: &Client) {
    let snapshots: Api<VolumeSnapshot> = Api::namespaced(client.clone(), NS);
    snapshots
        .create(
            &PostParams::default(),
            &snapshot_of("snap-missing", "no-such-claim", Some("manila-delete")),
        )
        .await
        .unwrap();
    let vs = wait_snapshot(&snapshots, "snap-missing", "an error status", |vs| {
        vs.status.as_ref()?.error.as_ref().map(|_| ())
    })
    .await;
    let message = vs.status.unwrap().error.unwrap().message.unwrap();
    assert_eq!(
        message,
        format!("the source PVC {NS}/no-such-claim does not exist")
    );
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    let event = wait_until("a Warning event on snap-missing", WAIT, || async {
        let list = events
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        Ok(list.items.into_iter().find(|e| {
            e.involved_object.name.as_deref() == Some("snap-missing")
                && e.type_.as_deref() == Some("Warning")
        }))
    })
    .await
    .unwrap();
    assert_eq!(
        event.reason.as_deref(),
        Some("SnapshotContentCreationFailed")
    );
    assert!(
        event
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("no-such-claim"),
        "{event:?}"
    );
    // No content was created for it.
    let contents: Api<VolumeSnapshotContent> = Api::all(client.clone());
    let vs = snapshots.get("snap-missing").await.unwrap();
    assert!(
        contents
            .get_opt(&format!("snapcontent-{}", vs.uid().unwrap()))
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
            &content_for("pre-content", "snap-pre", "existing-snapshot-id"),
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
    let vs = VolumeSnapshot::new(
        "snap-pre",
        VolumeSnapshotSpec {
            source: VolumeSnapshotSource {
                persistent_volume_claim_name: None,
                volume_snapshot_content_name: Some("pre-content".into()),
            },
            volume_snapshot_class_name: None,
        },
    );
    let vs = snapshots.create(&PostParams::default(), &vs).await.unwrap();
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

async fn create_namespace(client: &Client) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(NS.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

/// A static CSI PV pre-bound to a claim; the PV controller binds the pair.
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
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    pvs.create(&PostParams::default(), &pv).await.unwrap();
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

async fn create_class(client: &Client, name: &str, policy: DeletionPolicy, default: bool) {
    let mut class = VolumeSnapshotClass::new(name, DRIVER, policy);
    if default {
        class.metadata.annotations = Some(BTreeMap::from([(
            IS_DEFAULT_CLASS_ANNOTATION.to_owned(),
            "true".to_owned(),
        )]));
    }
    let classes: Api<VolumeSnapshotClass> = Api::all(client.clone());
    classes
        .create(&PostParams::default(), &class)
        .await
        .unwrap();
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

fn content_for(name: &str, snapshot: &str, snapshot_handle: &str) -> VolumeSnapshotContent {
    VolumeSnapshotContent::new(
        name,
        VolumeSnapshotContentSpec {
            volume_snapshot_ref: ObjectReference {
                name: Some(snapshot.into()),
                namespace: Some(NS.into()),
                ..Default::default()
            },
            deletion_policy: DeletionPolicy::Delete,
            driver: DRIVER.into(),
            source: VolumeSnapshotContentSource {
                volume_handle: None,
                snapshot_handle: Some(snapshot_handle.into()),
            },
            volume_snapshot_class_name: None,
            source_volume_mode: None,
        },
    )
}

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
    wait_for_described(
        api,
        name,
        &format!("VolumeSnapshot {name} {what}"),
        |vs: Option<&VolumeSnapshot>| vs.and_then(&check).is_some(),
        WAIT,
    )
    .await
    .unwrap()
    .unwrap()
}

async fn event_reasons(client: &Client, object: &str) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(object))
        .filter_map(|e| e.reason)
        .collect()
}
