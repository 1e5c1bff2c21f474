//! Volume statistics of a pod's published CSI volumes, as kubelet gathers them for
//! `/stats/summary`: NodeGetVolumeStats on the publish path, for drivers with the
//! `GET_VOLUME_STATS` node capability (others' volumes have none, as with kubelet).

use csi_proto::v1::NodeGetVolumeStatsRequest;
use csi_proto::v1::node_service_capability::rpc::Type as CapabilityType;
use csi_proto::v1::volume_usage::Unit;

use super::host::VolumeHost;
use super::paths::{pod_csi_dir, publish_path, staging_path};
use super::vol_data::{VOL_DATA_FILE, VolData, subdirs};
use crate::csi::CsiDrivers;
use crate::csi::drivers::within_timeout;
use crate::{error_chain, mounts};

/// One published volume's usage.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VolumeStats {
    /// The PV.
    pub pv: String,
    /// Bytes: available, total, used.
    pub available_bytes: Option<i64>,
    /// Total bytes.
    pub capacity_bytes: Option<i64>,
    /// Used bytes.
    pub used_bytes: Option<i64>,
    /// Free inodes.
    pub inodes_free: Option<i64>,
    /// Total inodes.
    pub inodes: Option<i64>,
    /// Used inodes.
    pub inodes_used: Option<i64>,
}

/// The usage of every CSI volume published for pod `uid` on `host` (found on disk through
/// its `vol_data.json`) whose driver among `drivers` reports it. Failures leave a volume
/// out (logged at debug level), as kubelet leaves it out of the summary.
pub(super) async fn volume_stats(
    host: &VolumeHost,
    drivers: &CsiDrivers,
    uid: &str,
) -> Vec<VolumeStats> {
    let mut stats = Vec::new();
    for (pv, pv_dir) in subdirs(&host.path(&pod_csi_dir(uid))) {
        let Ok(data) = VolData::read(&pv_dir.join(VOL_DATA_FILE)) else {
            continue;
        };
        if !mounts::is_mount_point(&pv_dir.join("mount")).unwrap_or(false) {
            continue;
        }
        let Some(driver) = drivers.get(&data.driver_name) else {
            continue;
        };
        let capabilities = match driver.node_capabilities().await {
            Ok(capabilities) => capabilities.clone(),
            Err(e) => {
                tracing::debug!(driver = %driver.name, error = %error_chain(&e), "no node capabilities for volume stats");
                continue;
            }
        };
        if !capabilities.has(CapabilityType::GetVolumeStats) {
            continue;
        }
        let staging = if capabilities.has(CapabilityType::StageUnstageVolume) {
            staging_path(&pv).to_string_lossy().into_owned()
        } else {
            String::new()
        };
        let request = NodeGetVolumeStatsRequest {
            volume_id: data.volume_handle.clone(),
            volume_path: publish_path(uid, &pv).to_string_lossy().into_owned(),
            staging_target_path: staging,
        };
        let answer = match within_timeout(driver.node_client().node_get_volume_stats(request)).await
        {
            Ok(answer) => answer,
            Err(status) => {
                tracing::debug!(driver = %driver.name, %pv, %status, "NodeGetVolumeStats failed");
                continue;
            }
        };
        let mut volume = VolumeStats {
            pv: pv.clone(),
            ..VolumeStats::default()
        };
        for usage in answer.usage {
            match Unit::try_from(usage.unit) {
                Ok(Unit::Bytes) => {
                    volume.available_bytes = Some(usage.available);
                    volume.capacity_bytes = Some(usage.total);
                    volume.used_bytes = Some(usage.used);
                }
                Ok(Unit::Inodes) => {
                    volume.inodes_free = Some(usage.available);
                    volume.inodes = Some(usage.total);
                    volume.inodes_used = Some(usage.used);
                }
                _ => {}
            }
        }
        stats.push(volume);
    }
    stats
}
