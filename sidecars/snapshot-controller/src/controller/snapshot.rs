//! Reconciling one VolumeSnapshot: dynamic snapshots (PVC source) get a content
//! `snapcontent-<uid>` created for them; pre-provisioned ones (content source) bind to the
//! named content; both then mirror the content's status.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use kube_support::events::EventType;
use kube_support::finalizers;
use serde_json::json;

use super::class::{self, TemplateValues};

use super::{Context, backoff_key, deletion, status};
use crate::api::{
    API_VERSION, DELETION_SECRET_NAME_ANNOTATION, DELETION_SECRET_NAMESPACE_ANNOTATION,
    PVC_AS_SOURCE_FINALIZER, VOLUME_SNAPSHOT_AS_SOURCE_FINALIZER, VOLUME_SNAPSHOT_BOUND_FINALIZER,
    VolumeSnapshot, VolumeSnapshotClass, VolumeSnapshotContent, VolumeSnapshotContentSource,
    VolumeSnapshotContentSpec, VolumeSnapshotStatus,
};
use crate::{Error, Result};

/// Event reason: the content for a dynamic snapshot could not be created.
pub const REASON_CONTENT_CREATION_FAILED: &str = "SnapshotContentCreationFailed";
/// Event reason: a pre-provisioned snapshot could not bind to its content.
pub const REASON_BINDING_FAILED: &str = "SnapshotBindingFailed";
/// Event reason: the storage system reported the snapshot taken.
pub const REASON_CREATED: &str = "SnapshotCreated";
/// Event reason: the snapshot became ready to use.
pub const REASON_READY: &str = "SnapshotReady";
/// Event reason: the snapshotter reported an error on the content.
pub const REASON_CREATION_FAILED: &str = "SnapshotCreationFailed";

/// The controller's reconcile for VolumeSnapshots.
pub async fn reconcile(vs: Arc<VolumeSnapshot>, ctx: Arc<Context>) -> Result<Action> {
    let result = sync(&vs, &ctx).await;
    match &result {
        Ok(_) => ctx.reset_backoff(&backoff_key(vs.as_ref())),
        Err(e) if e.is_conflict() => {}
        Err(e) => report(&vs, &ctx, e).await,
    }
    result
}

/// Writes `error` to the snapshot's status and as a Warning event.
async fn report(vs: &VolumeSnapshot, ctx: &Context, error: &Error) {
    let message = error.to_string();
    tracing::info!(snapshot = %vs.name_any(), namespace = ?vs.namespace(), %message, "snapshot not ready");
    let recorded = vs
        .status
        .as_ref()
        .and_then(|s| s.error.as_ref())
        .and_then(|e| e.message.as_deref());
    // Rewriting the same error would only trigger another reconcile at once.
    if vs.meta().deletion_timestamp.is_none() && recorded != Some(message.as_str()) {
        let api = snapshots_api(ctx, vs);
        let patch =
            json!({"status": {"error": {"time": Time(Timestamp::now()), "message": message}}});
        if let Err(e) = api
            .patch_status(
                &vs.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            tracing::warn!(error = %e, "writing the snapshot's error status failed");
        }
    }
    let reason = if vs.source_content().is_some() {
        REASON_BINDING_FAILED
    } else {
        REASON_CONTENT_CREATION_FAILED
    };
    ctx.event(vs, EventType::Warning, reason, message).await;
}

fn snapshots_api(ctx: &Context, vs: &VolumeSnapshot) -> Api<VolumeSnapshot> {
    Api::namespaced(ctx.client().clone(), &vs.namespace().unwrap_or_default())
}

async fn sync(vs: &VolumeSnapshot, ctx: &Context) -> Result<Action> {
    if vs.meta().deletion_timestamp.is_some() {
        return deletion::finish(vs, ctx).await;
    }
    let api = snapshots_api(ctx, vs);
    let vs = finalizers::add(&api, vs, VOLUME_SNAPSHOT_AS_SOURCE_FINALIZER).await?;
    match (vs.source_pvc(), vs.source_content()) {
        (Some(pvc), None) => sync_dynamic(&vs, pvc, ctx).await,
        (None, Some(content)) => sync_pre_provisioned(&vs, content, ctx).await,
        _ => Err(Error::InvalidSource),
    }
}

