//! The CSI Node service: stages a Cinder volume's device (making a file system only when it
//! has none), publishes it by bind mount (the staging directory, or the device file itself
//! for raw block volumes), grows file systems (ext ones before mounting them when they are
//! smaller than their device) and reports usage.
//!
//! The device is found by its serial under the disk directory (see [`device`]); nothing on
//! this side talks to the cloud.

pub mod device;
pub mod mount;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use csi_proto::capability::node_rpc;
use csi_proto::v1::node_server::Node;
use csi_proto::v1::node_service_capability::rpc;
use csi_proto::v1::volume_capability::AccessType;
use csi_proto::v1::{self, VolumeCapability, volume_usage};
use tonic::{Request, Response, Status};

use crate::controller::TOPOLOGY_ZONE_KEY;
use crate::error::{Error, Result};
use crate::rpc_log::handle;
use csi_proto::in_flight::{InFlight, InFlightGuard};

/// What the node service needs to know about its node.
#[derive(Clone, Debug)]
pub struct NodeSettings {
    /// NodeGetInfo's node id (the Nova server id).
    pub node_id: String,
    /// The node's availability zone, reported as topology when set.
    pub zone: Option<String>,
    /// Extra topology segments (`--additional-topology`).
    pub additional_topology: Vec<(String, String)>,
    /// `max_volumes_per_node` (`[BlockStorage] node-volume-attach-limit`).
    pub max_volumes_per_node: i64,
    /// Where disks are linked by id (see [`device::disk_by_id_dir_from_env`]).
    pub disk_dir: PathBuf,
    /// Rescan the device before growing its file system (`[BlockStorage] rescan-on-resize`).
    pub rescan_on_resize: bool,
}

/// The Node service.
#[derive(Clone, Debug)]
pub struct NodeService {
    settings: Arc<NodeSettings>,
    operations: InFlight,
}

impl NodeService {
    /// A node service with `settings`.
    pub fn new(settings: NodeSettings) -> Self {
        NodeService {
            settings: Arc::new(settings),
            operations: InFlight::default(),
        }
    }

    fn claim(&self, volume_id: &str) -> Result<InFlightGuard> {
        Ok(self
            .operations
            .begin(volume_id, &format!("volume {volume_id}"))?)
    }

    async fn stage(
        &self,
        request: v1::NodeStageVolumeRequest,
    ) -> Result<v1::NodeStageVolumeResponse> {
        let volume_id = required("volume_id", &request.volume_id)?;
        let staging = Path::new(required(
            "staging_target_path",
            &request.staging_target_path,
        )?);
        let capability = capability(request.volume_capability.as_ref())?;
        let _busy = self.claim(volume_id)?;
        let Some(AccessType::Mount(mount_cap)) = &capability.access_type else {
            // Raw block: NodePublish binds the device itself.
            return Ok(v1::NodeStageVolumeResponse {});
        };
        let device = device::find_device(&self.settings.disk_dir, volume_id)?;
        if mount::is_mount_point(staging)? {
            return Ok(v1::NodeStageVolumeResponse {});
        }
        let wanted = if !mount_cap.fs_type.is_empty() {
            mount_cap.fs_type.clone()
        } else {
            request
                .volume_context
                .get("fsType")
                .filter(|f| !f.is_empty())
                .cloned()
                .unwrap_or_else(|| "ext4".into())
        };
        if !mount::SUPPORTED_FS.contains(&wanted.as_str()) {
            return Err(Error::InvalidArgument(format!(
                "file system {wanted:?} is not supported (one of {})",
                mount::SUPPORTED_FS.join(", ")
            )));
        }
        std::fs::create_dir_all(staging)
            .map_err(|e| Error::Internal(format!("cannot create {}: {e}", staging.display())))?;
        match mount::fs_type(&device).await? {
            None => {
                tracing::info!(volume_id, device = %device.display(), fs = %wanted, "formatting");
                mount::format(&device, &wanted).await?;
            }
            Some(found) if found == wanted => {
                self.grow_before_mount(volume_id, &device, &found).await?
            }
            Some(found) => {
                return Err(Error::FailedPrecondition(format!(
                    "volume {volume_id} ({}) already has a {found} file system, not {wanted}; \
                     it is not reformatted",
                    device.display()
                )));
            }
        }
        mount::mount(&device, staging, &wanted, &mount_cap.mount_flags).await?;
        Ok(v1::NodeStageVolumeResponse {})
    }

