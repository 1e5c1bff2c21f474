//! Reconciling one VolumeSnapshotContent of our driver:
//!
//! 1. being deleted, marked by the snapshot controller (see [`deletion::should_delete`]) or
//!    with its VolumeSnapshot gone, and no CreateSnapshot awaiting an answer → apply the
//!    deletion policy; deleted while its VolumeSnapshot exists → wait (re-checked with
//!    back-off);
//! 2. ready already → nothing (the being-created annotation is dropped if left over);
//! 3. pre-provisioned (`source.snapshotHandle`) → status from the handle, ready (the Manila
//!    driver cannot ListSnapshots, and upstream takes the handle as valid then);
//! 4. dynamic (`source.volumeHandle`) → CreateSnapshot, again with back-off until ready.
//!
//! Failures go to `status.error` (when the message changed, so a retry does not re-trigger
//! itself by a status write) and to a Warning event on the content:
//! `SnapshotCreationFailed` or `SnapshotDeleteError`, as upstream names them.

use std::sync::Arc;

use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use kube_support::events::EventType;
use snapshot_controller::VolumeSnapshotContent;

use crate::{Context, Error, Result, create, deletion, status};

/// The reconcile of the content controller.
pub async fn reconcile(content: Arc<VolumeSnapshotContent>, ctx: Arc<Context>) -> Result<Action> {
    if content.spec.driver != ctx.driver.info.name {
        return Ok(Action::await_change());
    }
    let name = content.name_any();
    let being_deleted =
        content.meta().deletion_timestamp.is_some() && !status::being_created(&content);
    if being_deleted
        && !deletion::should_delete(&content)
        && !deletion::bound_snapshot_gone(&content, &ctx.client).await?
    {
        // Deleted while its VolumeSnapshot still exists: wait for the snapshot controller.
        tracing::debug!(content = %name, "deleted, waiting for its VolumeSnapshot to go");
        return Ok(Action::requeue(ctx.backoff.failed(&name)));
    }
    if being_deleted {
        return match deletion::apply_policy(&content, &ctx).await {
            Ok(()) => {
                ctx.backoff.succeeded(&name);
                Ok(Action::await_change())
            }
            Err(error) => {
                report(
                    &ctx,
                    &content,
                    "SnapshotDeleteError",
                    "Failed to delete snapshot",
                    &error,
                )
                .await;
                Err(error)
            }
        };
    }
    let ready = content
        .status
        .as_ref()
        .and_then(|s| s.ready_to_use)
        .unwrap_or(false);
    if ready {
        status::mark_being_created(&ctx.client, &content, false).await?;
        ctx.backoff.succeeded(&name);
        return Ok(Action::await_change());
    }
    let outcome = match (
        content.spec.source.snapshot_handle.as_deref(),
        content.spec.source.volume_handle.as_deref(),
    ) {
        (Some(handle), _) => status::write(&ctx.client, &name, status::pre_provisioned(handle))
            .await
            .map(|_| true),
        (None, Some(volume)) => {
            // Each attempt writes the content (annotation, status error), which wakes this
            // controller again at once: without this, a lasting failure would be retried as
            // fast as the apiserver answers, each time a CreateSnapshot in the cloud.
            if let Some(left) = ctx.backoff.waiting(&name) {
                tracing::debug!(content = %name, retry_in = ?left, "backing off");
                return Ok(Action::requeue(left));
            }
            create::create_or_check(&content, volume, &ctx).await
        }
        (None, None) => Err(Error::invalid(format!(
            "VolumeSnapshotContent {name} has neither spec.source.volumeHandle nor spec.source.snapshotHandle"
        ))),
    };
    match outcome {
        Ok(true) => {
            ctx.backoff.succeeded(&name);
            Ok(Action::await_change())
        }
        // Not ready yet: ask again later, backing off as for a failure.
        Ok(false) => Ok(Action::requeue(ctx.backoff.failed(&name))),
        Err(error) => {
            report(
                &ctx,
                &content,
                "SnapshotCreationFailed",
                "Failed to create snapshot",
                &error,
            )
            .await;
            Err(error)
        }
    }
}

/// Records `error` on the content's status (if its message is new) and as a Warning event.
/// Conflicts are only stale views: retried without a report.
async fn report(
    ctx: &Context,
    content: &VolumeSnapshotContent,
    reason: &str,
    what: &str,
    error: &Error,
) {
    if error.is_conflict() {
        return;
    }
    let message = format!("{what}: {error}");
    let current = content
        .status
        .as_ref()
        .and_then(|s| s.error.as_ref())
        .and_then(|e| e.message.as_deref());
    if current != Some(message.as_str())
        && let Err(write_error) =
            status::write(&ctx.client, &content.name_any(), status::error(&message)).await
    {
        tracing::warn!(content = %content.name_any(), error = %write_error, "recording the error failed");
    }
    ctx.recorder
        .publish(content, EventType::Warning, reason, message)
        .await;
}
