//! Released volumes → DeleteVolume: the reconcile of one PersistentVolume this provisioner
//! made (`pv.kubernetes.io/provisioned-by: <driver>`).
//!
//! - Released with reclaim policy Delete: DeleteVolume with the provisioner secret, remove
//!   the finalizer, delete the PV.
//! - Being deleted (by someone) while holding our finalizer: with policy Delete the volume
//!   is deleted first; with Retain it is kept. Then the finalizer goes.

use std::sync::Arc;

use csi_proto::v1::DeleteVolumeRequest;
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams};
use kube::runtime::controller::Action;
use kube_support::events::EventType;
use kube_support::finalizers;
use sidecar_common::secrets::{
    SecretKind, SecretRef, TemplateContext, request_secrets, secret_reference,
};

use crate::volume::{
    ANN_DELETION_SECRET_NAME, ANN_DELETION_SECRET_NAMESPACE, ANN_PROVISIONED_BY, FINALIZER,
};
use crate::{Context, Error, Result};

/// Reconciles one PV.
pub async fn reconcile(pv: Arc<PersistentVolume>, ctx: Arc<Context>) -> Result<Action> {
    let driver = ctx.driver.info.name.as_str();
    if pv.annotations().get(ANN_PROVISIONED_BY).map(String::as_str) != Some(driver) {
        return Ok(Action::await_change());
    }
    let Some(spec) = pv.spec.as_ref() else {
        return Ok(Action::await_change());
    };
    let Some(csi) = spec.csi.as_ref().filter(|c| c.driver == driver) else {
        return Ok(Action::await_change());
    };
    let name = pv.name_any();
    let released = pv.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Released");
    let deleting = pv.metadata.deletion_timestamp.is_some();
    let has_finalizer = finalizers::has(pv.as_ref(), FINALIZER);
    let policy_delete = spec.persistent_volume_reclaim_policy.as_deref() == Some("Delete");
    if !(released && policy_delete || deleting && has_finalizer) {
        return Ok(Action::await_change());
    }
    if policy_delete {
        if let Err(error) = delete_volume(&pv, &csi.volume_handle, &ctx).await {
            ctx.recorder
                .publish(
                    pv.as_ref(),
                    EventType::Warning,
                    "VolumeFailedDelete",
                    error.to_string(),
                )
                .await;
            return Err(error);
        }
        tracing::info!(volume = %name, handle = %csi.volume_handle, "volume deleted");
    }
    let pvs: Api<PersistentVolume> = Api::all(ctx.client.clone());
    finalizers::remove(&pvs, &pv, &[FINALIZER]).await?;
    if !deleting {
        match pvs.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(e) => return Err(Error::kube(format!("deleting PersistentVolume {name}"), e)),
        }
    }
    ctx.backoff.succeeded(&name);
    Ok(Action::await_change())
}

/// The provisioner secret: as recorded on the PV at creation, else from the class with
/// only `${pv.name}` available.
async fn deletion_secret(pv: &PersistentVolume, ctx: &Context) -> Result<Option<SecretRef>> {
    let annotations = pv.annotations();
    if let (Some(name), Some(namespace)) = (
        annotations.get(ANN_DELETION_SECRET_NAME),
        annotations.get(ANN_DELETION_SECRET_NAMESPACE),
    ) {
        return Ok(Some(SecretRef {
            name: name.clone(),
            namespace: namespace.clone(),
        }));
    }
    let Some(class_name) = pv.spec.as_ref().and_then(|s| s.storage_class_name.clone()) else {
        return Ok(None);
    };
    let classes: Api<k8s_openapi::api::storage::v1::StorageClass> = Api::all(ctx.client.clone());
    let Some(class) = classes
        .get_opt(&class_name)
        .await
        .map_err(|e| Error::kube(format!("reading StorageClass {class_name}"), e))?
    else {
        return Ok(None);
    };
    let name = pv.name_any();
    let templates = TemplateContext {
        pv_name: &name,
        ..Default::default()
    };
    Ok(secret_reference(
        SecretKind::Provisioner,
        &class.parameters.unwrap_or_default(),
        &templates,
    )?)
}

async fn delete_volume(pv: &PersistentVolume, handle: &str, ctx: &Context) -> Result<()> {
    let reference = deletion_secret(pv, ctx).await?;
    let request = DeleteVolumeRequest {
        volume_id: handle.to_string(),
        secrets: request_secrets(&ctx.client, reference.as_ref()).await?,
    };
    ctx.call("DeleteVolume", ctx.controller().delete_volume(request))
        .await?;
    Ok(())
}