    /// Grows an ext2/3/4 file system smaller than its device (a volume expanded while
    /// detached) before it is mounted: offline growth needs no `CAP_SYS_RESOURCE`, and
    /// kubelet's NodeExpandVolume afterwards finds nothing left to do. xfs grows only
    /// mounted: NodeExpandVolume does that.
    async fn grow_before_mount(&self, volume_id: &str, device: &Path, fs: &str) -> Result<()> {
        if !mount::is_ext(fs) || mount::device_is_mounted(device)? {
            return Ok(());
        }
        let geometry = mount::ext_geometry(device).await?;
        let device_bytes = device::size_bytes(device)?;
        if !geometry.can_grow_to(device_bytes) {
            return Ok(());
        }
        tracing::info!(
            volume_id,
            device = %device.display(),
            fs_bytes = geometry.size_bytes(),
            device_bytes,
            "growing the file system before mounting it"
        );
        mount::grow_offline(device).await
    }

    async fn unstage(
        &self,
        request: v1::NodeUnstageVolumeRequest,
    ) -> Result<v1::NodeUnstageVolumeResponse> {
        let volume_id = required("volume_id", &request.volume_id)?;
        let staging = Path::new(required(
            "staging_target_path",
            &request.staging_target_path,
        )?);
        let _busy = self.claim(volume_id)?;
        while mount::is_mount_point(staging)? {
            mount::unmount(staging).await?;
        }
        Ok(v1::NodeUnstageVolumeResponse {})
    }

