//! Reconciling one VolumeSnapshotContent: it carries the content finalizer while it exists
//! (the snapshotter removes it once the physical snapshot is dealt with), and a content with
//! the Delete policy whose bound snapshot is gone is deleted.

use std::sync::Arc;

use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use kube_support::finalizers;

use super::{Context, backoff_key, deletion};
use crate::api::{
    DeletionPolicy, VOLUME_SNAPSHOT_CONTENT_FINALIZER, VolumeSnapshot, VolumeSnapshotContent,
};
use crate::{Error, Result};

/// The controller's reconcile for VolumeSnapshotContents.
pub async fn reconcile(content: Arc<VolumeSnapshotContent>, ctx: Arc<Context>) -> Result<Action> {
    let result = sync(&content, &ctx).await;
    match &result {
        Ok(_) => ctx.reset_backoff(&backoff_key(content.as_ref())),
        Err(e) if e.is_conflict() => {}
        Err(e) => {
            tracing::warn!(content = %content.name_any(), error = %e, "content reconcile failed")
        }
    }
    result
}

async fn sync(content: &VolumeSnapshotContent, ctx: &Context) -> Result<Action> {
    if content.meta().deletion_timestamp.is_some() {
        // The snapshotter deletes (or retains) the physical snapshot and lets it go.
        return Ok(Action::await_change());
    }
    let contents: Api<VolumeSnapshotContent> = Api::all(ctx.client().clone());
    let content = finalizers::add(&contents, content, VOLUME_SNAPSHOT_CONTENT_FINALIZER).await?;

    let reference = &content.spec.volume_snapshot_ref;
    let (Some(uid), Some(name), Some(namespace)) = (
        reference.uid.as_deref(),
        reference.name.as_deref(),
        reference.namespace.as_deref(),
    ) else {
        // A pre-provisioned content not bound yet.
        return Ok(Action::await_change());
    };
    if uid.is_empty() || content.spec.deletion_policy == DeletionPolicy::Retain {
        return Ok(Action::await_change());
    }
    let snapshots: Api<VolumeSnapshot> = Api::namespaced(ctx.client().clone(), namespace);
    let snapshot = snapshots
        .get_opt(name)
        .await
        .map_err(|e| Error::kube(format!("reading VolumeSnapshot {namespace}/{name}"), e))?;
    // Gone, or replaced by another snapshot of the same name.
    if snapshot.as_ref().and_then(|s| s.uid()).as_deref() != Some(uid) {
        tracing::info!(content = %content.name_any(), "bound VolumeSnapshot is gone; deleting the content");
        deletion::delete_content(&content, ctx).await?;
    }
    Ok(Action::await_change())
}
