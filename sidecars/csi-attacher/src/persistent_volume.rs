//! The attacher's finalizer on PersistentVolumes, as upstream: added when a volume is
//! published, removed once the PV is being deleted and no VolumeAttachment refers to it.

use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::api::{Api, ListParams};
use kube::runtime::controller::Action;
use kube::{Client, ResourceExt};
use kube_support::finalizers;

use crate::{Context, Error, Result, finalizer};

/// The back-off key of a PV (`pv/<name>`, apart from the attachments' keys).
pub fn backoff_key(pv: &PersistentVolume) -> String {
    format!("pv/{}", pv.name_any())
}

/// Adds the attacher's finalizer to `pv` if it lacks it.
pub async fn add_finalizer(client: &Client, pv: &PersistentVolume, driver: &str) -> Result<()> {
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    finalizers::add(&volumes, pv, &finalizer(driver)).await?;
    Ok(())
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
    let volumes: Api<PersistentVolume> = Api::all(ctx.client.clone());
    finalizers::remove(&volumes, &pv, &[&finalizer]).await?;
    ctx.backoff.succeeded(&backoff_key(&pv));
    tracing::info!(volume = %name, "removed the attacher's finalizer from the PV");
    Ok(Action::await_change())
}