    async fn publish(
        &self,
        request: v1::NodePublishVolumeRequest,
    ) -> Result<v1::NodePublishVolumeResponse> {
        let volume_id = required("volume_id", &request.volume_id)?;
        let target = Path::new(required("target_path", &request.target_path)?);
        let capability = capability(request.volume_capability.as_ref())?;
        let _busy = self.claim(volume_id)?;
        if mount::is_mount_point(target)? {
            return Ok(v1::NodePublishVolumeResponse {});
        }
        match &capability.access_type {
            Some(AccessType::Block(_)) => {
                let device = device::find_device(&self.settings.disk_dir, volume_id)?;
                if let Some(parent) = target.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| {
                        Error::Internal(format!("cannot create {}: {e}", parent.display()))
                    })?;
                }
                if !target.exists() {
                    std::fs::File::create(target).map_err(|e| {
                        Error::Internal(format!("cannot create {}: {e}", target.display()))
                    })?;
                }
                mount::bind(&device, target, request.readonly).await?;
            }
            _ => {
                let staging = Path::new(required(
                    "staging_target_path",
                    &request.staging_target_path,
                )?);
                if !mount::is_mount_point(staging)? {
                    return Err(Error::FailedPrecondition(format!(
                        "volume {volume_id} is not staged at {}",
                        staging.display()
                    )));
                }
                std::fs::create_dir_all(target).map_err(|e| {
                    Error::Internal(format!("cannot create {}: {e}", target.display()))
                })?;
                mount::bind(staging, target, request.readonly).await?;
            }
        }
        Ok(v1::NodePublishVolumeResponse {})
    }

    async fn unpublish(
        &self,
        request: v1::NodeUnpublishVolumeRequest,
    ) -> Result<v1::NodeUnpublishVolumeResponse> {
        let volume_id = required("volume_id", &request.volume_id)?;
        let target = Path::new(required("target_path", &request.target_path)?);
        let _busy = self.claim(volume_id)?;
        while mount::is_mount_point(target)? {
            mount::unmount(target).await?;
        }
        let removed = if target.is_dir() {
            std::fs::remove_dir(target)
        } else {
            std::fs::remove_file(target)
        };
        match removed {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::Internal(format!(
                "cannot remove {}: {e}",
                target.display()
            ))),
            _ => Ok(v1::NodeUnpublishVolumeResponse {}),
        }
    }

    async fn expand(
        &self,
        request: v1::NodeExpandVolumeRequest,
    ) -> Result<v1::NodeExpandVolumeResponse> {
        let volume_id = required("volume_id", &request.volume_id)?;
        let volume_path = Path::new(required("volume_path", &request.volume_path)?);
        let _busy = self.claim(volume_id)?;
        let device = device::find_device(&self.settings.disk_dir, volume_id)?;
        if self.settings.rescan_on_resize {
            device::rescan(&device)?;
        }
        let block = matches!(
            request
                .volume_capability
                .as_ref()
                .and_then(|c| c.access_type.as_ref()),
            Some(AccessType::Block(_))
        ) || !volume_path.is_dir();
        if !block {
            if !mount::is_mount_point(volume_path)? {
                return Err(Error::NotFound(format!(
                    "volume {volume_id} is not mounted at {}",
                    volume_path.display()
                )));
            }
            let fs = mount::fs_type(&device).await?.ok_or_else(|| {
                Error::FailedPrecondition(format!(
                    "volume {volume_id} ({}) has no file system to grow",
                    device.display()
                ))
            })?;
            if mount::is_ext(&fs)
                && !mount::ext_geometry(&device)
                    .await?
                    .can_grow_to(device::size_bytes(&device)?)
            {
                // Already grown (NodeStageVolume grows offline). resize2fs is not run: on a
                // mounted file system it may go to the kernel's online resize, which needs
                // CAP_SYS_RESOURCE, and whether it first sees nothing to do is its business.
                tracing::info!(volume_id, device = %device.display(), "the file system already fills the device");
            } else {
                mount::grow(&device, &fs, volume_path).await?;
            }
        }
        let capacity_bytes = device::size_bytes(&device)?;
        Ok(v1::NodeExpandVolumeResponse {
            capacity_bytes: i64::try_from(capacity_bytes).unwrap_or(i64::MAX),
        })
    }

    async fn stats(
        &self,
        request: v1::NodeGetVolumeStatsRequest,
    ) -> Result<v1::NodeGetVolumeStatsResponse> {
        required("volume_id", &request.volume_id)?;
        let path = Path::new(required("volume_path", &request.volume_path)?);
        let metadata = std::fs::metadata(path)
            .map_err(|e| Error::NotFound(format!("volume path {}: {e}", path.display())))?;
        use std::os::unix::fs::FileTypeExt;
        if metadata.file_type().is_block_device() {
            let total = i64::try_from(device::size_bytes(path)?).unwrap_or(i64::MAX);
            return Ok(v1::NodeGetVolumeStatsResponse {
                usage: vec![v1::VolumeUsage {
                    total,
                    unit: volume_usage::Unit::Bytes as i32,
                    ..Default::default()
                }],
                volume_condition: None,
            });
        }
        let stat = nix::sys::statvfs::statvfs(path)
            .map_err(|e| Error::Internal(format!("statvfs {}: {e}", path.display())))?;
        let fragment = stat.fragment_size() as i64;
        let as_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let total = as_i64(stat.blocks() as u64).saturating_mul(fragment);
        let available = as_i64(stat.blocks_available() as u64).saturating_mul(fragment);
        let free = as_i64(stat.blocks_free() as u64).saturating_mul(fragment);
        let inodes = as_i64(stat.files() as u64);
        let inodes_free = as_i64(stat.files_free() as u64);
        Ok(v1::NodeGetVolumeStatsResponse {
            usage: vec![
                v1::VolumeUsage {
                    available,
                    total,
                    used: total - free,
                    unit: volume_usage::Unit::Bytes as i32,
                },
                v1::VolumeUsage {
                    available: inodes_free,
                    total: inodes,
                    used: inodes - inodes_free,
                    unit: volume_usage::Unit::Inodes as i32,
                },
            ],
            volume_condition: None,
        })
    }

    fn info(&self) -> v1::NodeGetInfoResponse {
        let mut segments = BTreeMap::new();
        if let Some(zone) = &self.settings.zone {
            segments.insert(TOPOLOGY_ZONE_KEY.to_string(), zone.clone());
        }
        for (key, value) in &self.settings.additional_topology {
            segments.insert(key.clone(), value.clone());
        }
        v1::NodeGetInfoResponse {
            node_id: self.settings.node_id.clone(),
            max_volumes_per_node: self.settings.max_volumes_per_node,
            accessible_topology: (!segments.is_empty()).then(|| v1::Topology {
                segments: segments.into_iter().collect(),
            }),
        }
    }
}

