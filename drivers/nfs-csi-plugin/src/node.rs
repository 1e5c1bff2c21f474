//! The Node service: publish (mount), unpublish (unmount), volume stats, info.
//!
//! No staging: like upstream's NFS plugin, everything happens in NodePublishVolume, so
//! the STAGE_UNSTAGE_VOLUME capability is not advertised and NodeStage/NodeUnstage (and
//! NodeExpandVolume) answer Unimplemented.

use std::{
    collections::{HashMap, HashSet},
    path::{Path, PathBuf},
    sync::{Arc, Mutex, PoisonError},
};

use csi_proto::v1::{
    NodeGetCapabilitiesRequest, NodeGetCapabilitiesResponse, NodeGetInfoRequest,
    NodeGetInfoResponse, NodeGetVolumeStatsRequest, NodeGetVolumeStatsResponse,
    NodePublishVolumeRequest, NodePublishVolumeResponse, NodeServiceCapability,
    NodeUnpublishVolumeRequest, NodeUnpublishVolumeResponse, VolumeCapability, VolumeUsage,
    node_server::Node, node_service_capability, volume_capability, volume_usage,
};
use tonic::{Request, Response, Status};
use tracing::{Instrument, info, info_span};

use crate::{
    error::{NodeError, Result},
    mount_table::is_mount_point,
    mounter::{MountRequest, Mounter},
};

/// Volume-context keys understood by NodePublishVolume (as upstream's NFS plugin).
pub mod context_keys {
    /// NFS server host name or address.
    pub const SERVER: &str = "server";
    /// Exported path on the server.
    pub const SHARE: &str = "share";
    /// Extra comma-separated mount options (matched case-insensitively).
    pub const MOUNT_OPTIONS: &str = "mountoptions";
}

/// How many stacked mounts NodeUnpublishVolume removes at most at one target.
const MAX_STACKED_MOUNTS: usize = 8;

/// The Node service over a [`Mounter`].
#[derive(Debug)]
pub struct NodeService<M> {
    node_id: String,
    mounter: Arc<M>,
    in_flight: Arc<Mutex<HashSet<String>>>,
}

impl<M: Mounter> NodeService<M> {
    /// A node service answering NodeGetInfo with `node_id` and mounting with `mounter`.
    pub fn new(node_id: impl Into<String>, mounter: M) -> Self {
        Self {
            node_id: node_id.into(),
            mounter: Arc::new(mounter),
            in_flight: Arc::default(),
        }
    }

    /// Marks `volume_id` busy until the guard drops; Aborted if it already is.
    fn begin(&self, volume_id: &str) -> Result<InFlight> {
        let mut busy = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if !busy.insert(volume_id.to_owned()) {
            return Err(NodeError::InProgress(volume_id.to_owned()));
        }
        Ok(InFlight {
            set: Arc::clone(&self.in_flight),
            volume_id: volume_id.to_owned(),
        })
    }

    async fn publish(&self, request: NodePublishVolumeRequest) -> Result<()> {
        let volume_id = required("volume_id", &request.volume_id)?;
        let target = Path::new(required("target_path", &request.target_path)?);
        let capability = request
            .volume_capability
            .as_ref()
            .ok_or(NodeError::MissingField("volume_capability"))?;
        let flags = mount_flags(capability)?;
        let server = context_value(&request.volume_context, context_keys::SERVER)
            .ok_or(NodeError::MissingField("volume_context.server"))?;
        let share = context_value(&request.volume_context, context_keys::SHARE)
            .ok_or(NodeError::MissingField("volume_context.share"))?;
        let mut options: Vec<String> = flags.to_vec();
        if let Some(extra) = context_value(&request.volume_context, context_keys::MOUNT_OPTIONS) {
            options.extend(
                extra
                    .split(',')
                    .map(str::trim)
                    .filter(|o| !o.is_empty())
                    .map(String::from),
            );
        }
        let _busy = self.begin(volume_id)?;

        if is_mount_point(target)? {
            info!(target = %target.display(), "already mounted");
            return Ok(());
        }
        let created = !target.exists();
        std::fs::create_dir_all(target)
            .map_err(|e| NodeError::io("create target directory", target, e))?;
        let mount = MountRequest {
            server,
            share,
            target,
            options: &options,
            readonly: request.readonly,
        };
        if let Err(error) = self.mounter.mount(&mount).await {
            if created {
                // Leave no empty directory behind from a failed first attempt.
                let _ = std::fs::remove_dir(target);
            }
            return Err(error);
        }
        info!(
            export = %mount.export(),
            target = %target.display(),
            readonly = request.readonly,
            mounter = self.mounter.name(),
            "mounted"
        );
        Ok(())
    }

