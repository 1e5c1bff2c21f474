//! Reconciling one claim: expand its volume when the request exceeds the capacity.

use std::sync::Arc;

use csi_proto::v1::controller_service_capability::rpc;
use csi_proto::v1::{CapacityRange, ControllerExpandVolumeRequest, ControllerExpandVolumeResponse};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Client, ResourceExt};
use kube_support::backoff::object_key;
use kube_support::events::EventType;
use kube_support::quantity::format_bytes;
use serde_json::json;
use sidecar_common::secrets::pv_request_secrets;

use crate::{Context, Error, Result};

/// Condition while the controller expands the volume.
pub const RESIZING: &str = "Resizing";
/// Condition once the controller is done and the node must grow the filesystem.
pub const FS_RESIZE_PENDING: &str = "FileSystemResizePending";

/// Bytes of a storage quantity.
pub fn bytes(quantity: &str) -> Result<i64> {
    Ok(kube_support::quantity::parse_bytes(quantity)?)
}

fn storage(
    map: Option<
        &std::collections::BTreeMap<
            String,
            k8s_openapi::apimachinery::pkg::api::resource::Quantity,
        >,
    >,
) -> Option<String> {
    map.and_then(|m| m.get("storage")).map(|q| q.0.clone())
}

/// Handles one claim.
pub async fn reconcile(pvc: Arc<PersistentVolumeClaim>, ctx: Arc<Context>) -> Result<Action> {
    let key = object_key(pvc.as_ref());
    let status = pvc.status.clone().unwrap_or_default();
    let Some(pv_name) = pvc.spec.as_ref().and_then(|s| s.volume_name.clone()) else {
        return Ok(Action::await_change());
    };
    if status.phase.as_deref() != Some("Bound") {
        return Ok(Action::await_change());
    }
    let (Some(requested), Some(current)) = (
        storage(
            pvc.spec
                .as_ref()
                .and_then(|s| s.resources.as_ref())
                .and_then(|r| r.requests.as_ref()),
        ),
        storage(status.capacity.as_ref()),
    ) else {
        return Ok(Action::await_change());
    };
    let requested = bytes(&requested)?;
    if requested <= bytes(&current)? {
        return Ok(Action::await_change());
    }
    let pv = Api::<PersistentVolume>::all(ctx.client.clone())
        .get(&pv_name)
        .await
        .map_err(|e| Error::kube(format!("reading PersistentVolume {pv_name}"), e))?;
    let Some(spec) = pv.spec.as_ref() else {
        return Ok(Action::await_change());
    };
    let Some(source) = spec
        .csi
        .as_ref()
        .filter(|c| c.driver == ctx.driver.info.name)
    else {
        return Ok(Action::await_change());
    };
    let has_condition = |kind: &str| {
        status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == kind && c.status == "True")
    };
    let pv_capacity = storage(spec.capacity.as_ref())
        .map(|q| bytes(&q))
        .transpose()?;
    if has_condition(FS_RESIZE_PENDING) && pv_capacity.is_some_and(|c| c >= requested) {
        // The controller part is done; kubelet grows the filesystem.
        return Ok(Action::await_change());
    }

    set_conditions(&ctx.client, &pvc, Some(RESIZING)).await?;
    let driver = ctx.driver.info.name.clone();
    ctx.recorder
        .publish(
            &*pvc,
            EventType::Normal,
            "Resizing",
            format!("External resizer is resizing volume {pv_name}"),
        )
        .await;
    let request = ControllerExpandVolumeRequest {
        volume_id: source.volume_handle.clone(),
        capacity_range: Some(CapacityRange {
            required_bytes: requested,
            limit_bytes: 0,
        }),
        secrets: pv_request_secrets(&ctx.client, source.controller_expand_secret_ref.as_ref())
            .await?,
        volume_capability: sidecar_common::volume::volume_capability(spec).ok(),
    };
    let answer = if ctx.driver.info.has_controller_rpc(rpc::Type::ExpandVolume) {
        tracing::info!(claim = %key, volume = %request.volume_id, requested, "ControllerExpandVolume");
        ctx.call(
            "ControllerExpandVolume",
            ctx.controller().controller_expand_volume(request),
        )
        .await
        .map_err(Error::from)
    } else {
        // As upstream's trivial resizer: without EXPAND_VOLUME only the node can grow it.
        Ok(ControllerExpandVolumeResponse {
            capacity_bytes: requested,
            node_expansion_required: true,
        })
    };
    let answer = match answer {
        Ok(answer) => answer,
        Err(error) => {
            ctx.recorder
                .publish(
                    &*pvc,
                    EventType::Warning,
                    "VolumeResizeFailed",
                    format!("resize volume \"{pv_name}\" by resizer \"{driver}\" failed: {error}"),
                )
                .await;
            return Err(error);
        }
    };
    let new_size = if answer.capacity_bytes > 0 {
        answer.capacity_bytes
    } else {
        requested
    };
    let patch = json!({ "spec": { "capacity": { "storage": format_bytes(new_size) } } });
    Api::<PersistentVolume>::all(ctx.client.clone())
        .patch(&pv_name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| {
            Error::kube(
                format!("updating the capacity of PersistentVolume {pv_name}"),
                e,
            )
        })?;
    if answer.node_expansion_required {
        set_conditions(&ctx.client, &pvc, Some(FS_RESIZE_PENDING)).await?;
        ctx.recorder
            .publish(
                &*pvc,
                EventType::Normal,
                "FileSystemResizeRequired",
                "Require file system resize of volume on node",
            )
            .await;
    } else {
        let patch = json!({ "status": {
            "capacity": { "storage": format_bytes(new_size) },
            "conditions": [],
        }});
        Api::<PersistentVolumeClaim>::namespaced(
            ctx.client.clone(),
            &pvc.namespace().unwrap_or_default(),
        )
        .patch_status(
            &pvc.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map_err(|e| Error::kube(format!("updating the status of claim {key}"), e))?;
        ctx.recorder
            .publish(
                &*pvc,
                EventType::Normal,
                "VolumeResizeSuccessful",
                format!("resize volume \"{pv_name}\" by resizer \"{driver}\" succeeded"),
            )
            .await;
    }
    ctx.backoff.succeeded(&key);
    tracing::info!(claim = %key, size = %format_bytes(new_size), node_expansion = answer.node_expansion_required, "expanded");
    Ok(Action::await_change())
}

/// Replaces the claim's resize conditions with `condition` (or none).
async fn set_conditions(
    client: &Client,
    pvc: &PersistentVolumeClaim,
    condition: Option<&str>,
) -> Result<()> {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let mut conditions: Vec<serde_json::Value> = pvc
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .filter(|c| c.type_ != RESIZING && c.type_ != FS_RESIZE_PENDING)
        .map(|c| serde_json::to_value(c).unwrap_or_default())
        .collect();
    if let Some(kind) = condition {
        conditions.push(json!({ "type": kind, "status": "True", "lastProbeTime": null, "lastTransitionTime": now }));
    }
    let patch = json!({ "status": { "conditions": conditions } });
    Api::<PersistentVolumeClaim>::namespaced(client.clone(), &pvc.namespace().unwrap_or_default())
        .patch_status(
            &pvc.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map_err(|e| {
            Error::kube(
                format!("updating the conditions of claim {}", object_key(pvc)),
                e,
            )
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn quantities_round_trip_with_binary_suffixes() {
        assert_eq!(bytes("3Gi").unwrap(), 3 << 30);
        assert!(bytes("lots").unwrap_err().to_string().contains("lots"));
    }
}