fn required<'a>(field: &str, value: &'a str) -> Result<&'a str> {
    if value.is_empty() {
        Err(Error::InvalidArgument(format!("{field} is missing")))
    } else {
        Ok(value)
    }
}

fn capability(capability: Option<&VolumeCapability>) -> Result<&VolumeCapability> {
    match capability {
        Some(c) if c.access_type.is_some() => Ok(c),
        _ => Err(Error::InvalidArgument(
            "volume_capability is missing".into(),
        )),
    }
}

#[tonic::async_trait]
impl Node for NodeService {
    async fn node_stage_volume(
        &self,
        request: Request<v1::NodeStageVolumeRequest>,
    ) -> Result<Response<v1::NodeStageVolumeResponse>, Status> {
        handle("NodeStageVolume", request.into_inner(), |r| self.stage(r)).await
    }

    async fn node_unstage_volume(
        &self,
        request: Request<v1::NodeUnstageVolumeRequest>,
    ) -> Result<Response<v1::NodeUnstageVolumeResponse>, Status> {
        handle("NodeUnstageVolume", request.into_inner(), |r| {
            self.unstage(r)
        })
        .await
    }

    async fn node_publish_volume(
        &self,
        request: Request<v1::NodePublishVolumeRequest>,
    ) -> Result<Response<v1::NodePublishVolumeResponse>, Status> {
        handle("NodePublishVolume", request.into_inner(), |r| {
            self.publish(r)
        })
        .await
    }

    async fn node_unpublish_volume(
        &self,
        request: Request<v1::NodeUnpublishVolumeRequest>,
    ) -> Result<Response<v1::NodeUnpublishVolumeResponse>, Status> {
        handle("NodeUnpublishVolume", request.into_inner(), |r| {
            self.unpublish(r)
        })
        .await
    }

    async fn node_get_volume_stats(
        &self,
        request: Request<v1::NodeGetVolumeStatsRequest>,
    ) -> Result<Response<v1::NodeGetVolumeStatsResponse>, Status> {
        handle("NodeGetVolumeStats", request.into_inner(), |r| {
            self.stats(r)
        })
        .await
    }

    async fn node_expand_volume(
        &self,
        request: Request<v1::NodeExpandVolumeRequest>,
    ) -> Result<Response<v1::NodeExpandVolumeResponse>, Status> {
        handle("NodeExpandVolume", request.into_inner(), |r| self.expand(r)).await
    }

    async fn node_get_capabilities(
        &self,
        request: Request<v1::NodeGetCapabilitiesRequest>,
    ) -> Result<Response<v1::NodeGetCapabilitiesResponse>, Status> {
        handle("NodeGetCapabilities", request.into_inner(), |_| async {
            Ok(v1::NodeGetCapabilitiesResponse {
                capabilities: vec![
                    node_rpc(rpc::Type::StageUnstageVolume),
                    node_rpc(rpc::Type::ExpandVolume),
                    node_rpc(rpc::Type::GetVolumeStats),
                ],
            })
        })
        .await
    }

    async fn node_get_info(
        &self,
        request: Request<v1::NodeGetInfoRequest>,
    ) -> Result<Response<v1::NodeGetInfoResponse>, Status> {
        handle("NodeGetInfo", request.into_inner(), |_| async {
            Ok(self.info())
        })
        .await
    }
}
