//! Step 4 of a mount, for drivers with the node `STAGE_UNSTAGE_VOLUME` capability: staging
//! the volume once per node (kubelet's MountDevice) at its global mount,
//! `/var/lib/kubelet/plugins/kubernetes.io/csi/pv/<pv>/globalmount`, with `vol_data.json`
//! (driver and handle) next to it; a block volume (kubelet's SetUpDevice) at the directory
//! `…/csi/volumeDevices/staging/<pv>` (see [`block`](super::block)). Every pod on the node
//! then shares the staged volume; it is unstaged when no pod uses or wants it any more (see
//! [`teardown`](super::teardown)).

use std::collections::HashMap;
use std::path::Path;

use csi_proto::v1::{NodeStageVolumeRequest, VolumeCapability};
use kube_support::error::IoContext;

use super::host::VolumeHost;
use super::resolve::ResolvedVolume;
use super::secrets;
use super::vol_data::{VOL_DATA_FILE, VolData};
use crate::csi::RegisteredDriver;
use crate::csi::drivers::node_call;
use crate::csi::error::{Error, Result};

/// NodeStageVolume of `resolved` at kubelet's `staging` path on `host`, after creating the
/// directory and (filesystem volumes) its `vol_data.json`; failures are kubelet's
/// `MountVolume.MountDevice failed …` (`MapVolume.SetUpDevice failed …` for a block
/// volume). The caller holds the volume's lock, checked it is not staged yet, and records
/// it staged when this succeeds.
pub(super) async fn stage(
    host: &VolumeHost,
    driver: &RegisteredDriver,
    resolved: &ResolvedVolume,
    staging: &Path,
    publish_context: &HashMap<String, String>,
    capability: &VolumeCapability,
) -> Result<()> {
    let csi = &resolved.csi;
    let block = resolved.is_block();
    let device_failed = |cause: Error| {
        let (volume, cause) = (resolved.pv_name.clone(), Box::new(cause));
        if block {
            Error::SetUpDevice { volume, cause }
        } else {
            Error::MountDevice { volume, cause }
        }
    };
    let host_staging = host.path(staging);
    std::fs::create_dir_all(&host_staging)
        .map_err(Error::io("creating", &host_staging))
        .map_err(device_failed)?;
    // A block volume's vol_data.json is elsewhere, written before (see `block`).
    if !block {
        let data = VolData {
            driver_name: csi.driver.clone(),
            volume_handle: csi.volume_handle.clone(),
            ..VolData::default()
        };
        if let Some(pv_dir) = host_staging.parent() {
            data.write(&pv_dir.join(VOL_DATA_FILE))
                .map_err(device_failed)?;
        }
    }
    let secrets = secrets::node_stage(&host.client, csi)
        .await
        .map_err(device_failed)?;
    let request = NodeStageVolumeRequest {
        volume_id: csi.volume_handle.clone(),
        publish_context: publish_context.clone(),
        staging_target_path: staging.display().to_string(),
        volume_capability: Some(capability.clone()),
        secrets,
        volume_context: resolved.volume_attributes(),
    };
    node_call(driver.node_client().node_stage_volume(request))
        .await
        .map_err(device_failed)?;
    tracing::info!(volume = %resolved.identity().unique_name(), pv = %resolved.pv_name, "volume staged");
    Ok(())
}
