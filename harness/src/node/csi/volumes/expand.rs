//! Node-side expansion: once the external-resizer has grown a volume and the claim carries the
//! `FileSystemResizePending` condition, kubelet calls NodeExpandVolume (drivers with the
//! node `EXPAND_VOLUME` capability) on a published target with the PV's new capacity, then
//! sets the claim's status capacity and removes the condition.

use std::collections::HashMap;
use std::time::Duration;

use csi_proto::v1::node_service_capability::rpc::Type as CapabilityType;
use csi_proto::v1::{CapacityRange, NodeExpandVolumeRequest};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::VolumeManager;
use super::capability::kubelet_volume_capability;
use super::paths::{block_staging_path, staging_path};
use super::state::MountedVolume;
use crate::node::csi::drivers::node_call;
use crate::node::csi::error::{Error, Result};
use crate::node::error_chain;

/// The PVC condition asking the node to grow the file system.
pub const FS_RESIZE_PENDING: &str = "FileSystemResizePending";

impl VolumeManager {
    /// Every `interval`, grows the file systems of published volumes whose claim has the
    /// `FileSystemResizePending` condition (see [`VolumeManager::expand_pending`]).
    pub async fn expand_forever(&self, interval: Duration) {
        loop {
            tokio::time::sleep(interval).await;
            self.expand_pending().await;
        }
    }

    /// For each published volume whose claim has the `FileSystemResizePending` condition and
    /// whose driver has the node `EXPAND_VOLUME` capability: NodeExpandVolume to the PV's
    /// capacity, then the claim's status capacity is set to it and the condition removed.
    /// Failures are logged and tried again next time.
    pub async fn expand_pending(&self) {
        for (unique, mounted) in self.state.published() {
            if let Err(e) = self.expand(&unique, &mounted).await {
                tracing::warn!(volume = %unique, pv = %mounted.volume.pv, error = %error_chain(&e), "node expansion failed");
            }
        }
    }

    async fn expand(&self, unique: &str, mounted: &MountedVolume) -> Result<()> {
        let pv_name = &mounted.volume.pv;
        let pvs: Api<PersistentVolume> = Api::all(self.client.clone());
        let Some(pv) = pvs
            .get_opt(pv_name)
            .await
            .map_err(Error::api(format!("reading PV {pv_name:?}")))?
        else {
            return Ok(());
        };
        let spec = pv.spec.unwrap_or_default();
        let Some(claim_ref) = &spec.claim_ref else {
            return Ok(());
        };
        let namespace = claim_ref.namespace.clone().unwrap_or_default();
        let claim_name = claim_ref.name.clone().unwrap_or_default();
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &namespace);
        let Some(pvc) = claims
            .get_opt(&claim_name)
            .await
            .map_err(Error::api(format!("reading PVC {namespace}/{claim_name}")))?
        else {
            return Ok(());
        };
        let conditions = pvc.status.and_then(|s| s.conditions).unwrap_or_default();
        if !conditions.iter().any(|c| c.type_ == FS_RESIZE_PENDING) {
            return Ok(());
        }
        let Some(driver) = self.drivers.get(&mounted.volume.driver) else {
            return Ok(());
        };
        if !driver
            .node_capabilities()
            .await?
            .has(CapabilityType::ExpandVolume)
        {
            return Ok(());
        }
        let Some(capacity) = spec
            .capacity
            .as_ref()
            .and_then(|c| c.get("storage"))
            .cloned()
        else {
            return Err(Error::NoCapacity {
                pv: pv_name.clone(),
            });
        };
        let bytes = kube_support::quantity::parse_bytes(&capacity.0).map_err(|source| {
            Error::BadCapacity {
                pv: pv_name.clone(),
                source: Box::new(source),
            }
        })?;
        let _guard = self.lock(unique).await;
        // Unpublished while waiting for the lock: nothing to grow.
        let Some(target) = self.state.publish_target(unique) else {
            return Ok(());
        };
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
            volume_capability: Some(kubelet_volume_capability(&spec)),
            secrets: HashMap::new(),
        };
        node_call(driver.node_client().node_expand_volume(request))
            .await
            .map_err(|cause| Error::NodeExpand {
                volume: pv_name.clone(),
                cause: Box::new(cause),
            })?;
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