fn namespace_of(vs: &VolumeSnapshot) -> Result<String> {
    vs.namespace().ok_or(Error::MissingField {
        kind: "VolumeSnapshot",
        field: "metadata.namespace",
    })
}

fn uid_of(vs: &VolumeSnapshot) -> Result<String> {
    vs.uid().ok_or(Error::MissingField {
        kind: "VolumeSnapshot",
        field: "metadata.uid",
    })
}

/// A PVC-sourced snapshot: create its content once the PVC is bound, then bind and mirror.
async fn sync_dynamic(vs: &VolumeSnapshot, pvc_name: &str, ctx: &Context) -> Result<Action> {
    let namespace = namespace_of(vs)?;
    let content_name = format!("snapcontent-{}", uid_of(vs)?);
    let contents: Api<VolumeSnapshotContent> = Api::all(ctx.client().clone());
    let existing = contents
        .get_opt(&content_name)
        .await
        .map_err(|e| Error::kube(format!("reading VolumeSnapshotContent {content_name}"), e))?;
    match existing {
        Some(content) => bind_and_mirror(vs, &content, ctx).await,
        None => {
            let content = create_content(vs, &namespace, pvc_name, &content_name, ctx).await?;
            // Creating may have changed the snapshot (default class): continue from now.
            let vs = snapshots_api(ctx, vs)
                .get(&vs.name_any())
                .await
                .map_err(|e| Error::kube("re-reading the VolumeSnapshot", e))?;
            bind_and_mirror(&vs, &content, ctx).await
        }
    }
}

