//! A VolumeSnapshot being deleted: apply its content's deletion policy, release the source
//! PVC, and drop the snapshot's finalizers unless a PVC is still being restored from it.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use kube_support::finalizers;
use serde_json::json;

use super::Context;
use crate::api::{
    BEING_DELETED_ANNOTATION, DeletionPolicy, PVC_AS_SOURCE_FINALIZER,
    VOLUME_SNAPSHOT_AS_SOURCE_FINALIZER, VOLUME_SNAPSHOT_BOUND_FINALIZER,
    VOLUME_SNAPSHOT_CONTENT_FINALIZER, VolumeSnapshot, VolumeSnapshotContent,
};
use crate::{Error, Result};

/// Finishes the deletion of `vs` (which has a deletion timestamp).
pub async fn finish(vs: &VolumeSnapshot, ctx: &Context) -> Result<Action> {
    let namespace = vs.namespace().unwrap_or_default();
    let api: Api<VolumeSnapshot> = Api::namespaced(ctx.client().clone(), &namespace);
    if !finalizers::has(vs, VOLUME_SNAPSHOT_AS_SOURCE_FINALIZER)
        && !finalizers::has(vs, VOLUME_SNAPSHOT_BOUND_FINALIZER)
    {
        return Ok(Action::await_change());
    }
    if let Some(pvc) = restoring_from(vs, &namespace, ctx).await? {
        // The provisioner still needs the snapshot; the PVC watch brings us back.
        tracing::info!(snapshot = %vs.name_any(), pvc, "deletion waits for a restore from the snapshot");
        return Ok(Action::await_change());
    }
    if let Some(content) = bound_content(vs, ctx).await?
        && content.spec.deletion_policy == DeletionPolicy::Delete
    {
        delete_content(&content, ctx).await?;
    }
    if let Some(pvc) = vs.source_pvc() {
        release_pvc(&namespace, pvc, vs.uid().as_deref(), ctx).await?;
    }
    finalizers::remove(
        &api,
        vs,
        &[
            VOLUME_SNAPSHOT_AS_SOURCE_FINALIZER,
            VOLUME_SNAPSHOT_BOUND_FINALIZER,
        ],
    )
    .await?;
    Ok(Action::await_change())
}

/// The content bound to `vs` (its volumeSnapshotRef carries the snapshot's uid), if any.
async fn bound_content(
    vs: &VolumeSnapshot,
    ctx: &Context,
) -> Result<Option<VolumeSnapshotContent>> {
    let name = vs
        .status
        .as_ref()
        .and_then(|s| s.bound_volume_snapshot_content_name.clone())
        .or_else(|| vs.source_content().map(str::to_owned))
        .or_else(|| vs.dynamic_content_name());
    let Some(name) = name else {
        return Ok(None);
    };
    let contents: Api<VolumeSnapshotContent> = Api::all(ctx.client().clone());
    let content = contents
        .get_opt(&name)
        .await
        .map_err(|e| Error::kube(format!("reading VolumeSnapshotContent {name}"), e))?;
    Ok(content.filter(|c| {
        c.spec.volume_snapshot_ref.uid.is_some() && c.spec.volume_snapshot_ref.uid == vs.uid()
    }))
}

/// Marks `content` as deleted with its snapshot and deletes it; the snapshotter's handling
/// of the content finalizer deletes the physical snapshot.
pub async fn delete_content(content: &VolumeSnapshotContent, ctx: &Context) -> Result<()> {
    if content.meta().deletion_timestamp.is_some() {
        return Ok(());
    }
    let name = content.name_any();
    let contents: Api<VolumeSnapshotContent> = Api::all(ctx.client().clone());
    // The content reconciler may not have protected this content yet (it runs on its own,
    // and may be behind under load): deleted without the finalizer, the content would go at
    // once and the snapshotter would never delete the physical snapshot.
    finalizers::add(&contents, content, VOLUME_SNAPSHOT_CONTENT_FINALIZER).await?;
    let patch = json!({"metadata": {"annotations": {BEING_DELETED_ANNOTATION: "yes"}}});
    contents
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| {
            Error::kube(
                format!("annotating VolumeSnapshotContent {name} for deletion"),
                e,
            )
        })?;
    match contents.delete(&name, &DeleteParams::default()).await {
        Ok(_) => {
            tracing::info!(
                content = name,
                "deleted VolumeSnapshotContent (policy Delete)"
            );
            Ok(())
        }
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(e) => Err(Error::kube(
            format!("deleting VolumeSnapshotContent {name}"),
            e,
        )),
    }
}

/// A Pending PVC in the namespace restoring from `vs`, if any.
async fn restoring_from(
    vs: &VolumeSnapshot,
    namespace: &str,
    ctx: &Context,
) -> Result<Option<String>> {
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client().clone(), namespace);
    let list = pvcs
        .list(&ListParams::default())
        .await
        .map_err(|e| Error::kube(format!("listing PVCs in {namespace}"), e))?;
    let name = vs.name_any();
    Ok(list
        .items
        .into_iter()
        .find(|pvc| {
            let from_vs = pvc
                .spec
                .as_ref()
                .and_then(|s| s.data_source.as_ref())
                .is_some_and(|ds| ds.kind == "VolumeSnapshot" && ds.name == name);
            let pending = pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending");
            from_vs && pending
        })
        .map(|pvc| pvc.name_any()))
}

/// Removes the PVC's snapshot-source finalizer unless another snapshot of it (other than
/// `except_uid`) is still being taken.
pub async fn release_pvc(
    namespace: &str,
    pvc_name: &str,
    except_uid: Option<&str>,
    ctx: &Context,
) -> Result<()> {
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client().clone(), namespace);
    let Some(pvc) = pvcs
        .get_opt(pvc_name)
        .await
        .map_err(|e| Error::kube(format!("reading PVC {namespace}/{pvc_name}"), e))?
    else {
        return Ok(());
    };
    if !finalizers::has(&pvc, PVC_AS_SOURCE_FINALIZER) {
        return Ok(());
    }
    let snapshots: Api<VolumeSnapshot> = Api::namespaced(ctx.client().clone(), namespace);
    let list = snapshots
        .list(&ListParams::default())
        .await
        .map_err(|e| Error::kube(format!("listing VolumeSnapshots in {namespace}"), e))?;
    let in_progress = list.items.iter().any(|vs| {
        vs.source_pvc() == Some(pvc_name)
            && vs.uid().as_deref() != except_uid
            && vs.meta().deletion_timestamp.is_none()
            && !vs.is_ready()
    });
    if !in_progress {
        finalizers::remove(&pvcs, &pvc, &[PVC_AS_SOURCE_FINALIZER]).await?;
    }
    Ok(())
}
