//! A VolumeSnapshotContent being deleted: with the `Delete` policy the physical snapshot is
//! deleted by DeleteSnapshot; in every case the content finalizer
//! (`snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection`, added by the
//! snapshot controller) is then removed so the object goes.

use csi_proto::v1::DeleteSnapshotRequest;
use kube::api::Api;
use kube::{Client, Resource, ResourceExt};
use kube_support::finalizers;
use snapshot_controller::api::{BEING_DELETED_ANNOTATION, VOLUME_SNAPSHOT_CONTENT_FINALIZER};
use snapshot_controller::{DeletionPolicy, VolumeSnapshot, VolumeSnapshotContent};

use crate::{Context, Error, Result, request, status};

/// Whether the deletion policy is to be applied now, as upstream decides: the content has a
/// deletion timestamp, and either it is a pre-provisioned content never bound to a
/// VolumeSnapshot, or the snapshot controller marked it `volumesnapshot-being-deleted` and
/// no CreateSnapshot is awaiting its answer.
pub fn should_delete(content: &VolumeSnapshotContent) -> bool {
    if content.meta().deletion_timestamp.is_none() {
        return false;
    }
    let unbound = content
        .spec
        .volume_snapshot_ref
        .uid
        .as_deref()
        .is_none_or(str::is_empty);
    if content.spec.source.snapshot_handle.is_some() && unbound {
        return true;
    }
    !status::being_created(content) && content.annotations().contains_key(BEING_DELETED_ANNOTATION)
}

/// Whether the VolumeSnapshot `content` is bound to no longer exists (absent, or replaced by
/// another of the same name). The snapshot controller marks such contents itself when their
/// policy is `Delete`; a deleted `Retain` content (or one deleted before its snapshot) would
/// otherwise keep its finalizer for ever, so its absence counts as the mark too.
pub async fn bound_snapshot_gone(content: &VolumeSnapshotContent, client: &Client) -> Result<bool> {
    let reference = &content.spec.volume_snapshot_ref;
    let (Some(name), Some(namespace)) = (reference.name.as_deref(), reference.namespace.as_deref())
    else {
        return Ok(true);
    };
    let snapshots: Api<VolumeSnapshot> = Api::namespaced(client.clone(), namespace);
    let snapshot = snapshots
        .get_opt(name)
        .await
        .map_err(|e| Error::kube(format!("reading VolumeSnapshot {namespace}/{name}"), e))?;
    Ok(snapshot.and_then(|s| s.metadata.uid) != reference.uid)
}

/// The physical snapshot of `content`: the handle in its status, else (pre-provisioned) its
/// source's.
pub fn snapshot_handle(content: &VolumeSnapshotContent) -> Option<&str> {
    content
        .status
        .as_ref()
        .and_then(|s| s.snapshot_handle.as_deref())
        .or(content.spec.source.snapshot_handle.as_deref())
        .filter(|h| !h.is_empty())
}

/// Applies the deletion policy: DeleteSnapshot with `Delete`, then the finalizer goes.
pub async fn apply_policy(content: &VolumeSnapshotContent, ctx: &Context) -> Result<()> {
    if !finalizers::has(content, VOLUME_SNAPSHOT_CONTENT_FINALIZER) {
        return Ok(());
    }
    if content.spec.deletion_policy == DeletionPolicy::Delete
        && let Some(handle) = snapshot_handle(content)
    {
        delete_snapshot(content, handle, ctx).await?;
    }
    let contents: Api<VolumeSnapshotContent> = Api::all(ctx.client.clone());
    finalizers::remove(&contents, content, &[VOLUME_SNAPSHOT_CONTENT_FINALIZER]).await?;
    tracing::info!(content = %content.name_any(), policy = ?content.spec.deletion_policy,
        "released VolumeSnapshotContent");
    Ok(())
}

async fn delete_snapshot(
    content: &VolumeSnapshotContent,
    handle: &str,
    ctx: &Context,
) -> Result<()> {
    // The class may be gone by now; the annotations normally carry the secret anyway.
    let class = request::class_of(&ctx.client, content, false).await?;
    let reference = request::secret_reference(content, class.as_ref())?;
    let secrets = request::secrets(&ctx.client, reference.as_ref()).await?;
    let request = DeleteSnapshotRequest {
        snapshot_id: handle.to_owned(),
        secrets,
    };
    ctx.call("DeleteSnapshot", ctx.controller().delete_snapshot(request))
        .await?;
    tracing::info!(content = %content.name_any(), snapshot = handle, "deleted the snapshot");
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;
    use snapshot_controller::api::{BEING_CREATED_ANNOTATION, VolumeSnapshotContentSource};
    use snapshot_controller::{VolumeSnapshotContentSpec, VolumeSnapshotContentStatus};

    use super::*;

    fn content(
        uid: Option<&str>,
        source: VolumeSnapshotContentSource,
        annotations: &[&str],
    ) -> VolumeSnapshotContent {
        let mut content = VolumeSnapshotContent::new(
            "c",
            VolumeSnapshotContentSpec {
                source,
                ..Default::default()
            },
        );
        content.spec.volume_snapshot_ref.uid = uid.map(str::to_owned);
        content.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
        content.metadata.annotations = Some(
            annotations
                .iter()
                .map(|a| ((*a).to_owned(), "yes".to_owned()))
                .collect::<BTreeMap<_, _>>(),
        );
        content
    }

    fn dynamic() -> VolumeSnapshotContentSource {
        VolumeSnapshotContentSource {
            volume_handle: Some("share".into()),
            snapshot_handle: None,
        }
    }

    fn pre_provisioned() -> VolumeSnapshotContentSource {
        VolumeSnapshotContentSource {
            volume_handle: None,
            snapshot_handle: Some("snap".into()),
        }
    }

    #[test]
    fn deletion_follows_the_controller_mark() {
        assert!(should_delete(&content(
            Some("u"),
            dynamic(),
            &[BEING_DELETED_ANNOTATION]
        )));
        assert!(!should_delete(&content(Some("u"), dynamic(), &[])));
        assert!(!should_delete(&content(
            Some("u"),
            dynamic(),
            &[BEING_DELETED_ANNOTATION, BEING_CREATED_ANNOTATION]
        )));
        let mut alive = content(Some("u"), dynamic(), &[BEING_DELETED_ANNOTATION]);
        alive.metadata.deletion_timestamp = None;
        assert!(!should_delete(&alive));
    }

    #[test]
    fn unbound_pre_provisioned_contents_go_without_a_mark() {
        assert!(should_delete(&content(None, pre_provisioned(), &[])));
        assert!(should_delete(&content(Some(""), pre_provisioned(), &[])));
        assert!(!should_delete(&content(Some("u"), pre_provisioned(), &[])));
    }

    #[test]
    fn the_status_handle_wins_over_the_source() {
        let mut c = content(Some("u"), pre_provisioned(), &[]);
        assert_eq!(snapshot_handle(&c), Some("snap"));
        c.status = Some(VolumeSnapshotContentStatus {
            snapshot_handle: Some("status-snap".into()),
            ..Default::default()
        });
        assert_eq!(snapshot_handle(&c), Some("status-snap"));
        assert_eq!(snapshot_handle(&content(Some("u"), dynamic(), &[])), None);
    }
}