/// Resolves PVC → PV → class and creates the content (protecting the PVC first).
async fn create_content(
    vs: &VolumeSnapshot,
    namespace: &str,
    pvc_name: &str,
    content_name: &str,
    ctx: &Context,
) -> Result<VolumeSnapshotContent> {
    let client = ctx.client().clone();
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), namespace);
    let pvc = pvcs
        .get_opt(pvc_name)
        .await
        .map_err(|e| Error::kube(format!("reading PVC {namespace}/{pvc_name}"), e))?
        .ok_or_else(|| Error::PvcNotFound {
            namespace: namespace.into(),
            name: pvc_name.into(),
        })?;
    if pvc.meta().deletion_timestamp.is_some() {
        return Err(Error::PvcBeingDeleted {
            namespace: namespace.into(),
            name: pvc_name.into(),
        });
    }
    let phase = pvc.status.as_ref().and_then(|s| s.phase.clone());
    let volume_name = pvc.spec.as_ref().and_then(|s| s.volume_name.clone());
    let volume_name = match (phase.as_deref(), volume_name) {
        (Some("Bound"), Some(volume)) if !volume.is_empty() => volume,
        (phase, _) => {
            return Err(Error::PvcNotBound {
                namespace: namespace.into(),
                name: pvc_name.into(),
                phase: phase.unwrap_or("unknown").into(),
            });
        }
    };
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let pv = pvs
        .get_opt(&volume_name)
        .await
        .map_err(|e| Error::kube(format!("reading PV {volume_name}"), e))?
        .ok_or_else(|| Error::PvNotFound {
            name: volume_name.clone(),
        })?;
    let pv_spec = pv.spec.unwrap_or_default();
    let csi = pv_spec.csi.ok_or_else(|| Error::PvNotCsi {
        name: volume_name.clone(),
    })?;

    let classes: Api<VolumeSnapshotClass> = Api::all(client.clone());
    let requested = vs.spec.volume_snapshot_class_name.as_deref();
    let class = class::select(&classes, requested, &csi.driver).await?;
    let class_name = class.name_any();
    if class.driver != csi.driver {
        return Err(Error::ClassDriverMismatch {
            class: class_name,
            class_driver: class.driver,
            volume_driver: csi.driver,
        });
    }
    let secret = class::snapshotter_secret(
        &class,
        &TemplateValues {
            content_name,
            snapshot_name: &vs.name_any(),
            snapshot_namespace: namespace,
        },
    )?;
    if requested.is_none() {
        // As upstream: the default class chosen is written into the snapshot's spec.
        let api = snapshots_api(ctx, vs);
        let patch = json!({"spec": {"volumeSnapshotClassName": class_name}});
        api.patch(
            &vs.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map_err(|e| Error::kube("recording the default VolumeSnapshotClass", e))?;
    }

    finalizers::add(&pvcs, &pvc, PVC_AS_SOURCE_FINALIZER).await?;

    let annotations = secret.map(|s| {
        BTreeMap::from([
            (DELETION_SECRET_NAME_ANNOTATION.to_owned(), s.name),
            (DELETION_SECRET_NAMESPACE_ANNOTATION.to_owned(), s.namespace),
        ])
    });
    let content = VolumeSnapshotContent {
        metadata: ObjectMeta {
            name: Some(content_name.to_owned()),
            annotations,
            ..ObjectMeta::default()
        },
        spec: VolumeSnapshotContentSpec {
            volume_snapshot_ref: snapshot_ref(vs),
            deletion_policy: class.deletion_policy,
            driver: csi.driver,
            source: VolumeSnapshotContentSource {
                volume_handle: Some(csi.volume_handle),
                snapshot_handle: None,
            },
            volume_snapshot_class_name: Some(class_name),
            source_volume_mode: Some(pv_spec.volume_mode.unwrap_or_else(|| "Filesystem".into())),
        },
        status: None,
    };
    let contents: Api<VolumeSnapshotContent> = Api::all(client);
    match contents.create(&PostParams::default(), &content).await {
        Ok(created) => {
            tracing::info!(content = content_name, "created VolumeSnapshotContent");
            Ok(created)
        }
        Err(kube::Error::Api(status)) if status.code == 409 => contents
            .get(content_name)
            .await
            .map_err(|e| Error::kube(format!("reading VolumeSnapshotContent {content_name}"), e)),
        Err(e) => Err(Error::kube(
            format!("creating VolumeSnapshotContent {content_name}"),
            e,
        )),
    }
}

/// The reference a content keeps to its snapshot.
fn snapshot_ref(vs: &VolumeSnapshot) -> ObjectReference {
    ObjectReference {
        api_version: Some(API_VERSION.into()),
        kind: Some("VolumeSnapshot".into()),
        name: vs.metadata.name.clone(),
        namespace: vs.metadata.namespace.clone(),
        uid: vs.metadata.uid.clone(),
        resource_version: vs.metadata.resource_version.clone(),
        ..ObjectReference::default()
    }
}

/// A content-sourced snapshot: check the content names this snapshot, bind it (fill in the
/// uid), then mirror its status.
async fn sync_pre_provisioned(
    vs: &VolumeSnapshot,
    content_name: &str,
    ctx: &Context,
) -> Result<Action> {
    let namespace = namespace_of(vs)?;
    let uid = uid_of(vs)?;
    let contents: Api<VolumeSnapshotContent> = Api::all(ctx.client().clone());
    let content = contents
        .get_opt(content_name)
        .await
        .map_err(|e| Error::kube(format!("reading VolumeSnapshotContent {content_name}"), e))?
        .ok_or_else(|| Error::ContentNotFound {
            name: content_name.into(),
        })?;
    if content.spec.source.snapshot_handle.is_none() {
        return Err(Error::ContentNotPreProvisioned {
            name: content_name.into(),
        });
    }
    let reference = &content.spec.volume_snapshot_ref;
    let names_us = reference.name.as_deref() == Some(vs.name_any().as_str())
        && reference.namespace.as_deref() == Some(namespace.as_str());
    let uid_matches = reference
        .uid
        .as_deref()
        .is_none_or(|u| u.is_empty() || u == uid);
    if !names_us || !uid_matches {
        return Err(Error::ContentBoundElsewhere {
            content: content_name.into(),
            bound_to: format!(
                "{}/{} (uid {})",
                reference.namespace.as_deref().unwrap_or("?"),
                reference.name.as_deref().unwrap_or("?"),
                reference.uid.as_deref().unwrap_or("unset")
            ),
        });
    }
    let content = if reference.uid.as_deref().is_none_or(str::is_empty) {
        let patch = json!({
            "metadata": {"resourceVersion": content.resource_version()},
            "spec": {"volumeSnapshotRef": {"uid": uid, "resourceVersion": vs.resource_version()}},
        });
        contents
            .patch(content_name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| Error::kube(format!("binding VolumeSnapshotContent {content_name}"), e))?
    } else {
        content
    };
    bind_and_mirror(vs, &content, ctx).await
}

