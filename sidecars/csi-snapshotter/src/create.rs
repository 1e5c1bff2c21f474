//! Taking a dynamic snapshot (the content has `source.volumeHandle`): CreateSnapshot, called
//! again until the driver says the snapshot is ready (the Manila driver answers
//! `ready_to_use: false` while the Manila snapshot is `creating`), each answer written to the
//! content's status.

use csi_proto::v1::CreateSnapshotRequest;
use kube::ResourceExt;
use snapshot_controller::VolumeSnapshotContent;
use tonic::Code;

use crate::{Context, Error, Result, request, status};

/// Calls CreateSnapshot for `content` and records the answer; returns whether the snapshot
/// is ready. A failure is also written to `status.error` and a `SnapshotCreationFailed`
/// Warning event (by the caller's [`crate::content`] reporting).
pub async fn create_or_check(
    content: &VolumeSnapshotContent,
    volume_id: &str,
    ctx: &Context,
) -> Result<bool> {
    let name = content.name_any();
    let uid = content
        .spec
        .volume_snapshot_ref
        .uid
        .as_deref()
        .filter(|uid| !uid.is_empty())
        .ok_or_else(|| {
            Error::invalid(format!(
                "VolumeSnapshotContent {name} has no spec.volumeSnapshotRef.uid to name the snapshot after"
            ))
        })?;
    let class = request::class_of(&ctx.client, content, true).await?;
    let parameters = request::parameters(class.as_ref(), content, ctx.config.extra_create_metadata);
    let reference = request::secret_reference(content, class.as_ref())?;
    let secrets = request::secrets(&ctx.client, reference.as_ref()).await?;

    status::mark_being_created(&ctx.client, content, true).await?;
    let request = CreateSnapshotRequest {
        source_volume_id: volume_id.to_owned(),
        name: ctx.config.snapshot_name(uid),
        secrets,
        parameters,
    };
    tracing::debug!(content = %name, snapshot = %request.name, volume = volume_id, "CreateSnapshot");
    let answer = ctx
        .call("CreateSnapshot", ctx.controller().create_snapshot(request))
        .await;
    let snapshot = match answer {
        Ok(answer) => answer
            .snapshot
            .ok_or_else(|| Error::invalid("the driver's CreateSnapshot answer has no snapshot"))?,
        Err(error) => {
            if is_final(error.status.code()) {
                // The driver gave a definite answer: no snapshot is being made.
                status::mark_being_created(&ctx.client, content, false).await?;
            }
            return Err(error.into());
        }
    };
    if snapshot.snapshot_id.is_empty() {
        return Err(Error::invalid(
            "the driver's CreateSnapshot answer has an empty snapshot_id",
        ));
    }
    let updated = status::write(&ctx.client, &name, status::from_snapshot(&snapshot)).await?;
    if snapshot.ready_to_use {
        status::mark_being_created(&ctx.client, &updated, false).await?;
        tracing::info!(content = %name, snapshot = %snapshot.snapshot_id, "snapshot ready");
    } else {
        tracing::debug!(content = %name, snapshot = %snapshot.snapshot_id, "snapshot not ready yet");
    }
    Ok(snapshot.ready_to_use)
}

/// Whether a CreateSnapshot failure means the driver is not (or no longer) creating the
/// snapshot; the others (time-outs, in-flight, overload) may still produce one.
fn is_final(code: Code) -> bool {
    !matches!(
        code,
        Code::DeadlineExceeded
            | Code::Unavailable
            | Code::ResourceExhausted
            | Code::Aborted
            | Code::Cancelled
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_definite_answers_are_final() {
        assert!(is_final(Code::InvalidArgument));
        assert!(is_final(Code::NotFound));
        assert!(!is_final(Code::DeadlineExceeded));
        assert!(!is_final(Code::Aborted));
    }
}
