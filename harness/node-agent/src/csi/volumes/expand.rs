//! Node-side expansion: once the external-resizer has grown a volume and the claim carries the
//! `FileSystemResizePending` condition ([`pending_resize`]), kubelet calls NodeExpandVolume
//! (drivers with the node `EXPAND_VOLUME` capability) on a published target with the PV's
//! new capacity ([`node_expand`]), then sets the claim's status capacity and removes the
//! condition ([`PendingResize::finish`]).

use std::collections::HashMap;
use std::path::Path;

use csi_proto::v1::{CapacityRange, NodeExpandVolumeRequest};
use k8s_openapi::api::core::v1::{
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimCondition, PersistentVolumeSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::capability::kubelet_volume_capability;
use super::paths::{block_staging_path, staging_path};
use super::state::MountedVolume;
use crate::csi::RegisteredDriver;
use crate::csi::drivers::node_call;
use crate::csi::error::{Error, Result};

/// The PVC condition asking the node to grow the file system.
pub const FS_RESIZE_PENDING: &str = "FileSystemResizePending";

/// A claim waiting for the node to grow its volume's file system.
pub(super) struct PendingResize {
    /// The PV's name.
    pv_name: String,
    /// The PV's spec (its capacity is the new size).
    spec: PersistentVolumeSpec,
    /// The claims of the claim's namespace.
    claims: Api<PersistentVolumeClaim>,
    /// The claim's namespace.
    namespace: String,
    /// The claim's name.
    claim_name: String,
    /// The claim's conditions, `FileSystemResizePending` among them.
    conditions: Vec<PersistentVolumeClaimCondition>,
}

/// The claim of PV `pv_name`, read with `client`, when it has the `FileSystemResizePending`
/// condition; `None` when the PV, its claim reference, the claim or the condition is
/// missing. Reads only.
pub(super) async fn pending_resize(
    client: &Client,
    pv_name: &str,
) -> Result<Option<PendingResize>> {
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let Some(pv) = pvs
        .get_opt(pv_name)
        .await
        .map_err(Error::api(format!("reading PV {pv_name:?}")))?
    else {
        return Ok(None);
    };
    let spec = pv.spec.unwrap_or_default();
    let Some(claim_ref) = &spec.claim_ref else {
        return Ok(None);
    };
    let namespace = claim_ref.namespace.clone().unwrap_or_default();
    let claim_name = claim_ref.name.clone().unwrap_or_default();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &namespace);
    let Some(pvc) = claims
        .get_opt(&claim_name)
        .await
        .map_err(Error::api(format!("reading PVC {namespace}/{claim_name}")))?
    else {
        return Ok(None);
    };
    let conditions = pvc.status.and_then(|s| s.conditions).unwrap_or_default();
    if !conditions.iter().any(|c| c.type_ == FS_RESIZE_PENDING) {
        return Ok(None);
    }
    Ok(Some(PendingResize {
        pv_name: pv_name.to_string(),
        spec,
        claims,
        namespace,
        claim_name,
        conditions,
    }))
}

impl PendingResize {
    /// The PV's capacity, as a quantity and in bytes.
    pub fn capacity(&self) -> Result<(Quantity, i64)> {
        let Some(capacity) = self
            .spec
            .capacity
            .as_ref()
            .and_then(|c| c.get("storage"))
            .cloned()
        else {
            return Err(Error::NoCapacity {
                pv: self.pv_name.clone(),
            });
        };
        let bytes = kube_support::quantity::parse_bytes(&capacity.0).map_err(|source| {
            Error::BadCapacity {
                pv: self.pv_name.clone(),
                source: Box::new(source),
            }
        })?;
        Ok((capacity, bytes))
    }

    /// Sets the claim's status capacity to `capacity` and removes the condition, once the
    /// node has grown volume `unique`.
    pub async fn finish(self, unique: &str, capacity: Quantity) -> Result<()> {
        let PendingResize {
            claims,
            namespace,
            claim_name,
            conditions,
            ..
        } = self;
        let remaining: Vec<_> = conditions
            .into_iter()
            .filter(|c| c.type_ != FS_RESIZE_PENDING)
            .collect();
        let patch = json!({"status": {"capacity": {"storage": capacity}, "conditions": remaining}});
        claims
            .patch_status(&claim_name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(Error::api(format!(
                "updating the status of PVC {namespace}/{claim_name}"
            )))?;
        tracing::info!(volume = %unique, pvc = %format!("{namespace}/{claim_name}"), capacity = %capacity.0, "file system expanded");
        Ok(())
    }
}

/// NodeExpandVolume of `mounted`, published at kubelet's `target`, to `bytes`; failures are
/// kubelet's `NodeExpandVolume failed …`. The caller holds the volume's lock and checked
/// the driver has the `EXPAND_VOLUME` node capability.
pub(super) async fn node_expand(
    driver: &RegisteredDriver,
    mounted: &MountedVolume,
    target: &Path,
    resize: &PendingResize,
    bytes: i64,
) -> Result<()> {
    let pv_name = &mounted.volume.pv;
    let request = NodeExpandVolumeRequest {
        volume_id: mounted.volume.handle.clone(),
        volume_path: target.display().to_string(),
        capacity_range: Some(CapacityRange {
            required_bytes: bytes,
            limit_bytes: 0,
        }),
        staging_target_path: match (mounted.staged, mounted.volume.block) {
            (true, false) => staging_path(pv_name).display().to_string(),
            (true, true) => block_staging_path(pv_name).display().to_string(),
            (false, _) => String::new(),
        },
        volume_capability: Some(kubelet_volume_capability(&resize.spec)),
        secrets: HashMap::new(),
    };
    node_call(driver.node_client().node_expand_volume(request))
        .await
        .map_err(|cause| Error::NodeExpand {
            volume: pv_name.clone(),
            cause: Box::new(cause),
        })?;
    Ok(())
}
