//! The CSI Controller service: maps gRPC messages onto [`Controller`].

use std::collections::HashMap;

use csi_proto::capability::controller_capabilities;
use csi_proto::v1::controller_server::Controller as ControllerRpc;
use csi_proto::v1::controller_service_capability::rpc;
use csi_proto::v1::volume_capability::AccessType;
use csi_proto::v1::volume_capability::access_mode::Mode;
use csi_proto::v1::volume_content_source::{self, SnapshotSource};
use csi_proto::v1::{self, Topology, VolumeCapability};
use tonic::{Request, Response, Status};

use super::{Controller, CreateVolume, TopologyRequirement};
use crate::error::{Error, Result};
use crate::rpc_log::handle;

/// Access modes a Manila share supports.
pub const SUPPORTED_MODES: [Mode; 5] = [
    Mode::MultiNodeMultiWriter,
    Mode::MultiNodeSingleWriter,
    Mode::MultiNodeReaderOnly,
    Mode::SingleNodeWriter,
    Mode::SingleNodeReaderOnly,
];

/// Why `capability` is unsupported, or `None` if it is supported.
fn unsupported(capability: &VolumeCapability) -> Option<String> {
    match &capability.access_type {
        Some(AccessType::Mount(_)) => {}
        Some(AccessType::Block(_)) => return Some("block access type is not supported".into()),
        None => return Some("access_type is missing".into()),
    }
    let mode = capability
        .access_mode
        .as_ref()
        .and_then(|m| Mode::try_from(m.mode).ok())
        .unwrap_or(Mode::Unknown);
    (!SUPPORTED_MODES.contains(&mode))
        .then(|| format!("access mode {} is not supported", mode.as_str_name()))
}

fn check_capabilities(capabilities: &[VolumeCapability]) -> Result<()> {
    if capabilities.is_empty() {
        return Err(Error::InvalidArgument(
            "volume_capabilities: required".into(),
        ));
    }
    if let Some(reason) = capabilities.iter().find_map(unsupported) {
        return Err(Error::InvalidArgument(format!(
            "volume_capabilities: {reason}"
        )));
    }
    Ok(())
}

fn segments(topologies: &[Topology]) -> Vec<HashMap<String, String>> {
    topologies.iter().map(|t| t.segments.clone()).collect()
}

fn unimplemented<T>(rpc: &str) -> std::result::Result<Response<T>, Status> {
    Err(Status::unimplemented(format!(
        "{rpc} is not supported by the Manila CSI driver"
    )))
}

