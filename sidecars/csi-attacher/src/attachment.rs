//! Reconciling one VolumeAttachment: attach (finalizer, ControllerPublish when the driver
//! has PUBLISH_UNPUBLISH_VOLUME, `status.attached`), or detach once it is being deleted
//! (ControllerUnpublish, `attached: false`, finalizer removed). Failures land in
//! `status.attachError` / `status.detachError` and a Warning event, then are retried.

use std::collections::HashMap;
use std::sync::Arc;

use csi_proto::v1::controller_service_capability::rpc;
use csi_proto::v1::{ControllerPublishVolumeRequest, ControllerUnpublishVolumeRequest};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeSpec};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Client, ResourceExt};
use kube_support::events::EventType;
use kube_support::finalizers;
use serde_json::json;
use sidecar_common::secrets::pv_request_secrets;
use sidecar_common::volume::{csi_source, volume_capability};

use crate::volume::node_id;
use crate::{Context, Error, Result, finalizer, persistent_volume};

/// Handles one attachment (only `driver`'s; others are ignored).
pub async fn reconcile(va: Arc<VolumeAttachment>, ctx: Arc<Context>) -> Result<Action> {
    let driver = &ctx.driver.info.name;
    if va.spec.attacher != *driver {
        return Ok(Action::await_change());
    }
    let name = va.name_any();
    let finalizer = finalizer(driver);
    let result = if va.metadata.deletion_timestamp.is_some() {
        if !va.finalizers().contains(&finalizer) {
            return Ok(Action::await_change());
        }
        detach(&va, &ctx, &finalizer).await
    } else {
        if va.status.as_ref().is_some_and(|s| s.attached) {
            ctx.backoff.succeeded(&name);
            return Ok(Action::await_change());
        }
        attach(&va, &ctx, &finalizer).await
    };
    match result {
        Ok(()) => {
            ctx.backoff.succeeded(&name);
            Ok(Action::await_change())
        }
        Err(error) => {
            let detaching = va.metadata.deletion_timestamp.is_some();
            let (field, reason) = if detaching {
                ("detachError", "DetachFailed")
            } else {
                ("attachError", "AttachFailed")
            };
            let message = error.to_string();
            let now = k8s_openapi::jiff::Timestamp::now().to_string();
            let patch = json!({ "status": { field: { "time": now, "message": message } } });
            if let Err(e) = patch_status(&ctx.client, &name, &patch).await {
                tracing::warn!(attachment = %name, error = %e, "recording the error failed");
            }
            ctx.recorder
                .publish(&*va, EventType::Warning, reason, message)
                .await;
            Err(error)
        }
    }
}

async fn attach(va: &VolumeAttachment, ctx: &Context, finalizer: &str) -> Result<()> {
    let name = va.name_any();
    finalizers::add(&attachments(&ctx.client), va, finalizer).await?;
    let mut metadata = HashMap::new();
    if ctx
        .driver
        .info
        .has_controller_rpc(rpc::Type::PublishUnpublishVolume)
    {
        let spec = volume_spec(va, ctx, true).await?;
        let source = csi_source(&spec, &ctx.driver.info.name).ok_or_else(|| {
            Error::Invalid(format!(
                "the volume of {name} is not a CSI volume of this driver"
            ))
        })?;
        let request = ControllerPublishVolumeRequest {
            volume_id: source.volume_handle.clone(),
            node_id: node_id(&ctx.client, &ctx.driver.info.name, &va.spec.node_name).await?,
            volume_capability: Some(volume_capability(&spec)?),
            readonly: source.read_only.unwrap_or(false),
            secrets: pv_request_secrets(&ctx.client, source.controller_publish_secret_ref.as_ref())
                .await?,
            volume_context: source
                .volume_attributes
                .clone()
                .unwrap_or_default()
                .into_iter()
                .collect(),
        };
        tracing::info!(attachment = %name, volume = %request.volume_id, node = %request.node_id, "ControllerPublishVolume");
        let response = ctx
            .call(
                "ControllerPublishVolume",
                ctx.controller().controller_publish_volume(request),
            )
            .await?;
        metadata = response.publish_context;
    } else {
        tracing::info!(attachment = %name, "the driver has no PUBLISH_UNPUBLISH_VOLUME: marking attached");
    }
    let patch = json!({ "status": {
        "attached": true,
        "attachmentMetadata": if metadata.is_empty() { serde_json::Value::Null } else { json!(metadata) },
        "attachError": null,
    }});
    patch_status(&ctx.client, &name, &patch).await?;
    Ok(())
}