    async fn unpublish(&self, request: NodeUnpublishVolumeRequest) -> Result<()> {
        let volume_id = required("volume_id", &request.volume_id)?;
        let target = PathBuf::from(required("target_path", &request.target_path)?);
        let _busy = self.begin(volume_id)?;

        if std::fs::symlink_metadata(&target).is_err() {
            info!(target = %target.display(), "target already gone");
            return Ok(());
        }
        for _ in 0..MAX_STACKED_MOUNTS {
            if !is_mount_point(&target)? {
                break;
            }
            self.mounter.unmount(&target).await?;
        }
        if is_mount_point(&target)? {
            return Err(NodeError::UnmountFailed {
                target,
                detail: format!("still mounted after {MAX_STACKED_MOUNTS} unmounts"),
            });
        }
        std::fs::remove_dir(&target)
            .map_err(|e| NodeError::io("remove target directory", &target, e))?;
        info!(target = %target.display(), "unmounted and removed");
        Ok(())
    }

    fn stats(&self, request: &NodeGetVolumeStatsRequest) -> Result<Vec<VolumeUsage>> {
        required("volume_id", &request.volume_id)?;
        let path = Path::new(required("volume_path", &request.volume_path)?);
        if std::fs::symlink_metadata(path).is_err() {
            return Err(NodeError::VolumePathNotFound(path.to_owned()));
        }
        let stats = nix::sys::statvfs::statvfs(path)
            .map_err(|errno| NodeError::io("statvfs", path, errno.into()))?;
        let block = stats.fragment_size();
        let bytes = |blocks: u64| saturating_i64(blocks.saturating_mul(block));
        let blocks = stats.blocks();
        let files = stats.files();
        Ok(vec![
            VolumeUsage {
                available: bytes(stats.blocks_available()),
                total: bytes(blocks),
                used: bytes(blocks.saturating_sub(stats.blocks_free())),
                unit: volume_usage::Unit::Bytes.into(),
            },
            VolumeUsage {
                available: saturating_i64(stats.files_free()),
                total: saturating_i64(files),
                used: saturating_i64(files.saturating_sub(stats.files_free())),
                unit: volume_usage::Unit::Inodes.into(),
            },
        ])
    }
}

struct InFlight {
    set: Arc<Mutex<HashSet<String>>>,
    volume_id: String,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.set
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.volume_id);
    }
}

fn required<'a>(field: &'static str, value: &'a str) -> Result<&'a str> {
    if value.is_empty() {
        Err(NodeError::MissingField(field))
    } else {
        Ok(value)
    }
}

/// A volume-context value by key, case-insensitively; empty values count as missing.
fn context_value<'a>(context: &'a HashMap<String, String>, key: &str) -> Option<&'a str> {
    context
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, v)| v.trim())
        .filter(|v| !v.is_empty())
}

/// The mount flags of a mount capability; block access is refused.
fn mount_flags(capability: &VolumeCapability) -> Result<&[String]> {
    match &capability.access_type {
        Some(volume_capability::AccessType::Mount(mount)) => Ok(&mount.mount_flags),
        Some(volume_capability::AccessType::Block(_)) => Err(NodeError::InvalidArgument(
            "volume_capability.block is not supported: NFS volumes are file systems".to_owned(),
        )),
        None => Err(NodeError::MissingField("volume_capability.access_type")),
    }
}

fn saturating_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

#[tonic::async_trait]
impl<M: Mounter> Node for NodeService<M> {
    async fn node_publish_volume(
        &self,
        request: Request<NodePublishVolumeRequest>,
    ) -> Result<Response<NodePublishVolumeResponse>, Status> {
        let request = request.into_inner();
        let span = info_span!("node_publish_volume", volume_id = %request.volume_id);
        self.publish(request).instrument(span).await?;
        Ok(Response::new(NodePublishVolumeResponse {}))
    }

    async fn node_unpublish_volume(
        &self,
        request: Request<NodeUnpublishVolumeRequest>,
    ) -> Result<Response<NodeUnpublishVolumeResponse>, Status> {
        let request = request.into_inner();
        let span = info_span!("node_unpublish_volume", volume_id = %request.volume_id);
        self.unpublish(request).instrument(span).await?;
        Ok(Response::new(NodeUnpublishVolumeResponse {}))
    }

    async fn node_get_volume_stats(
        &self,
        request: Request<NodeGetVolumeStatsRequest>,
    ) -> Result<Response<NodeGetVolumeStatsResponse>, Status> {
        let usage = self.stats(request.get_ref())?;
        Ok(Response::new(NodeGetVolumeStatsResponse {
            usage,
            volume_condition: None,
        }))
    }

    async fn node_get_capabilities(
        &self,
        _: Request<NodeGetCapabilitiesRequest>,
    ) -> Result<Response<NodeGetCapabilitiesResponse>, Status> {
        let rpc = node_service_capability::Rpc {
            r#type: node_service_capability::rpc::Type::GetVolumeStats.into(),
        };
        Ok(Response::new(NodeGetCapabilitiesResponse {
            capabilities: vec![NodeServiceCapability {
                r#type: Some(node_service_capability::Type::Rpc(rpc)),
            }],
        }))
    }

    async fn node_get_info(
        &self,
        _: Request<NodeGetInfoRequest>,
    ) -> Result<Response<NodeGetInfoResponse>, Status> {
        Ok(Response::new(NodeGetInfoResponse {
            node_id: self.node_id.clone(),
            max_volumes_per_node: 0,
            accessible_topology: None,
        }))
    }
}