/// Makes the snapshot's status mirror `content` (events on the transitions), adds the
/// bound finalizer, and releases the source PVC once the snapshot is ready.
async fn bind_and_mirror(
    vs: &VolumeSnapshot,
    content: &VolumeSnapshotContent,
    ctx: &Context,
) -> Result<Action> {
    let uid = uid_of(vs)?;
    if content.spec.volume_snapshot_ref.uid.as_deref() != Some(uid.as_str()) {
        return Err(Error::ContentBoundElsewhere {
            content: content.name_any(),
            bound_to: format!(
                "uid {}",
                content
                    .spec
                    .volume_snapshot_ref
                    .uid
                    .as_deref()
                    .unwrap_or("unset")
            ),
        });
    }
    let api = snapshots_api(ctx, vs);
    let old = vs.status.clone().unwrap_or_default();
    let new = status::from_content(content);
    if new != old {
        write_status(&api, vs, &new).await?;
        announce_transitions(vs, &old, &new, ctx).await;
    }
    let vs = finalizers::add(&api, vs, VOLUME_SNAPSHOT_BOUND_FINALIZER).await?;
    if let (Some(pvc), true) = (
        vs.source_pvc(),
        vs.is_ready() || new.ready_to_use == Some(true),
    ) {
        deletion::release_pvc(&namespace_of(&vs)?, pvc, Some(uid.as_str()), ctx).await?;
    }
    Ok(Action::await_change())
}

async fn write_status(
    api: &Api<VolumeSnapshot>,
    vs: &VolumeSnapshot,
    status: &VolumeSnapshotStatus,
) -> Result<()> {
    // Every field written explicitly, so a cleared error is removed too.
    let patch = json!({"status": {
        "boundVolumeSnapshotContentName": status.bound_volume_snapshot_content_name,
        "readyToUse": status.ready_to_use,
        "restoreSize": status.restore_size,
        "creationTime": status.creation_time,
        "error": status.error,
    }});
    api.patch_status(
        &vs.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(|e| Error::kube("writing the snapshot status", e))?;
    Ok(())
}

async fn announce_transitions(
    vs: &VolumeSnapshot,
    old: &VolumeSnapshotStatus,
    new: &VolumeSnapshotStatus,
    ctx: &Context,
) {
    let key = format!("{}/{}", vs.namespace().unwrap_or_default(), vs.name_any());
    if old.creation_time.is_none() && new.creation_time.is_some() {
        let note = format!("Snapshot {key} was successfully created by the CSI driver.");
        ctx.event(vs, EventType::Normal, REASON_CREATED, note).await;
    }
    if old.ready_to_use != Some(true) && new.ready_to_use == Some(true) {
        let note = format!("Snapshot {key} is ready to use.");
        ctx.event(vs, EventType::Normal, REASON_READY, note).await;
    }
    if let Some(message) = new.error.as_ref().and_then(|e| e.message.clone())
        && old.error.as_ref().and_then(|e| e.message.as_ref()) != Some(&message)
    {
        ctx.event(vs, EventType::Warning, REASON_CREATION_FAILED, message)
            .await;
    }
}