#[tonic::async_trait]
impl ControllerRpc for Controller {
    async fn create_volume(
        &self,
        request: Request<v1::CreateVolumeRequest>,
    ) -> std::result::Result<Response<v1::CreateVolumeResponse>, Status> {
        handle("CreateVolume", request.into_inner(), |request| async move {
            if request.name.is_empty() {
                return Err(Error::InvalidArgument(
                    "name: volume name is required".into(),
                ));
            }
            check_capabilities(&request.volume_capabilities)?;
            let source_snapshot_id = match request.volume_content_source.and_then(|s| s.r#type) {
                None => None,
                Some(volume_content_source::Type::Snapshot(snapshot)) => {
                    if snapshot.snapshot_id.is_empty() {
                        return Err(Error::InvalidArgument(
                            "volume_content_source.snapshot.snapshot_id: required".into(),
                        ));
                    }
                    Some(snapshot.snapshot_id)
                }
                Some(volume_content_source::Type::Volume(_)) => {
                    return Err(Error::Unimplemented(
                        "volume_content_source.volume: cloning volumes is not supported".into(),
                    ));
                }
            };
            let range = request.capacity_range.unwrap_or_default();
            let created = self
                .create_volume(CreateVolume {
                    name: request.name,
                    required_bytes: range.required_bytes,
                    limit_bytes: range.limit_bytes,
                    parameters: request.parameters,
                    secrets: request.secrets,
                    source_snapshot_id,
                    topology: request
                        .accessibility_requirements
                        .map(|t| TopologyRequirement {
                            requisite: segments(&t.requisite),
                            preferred: segments(&t.preferred),
                        }),
                })
                .await?;
            Ok(v1::CreateVolumeResponse {
                volume: Some(v1::Volume {
                    capacity_bytes: created.capacity_bytes,
                    volume_id: created.volume_id,
                    volume_context: created.context,
                    content_source: created.source_snapshot_id.map(|snapshot_id| {
                        v1::VolumeContentSource {
                            r#type: Some(volume_content_source::Type::Snapshot(SnapshotSource {
                                snapshot_id,
                            })),
                        }
                    }),
                    accessible_topology: created
                        .accessible_topology
                        .into_iter()
                        .map(|segments| Topology { segments })
                        .collect(),
                }),
            })
        })
        .await
    }

    async fn delete_volume(
        &self,
        request: Request<v1::DeleteVolumeRequest>,
    ) -> std::result::Result<Response<v1::DeleteVolumeResponse>, Status> {
        handle("DeleteVolume", request.into_inner(), |request| async move {
            self.delete_volume(&request.volume_id, &request.secrets)
                .await?;
            Ok(v1::DeleteVolumeResponse {})
        })
        .await
    }

    async fn controller_publish_volume(
        &self,
        _request: Request<v1::ControllerPublishVolumeRequest>,
    ) -> std::result::Result<Response<v1::ControllerPublishVolumeResponse>, Status> {
        unimplemented("ControllerPublishVolume")
    }

    async fn controller_unpublish_volume(
        &self,
        _request: Request<v1::ControllerUnpublishVolumeRequest>,
    ) -> std::result::Result<Response<v1::ControllerUnpublishVolumeResponse>, Status> {
        unimplemented("ControllerUnpublishVolume")
    }

    async fn validate_volume_capabilities(
        &self,
        request: Request<v1::ValidateVolumeCapabilitiesRequest>,
    ) -> std::result::Result<Response<v1::ValidateVolumeCapabilitiesResponse>, Status> {
        handle(
            "ValidateVolumeCapabilities",
            request.into_inner(),
            |request| async move {
                if request.volume_id.is_empty() {
                    return Err(Error::InvalidArgument("volume_id: required".into()));
                }
                if request.volume_capabilities.is_empty() {
                    return Err(Error::InvalidArgument(
                        "volume_capabilities: required".into(),
                    ));
                }
                let mismatch = self
                    .validate_volume(&request.volume_id, &request.secrets)
                    .await?;
                let reason =
                    mismatch.or_else(|| request.volume_capabilities.iter().find_map(unsupported));
                Ok(match reason {
                    Some(message) => v1::ValidateVolumeCapabilitiesResponse {
                        confirmed: None,
                        message,
                    },
                    None => v1::ValidateVolumeCapabilitiesResponse {
                        confirmed: Some(v1::validate_volume_capabilities_response::Confirmed {
                            volume_context: request.volume_context,
                            volume_capabilities: request.volume_capabilities,
                            parameters: request.parameters,
                            mutable_parameters: HashMap::new(),
                        }),
                        message: String::new(),
                    },
                })
            },
        )
        .await
    }

    async fn list_volumes(
        &self,
        _request: Request<v1::ListVolumesRequest>,
    ) -> std::result::Result<Response<v1::ListVolumesResponse>, Status> {
        unimplemented("ListVolumes")
    }

    async fn get_capacity(
        &self,
        _request: Request<v1::GetCapacityRequest>,
    ) -> std::result::Result<Response<v1::GetCapacityResponse>, Status> {
        unimplemented("GetCapacity")
    }

    async fn controller_get_capabilities(
        &self,
        request: Request<v1::ControllerGetCapabilitiesRequest>,
    ) -> std::result::Result<Response<v1::ControllerGetCapabilitiesResponse>, Status> {
        handle(
            "ControllerGetCapabilities",
            request.into_inner(),
            |_| async {
                Ok(controller_capabilities([
                    rpc::Type::CreateDeleteVolume,
                    rpc::Type::CreateDeleteSnapshot,
                    rpc::Type::ExpandVolume,
                ]))
            },
        )
        .await
    }

    async fn create_snapshot(
        &self,
        request: Request<v1::CreateSnapshotRequest>,
    ) -> std::result::Result<Response<v1::CreateSnapshotResponse>, Status> {
        handle(
            "CreateSnapshot",
            request.into_inner(),
            |request| async move {
                let created = self
                    .create_snapshot(&request.name, &request.source_volume_id, &request.secrets)
                    .await?;
                Ok(v1::CreateSnapshotResponse {
                    snapshot: Some(v1::Snapshot {
                        size_bytes: created.size_bytes,
                        snapshot_id: created.snapshot_id,
                        source_volume_id: created.source_volume_id,
                        creation_time: created.creation_time.map(|(seconds, nanos)| {
                            csi_proto::prost_types::Timestamp { seconds, nanos }
                        }),
                        ready_to_use: created.ready_to_use,
                        group_snapshot_id: String::new(),
                    }),
                })
            },
        )
        .await
    }

    async fn delete_snapshot(
        &self,
        request: Request<v1::DeleteSnapshotRequest>,
    ) -> std::result::Result<Response<v1::DeleteSnapshotResponse>, Status> {
        handle(
            "DeleteSnapshot",
            request.into_inner(),
            |request| async move {
                self.delete_snapshot(&request.snapshot_id, &request.secrets)
                    .await?;
                Ok(v1::DeleteSnapshotResponse {})
            },
        )
        .await
    }

    async fn list_snapshots(
        &self,
        _request: Request<v1::ListSnapshotsRequest>,
    ) -> std::result::Result<Response<v1::ListSnapshotsResponse>, Status> {
        unimplemented("ListSnapshots")
    }

    async fn controller_expand_volume(
        &self,
        request: Request<v1::ControllerExpandVolumeRequest>,
    ) -> std::result::Result<Response<v1::ControllerExpandVolumeResponse>, Status> {
        handle(
            "ControllerExpandVolume",
            request.into_inner(),
            |request| async move {
                let range = request
                    .capacity_range
                    .ok_or_else(|| Error::InvalidArgument("capacity_range: required".into()))?;
                let capacity_bytes = self
                    .expand_volume(
                        &request.volume_id,
                        range.required_bytes,
                        range.limit_bytes,
                        &request.secrets,
                    )
                    .await?;
                Ok(v1::ControllerExpandVolumeResponse {
                    capacity_bytes,
                    node_expansion_required: false,
                })
            },
        )
        .await
    }

    async fn controller_get_volume(
        &self,
        _request: Request<v1::ControllerGetVolumeRequest>,
    ) -> std::result::Result<Response<v1::ControllerGetVolumeResponse>, Status> {
        unimplemented("ControllerGetVolume")
    }

    async fn controller_modify_volume(
        &self,
        _request: Request<v1::ControllerModifyVolumeRequest>,
    ) -> std::result::Result<Response<v1::ControllerModifyVolumeResponse>, Status> {
        unimplemented("ControllerModifyVolume")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use csi_proto::v1::volume_capability::{AccessMode, BlockVolume, MountVolume};

    fn capability(mode: Mode, block: bool) -> VolumeCapability {
        VolumeCapability {
            access_mode: Some(AccessMode { mode: mode as i32 }),
            access_type: Some(if block {
                AccessType::Block(BlockVolume {})
            } else {
                AccessType::Mount(MountVolume::default())
            }),
        }
    }

    #[test]
    fn shares_support_mount_with_five_modes() {
        for mode in SUPPORTED_MODES {
            assert_eq!(unsupported(&capability(mode, false)), None);
        }
        assert!(unsupported(&capability(Mode::SingleNodeSingleWriter, false)).is_some());
        assert!(unsupported(&capability(Mode::MultiNodeMultiWriter, true)).is_some());
    }
}
