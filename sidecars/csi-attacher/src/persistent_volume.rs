//! The attacher's finalizer on PersistentVolumes, as upstream: added when a volume is
//! published, removed once the PV is being deleted and no VolumeAttachment refers to it.

use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::Context;
use crate::attachment::finalizer;
use crate::error::{Error, Result};

/// Adds the attacher's finalizer to `pv` if it lacks it.
pub async fn add_finalizer(client: &Client, pv: &PersistentVolume, driver: &str) -> Result<()> {
    let finalizer = finalizer(driver);
    if pv.finalizers().contains(&finalizer) {
        return Ok(());
    }
    let mut finalizers = pv.finalizers().to_vec();
    finalizers.push(finalizer);
    patch_finalizers(client, pv, finalizers).await
}

/// Removes the finalizer from a PV being deleted once no attachment uses it.
pub async fn reconcile(pv: Arc<PersistentVolume>, ctx: Arc<Context>) -> Result<Action> {
    let finalizer = finalizer(&ctx.driver.info.name);
    if pv.metadata.deletion_timestamp.is_none() || !pv.finalizers().contains(&finalizer) {
        return Ok(Action::await_change());
    }
    let name = pv.name_any();
    let attachments = Api::<VolumeAttachment>::all(ctx.client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| Error::kube("listing VolumeAttachments", e))?;
    if let Some(user) = attachments
        .items
        .iter()
        .find(|va| va.spec.source.persistent_volume_name.as_deref() == Some(name.as_str()))
    {
        tracing::debug!(volume = %name, attachment = %user.name_any(), "PV still attached");
        return Ok(Action::await_change());
    }
    let finalizers = pv
        .finalizers()
        .iter()
        .filter(|f| **f != finalizer)
        .cloned()
        .collect();
    patch_finalizers(&ctx.client, &pv, finalizers).await?;
    ctx.backoff.succeeded(&format!("pv/{name}"));
    tracing::info!(volume = %name, "removed the attacher's finalizer from the PV");
    Ok(Action::await_change())
}

async fn patch_finalizers(
    client: &Client,
    pv: &PersistentVolume,
    finalizers: Vec<String>,
) -> Result<()> {
    let name = pv.name_any();
    let patch = json!({ "metadata": { "finalizers": finalizers, "resourceVersion": pv.resource_version() } });
    Api::<PersistentVolume>::all(client.clone())
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| {
            Error::kube(
                format!("updating the finalizers of PersistentVolume {name}"),
                e,
            )
        })?;
    Ok(())
}