async fn detach(va: &VolumeAttachment, ctx: &Context, finalizer: &str) -> Result<()> {
    let name = va.name_any();
    if ctx
        .driver
        .info
        .has_controller_rpc(rpc::Type::PublishUnpublishVolume)
    {
        let spec = volume_spec(va, ctx, false).await?;
        let source = csi_source(&spec, &ctx.driver.info.name).ok_or_else(|| {
            Error::Invalid(format!(
                "the volume of {name} is not a CSI volume of this driver"
            ))
        })?;
        match node_id(&ctx.client, &ctx.driver.info.name, &va.spec.node_name).await {
            Ok(node_id) => {
                let request = ControllerUnpublishVolumeRequest {
                    volume_id: source.volume_handle.clone(),
                    node_id,
                    secrets: pv_request_secrets(
                        &ctx.client,
                        source.controller_publish_secret_ref.as_ref(),
                    )
                    .await?,
                };
                tracing::info!(attachment = %name, volume = %request.volume_id, node = %request.node_id, "ControllerUnpublishVolume");
                ctx.call(
                    "ControllerUnpublishVolume",
                    ctx.controller().controller_unpublish_volume(request),
                )
                .await?;
            }
            // As upstream: a node without an id for the driver (gone, or never registered)
            // cannot have the volume attached.
            Err(Error::Invalid(reason)) => {
                tracing::info!(attachment = %name, %reason, "assuming the volume is detached");
            }
            Err(error) => return Err(error),
        }
    }
    let patch =
        json!({ "status": { "attached": false, "attachmentMetadata": null, "detachError": null } });
    let va = patch_status(&ctx.client, &name, &patch).await?;
    finalizers::remove(&attachments(&ctx.client), &va, &[finalizer]).await?;
    tracing::info!(attachment = %name, "detached");
    Ok(())
}

/// The PV spec the attachment is about: the named PV (given the attacher's finalizer when
/// `attaching`), or the inline spec.
async fn volume_spec(
    va: &VolumeAttachment,
    ctx: &Context,
    attaching: bool,
) -> Result<PersistentVolumeSpec> {
    if let Some(pv_name) = &va.spec.source.persistent_volume_name {
        let pv = Api::<PersistentVolume>::all(ctx.client.clone())
            .get(pv_name)
            .await
            .map_err(|e| Error::kube(format!("reading PersistentVolume {pv_name}"), e))?;
        if attaching {
            persistent_volume::add_finalizer(&ctx.client, &pv, &ctx.driver.info.name).await?;
        }
        return pv
            .spec
            .ok_or_else(|| Error::Invalid(format!("PersistentVolume {pv_name} has no spec")));
    }
    va.spec.source.inline_volume_spec.clone().ok_or_else(|| {
        Error::Invalid("the attachment names no volume (spec.source is empty)".into())
    })
}

fn attachments(client: &Client) -> Api<VolumeAttachment> {
    Api::all(client.clone())
}

async fn patch_status(
    client: &Client,
    name: &str,
    patch: &serde_json::Value,
) -> Result<VolumeAttachment> {
    attachments(client)
        .patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map_err(|e| Error::kube(format!("updating the status of VolumeAttachment {name}"), e))
}
