//! The gRPC face of the controller: CSI messages in, [`Controller`] calls, CSI messages out.

use std::collections::{BTreeMap, HashMap};

use csi_proto::capability::controller_capabilities;
use csi_proto::v1::controller_server::Controller as CsiController;
use csi_proto::v1::controller_service_capability::rpc;
use csi_proto::v1::volume_capability::access_mode::Mode;
use csi_proto::v1::{self, VolumeCapability};
use tonic::{Request, Response, Status};

use super::params::{GIB, PROVISIONER_PREFIX, SnapshotParameters, VolumeParameters, size_gib};
use super::{Controller, CreateRequest, TOPOLOGY_ZONE_KEY, page};
use crate::error::{Error, Result};
use crate::rpc_log::handle;
use openstack_client::cinder::{Snapshot, Volume};

fn required<'a>(field: &str, value: &'a str) -> Result<&'a str> {
    if value.is_empty() {
        Err(Error::InvalidArgument(format!("{field} is missing")))
    } else {
        Ok(value)
    }
}

fn mode_of(capability: &VolumeCapability) -> Option<Mode> {
    capability
        .access_mode
        .as_ref()
        .and_then(|m| Mode::try_from(m.mode).ok())
}

fn multi_node(mode: Mode) -> bool {
    matches!(
        mode,
        Mode::MultiNodeReaderOnly | Mode::MultiNodeSingleWriter | Mode::MultiNodeMultiWriter
    )
}

/// Checks capabilities are present and well-formed.
fn check_capabilities(capabilities: &[VolumeCapability]) -> Result<()> {
    if capabilities.is_empty() {
        return Err(Error::InvalidArgument(
            "volume_capabilities are missing".into(),
        ));
    }
    for capability in capabilities {
        if capability.access_type.is_none() {
            return Err(Error::InvalidArgument(
                "a volume capability has neither mount nor block access".into(),
            ));
        }
        match mode_of(capability) {
            None | Some(Mode::Unknown) => {
                return Err(Error::InvalidArgument(
                    "a volume capability has no access mode".into(),
                ));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

fn timestamp(snapshot: &Snapshot) -> Option<csi_proto::prost_types::Timestamp> {
    let text = snapshot.created_at.as_deref()?;
    let parsed = chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| t.naive_utc())
        .or_else(|_| chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f"))
        .ok()?;
    Some(csi_proto::prost_types::Timestamp {
        seconds: parsed.and_utc().timestamp(),
        nanos: parsed.and_utc().timestamp_subsec_nanos() as i32,
    })
}

fn csi_snapshot(snapshot: &Snapshot) -> v1::Snapshot {
    v1::Snapshot {
        size_bytes: snapshot.size.saturating_mul(GIB),
        snapshot_id: snapshot.id.clone(),
        source_volume_id: snapshot.volume_id.clone(),
        creation_time: timestamp(snapshot),
        ready_to_use: snapshot.status == "available",
        group_snapshot_id: String::new(),
    }
}

fn not_found_volume(id: &str) -> impl Fn(openstack_client::Error) -> Error + '_ {
    move |e| {
        if e.is_not_found() {
            Error::NotFound(format!("volume {id} does not exist"))
        } else {
            e.into()
        }
    }
}

fn published_nodes(volume: &Volume) -> Vec<String> {
    volume
        .attachments
        .iter()
        .map(|a| a.server_id.clone())
        .collect()
}

impl Controller {
    async fn csi_create(
        &self,
        request: v1::CreateVolumeRequest,
    ) -> Result<v1::CreateVolumeResponse> {
        let name = required("name", &request.name)?.to_string();
        check_capabilities(&request.volume_capabilities)?;
        let range = request.capacity_range.unwrap_or_default();
        let size = size_gib(range.required_bytes, range.limit_bytes)?;
        let parameters = VolumeParameters::try_from(&request.parameters)?;
        let metadata: BTreeMap<String, String> = request
            .parameters
            .iter()
            .filter(|(k, _)| k.starts_with(PROVISIONER_PREFIX))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let topology_zone = if self.settings.with_topology {
            request.accessibility_requirements.as_ref().and_then(|r| {
                r.preferred
                    .iter()
                    .chain(r.requisite.iter())
                    .find_map(|t| t.segments.get(TOPOLOGY_ZONE_KEY).cloned())
            })
        } else {
            None
        };
        let (snapshot_id, source_volume_id) = match request
            .volume_content_source
            .as_ref()
            .and_then(|s| s.r#type.as_ref())
        {
            Some(v1::volume_content_source::Type::Snapshot(s)) => (
                Some(required("snapshot_id", &s.snapshot_id)?.to_string()),
                None,
            ),
            Some(v1::volume_content_source::Type::Volume(v)) => {
                (None, Some(required("volume_id", &v.volume_id)?.to_string()))
            }
            None => (None, None),
        };
        let claim_hints = self.claim_hints(&request.parameters).await?;
        let created = self
            .create_volume_with_hints(CreateRequest {
                name,
                size_gib: size,
                parameters: parameters.clone(),
                metadata,
                topology_zone,
                snapshot_id,
                source_volume_id,
                claim_hints,
            })
            .await?;
        let mut volume = self.csi_volume(&created.volume, parameters.fs_type.as_deref());
        // As upstream: the resolved ids in the volume context.
        if let Some(hints) = &created.scheduler_hints {
            for (key, ids) in [
                ("affinity", &hints.same_host),
                ("anti-affinity", &hints.different_host),
            ] {
                if !ids.is_empty() {
                    volume.volume_context.insert(key.into(), ids.join(","));
                }
            }
        }
        Ok(v1::CreateVolumeResponse {
            volume: Some(volume),
        })
    }

    async fn csi_validate(
        &self,
        request: v1::ValidateVolumeCapabilitiesRequest,
    ) -> Result<v1::ValidateVolumeCapabilitiesResponse> {
        let id = required("volume_id", &request.volume_id)?;
        check_capabilities(&request.volume_capabilities)?;
        let volume = self.cloud.volume(id).await.map_err(not_found_volume(id))?;
        let unsupported = request
            .volume_capabilities
            .iter()
            .filter_map(mode_of)
            .find(|mode| multi_node(*mode) && !volume.multiattach);
        if let Some(mode) = unsupported {
            return Ok(v1::ValidateVolumeCapabilitiesResponse {
                confirmed: None,
                message: format!(
                    "access mode {} needs a multiattach volume type; volume {id} (type {}) is not multiattach",
                    mode.as_str_name(),
                    volume.volume_type.as_deref().unwrap_or("default")
                ),
            });
        }
        Ok(v1::ValidateVolumeCapabilitiesResponse {
            confirmed: Some(v1::validate_volume_capabilities_response::Confirmed {
                volume_context: request.volume_context,
                volume_capabilities: request.volume_capabilities,
                parameters: request.parameters,
                mutable_parameters: HashMap::new(),
            }),
            message: String::new(),
        })
    }
}

#[tonic::async_trait]
impl CsiController for Controller {
    async fn create_volume(
        &self,
        request: Request<v1::CreateVolumeRequest>,
    ) -> Result<Response<v1::CreateVolumeResponse>, Status> {
        handle("CreateVolume", request.into_inner(), |r| self.csi_create(r)).await
    }

    async fn delete_volume(
        &self,
        request: Request<v1::DeleteVolumeRequest>,
    ) -> Result<Response<v1::DeleteVolumeResponse>, Status> {
        handle("DeleteVolume", request.into_inner(), |r| async move {
            self.delete_volume(required("volume_id", &r.volume_id)?)
                .await?;
            Ok(v1::DeleteVolumeResponse {})
        })
        .await
    }

    async fn controller_publish_volume(
        &self,
        request: Request<v1::ControllerPublishVolumeRequest>,
    ) -> Result<Response<v1::ControllerPublishVolumeResponse>, Status> {
        handle(
            "ControllerPublishVolume",
            request.into_inner(),
            |r| async move {
                let volume_id = required("volume_id", &r.volume_id)?;
                let node_id = required("node_id", &r.node_id)?;
                let capability = r
                    .volume_capability
                    .as_ref()
                    .ok_or_else(|| Error::InvalidArgument("volume_capability is missing".into()))?;
                check_capabilities(std::slice::from_ref(capability))?;
                let device = self.publish(volume_id, node_id).await?;
                Ok(v1::ControllerPublishVolumeResponse {
                    publish_context: HashMap::from([("DevicePath".to_string(), device)]),
                })
            },
        )
        .await
    }

    async fn controller_unpublish_volume(
        &self,
        request: Request<v1::ControllerUnpublishVolumeRequest>,
    ) -> Result<Response<v1::ControllerUnpublishVolumeResponse>, Status> {
        handle(
            "ControllerUnpublishVolume",
            request.into_inner(),
            |r| async move {
                let volume_id = required("volume_id", &r.volume_id)?;
                if r.node_id.is_empty() {
                    return Err(Error::InvalidArgument(
                        "node_id is missing (detaching from every node is not supported)".into(),
                    ));
                }
                self.unpublish(volume_id, &r.node_id).await?;
                Ok(v1::ControllerUnpublishVolumeResponse {})
            },
        )
        .await
    }

    async fn validate_volume_capabilities(
        &self,
        request: Request<v1::ValidateVolumeCapabilitiesRequest>,
    ) -> Result<Response<v1::ValidateVolumeCapabilitiesResponse>, Status> {
        handle("ValidateVolumeCapabilities", request.into_inner(), |r| {
            self.csi_validate(r)
        })
        .await
    }

    async fn list_volumes(
        &self,
        request: Request<v1::ListVolumesRequest>,
    ) -> Result<Response<v1::ListVolumesResponse>, Status> {
        handle("ListVolumes", request.into_inner(), |r| async move {
            let volumes = self.cloud.volumes(None).await?;
            let (volumes, next_token) = page(volumes, &r.starting_token, r.max_entries)?;
            let entries = volumes
                .iter()
                .map(|v| v1::list_volumes_response::Entry {
                    volume: Some(self.csi_volume(v, None)),
                    status: Some(v1::list_volumes_response::VolumeStatus {
                        published_node_ids: published_nodes(v),
                        volume_condition: None,
                    }),
                })
                .collect();
            Ok(v1::ListVolumesResponse {
                entries,
                next_token,
            })
        })
        .await
    }

    async fn controller_get_volume(
        &self,
        request: Request<v1::ControllerGetVolumeRequest>,
    ) -> Result<Response<v1::ControllerGetVolumeResponse>, Status> {
        handle(
            "ControllerGetVolume",
            request.into_inner(),
            |r| async move {
                let id = required("volume_id", &r.volume_id)?;
                let volume = self.cloud.volume(id).await.map_err(not_found_volume(id))?;
                Ok(v1::ControllerGetVolumeResponse {
                    volume: Some(self.csi_volume(&volume, None)),
                    status: Some(v1::controller_get_volume_response::VolumeStatus {
                        published_node_ids: published_nodes(&volume),
                        volume_condition: None,
                    }),
                })
            },
        )
        .await
    }

    async fn get_capacity(
        &self,
        request: Request<v1::GetCapacityRequest>,
    ) -> Result<Response<v1::GetCapacityResponse>, Status> {
        handle("GetCapacity", request.into_inner(), |_| async {
            Err::<v1::GetCapacityResponse, _>(Error::Unimplemented(
                "GetCapacity is not supported: Cinder does not report free capacity per zone"
                    .into(),
            ))
        })
        .await
    }

    async fn controller_get_capabilities(
        &self,
        request: Request<v1::ControllerGetCapabilitiesRequest>,
    ) -> Result<Response<v1::ControllerGetCapabilitiesResponse>, Status> {
        handle(
            "ControllerGetCapabilities",
            request.into_inner(),
            |_| async {
                Ok(controller_capabilities([
                    rpc::Type::CreateDeleteVolume,
                    rpc::Type::PublishUnpublishVolume,
                    rpc::Type::CreateDeleteSnapshot,
                    rpc::Type::ListSnapshots,
                    rpc::Type::CloneVolume,
                    rpc::Type::ExpandVolume,
                    rpc::Type::ListVolumes,
                    rpc::Type::ListVolumesPublishedNodes,
                    rpc::Type::GetVolume,
                ]))
            },
        )
        .await
    }

    async fn create_snapshot(
        &self,
        request: Request<v1::CreateSnapshotRequest>,
    ) -> Result<Response<v1::CreateSnapshotResponse>, Status> {
        handle("CreateSnapshot", request.into_inner(), |r| async move {
            let name = required("name", &r.name)?;
            let volume_id = required("source_volume_id", &r.source_volume_id)?;
            // Checked before anything is created: `type = backup` is refused here.
            let parameters = SnapshotParameters::try_from(&r.parameters)?;
            if !parameters.ignored.is_empty() {
                tracing::warn!(
                    snapshot = name,
                    ignored = ?parameters.ignored,
                    "CreateSnapshot: ignoring unknown VolumeSnapshotClass parameters \
                     (known: type, force-create)"
                );
            }
            let mut metadata: BTreeMap<String, String> = r
                .parameters
                .iter()
                .filter(|(k, _)| k.starts_with(PROVISIONER_PREFIX))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            if !self.settings.cluster.is_empty() {
                metadata.insert(
                    super::CLUSTER_METADATA_KEY.into(),
                    self.settings.cluster.clone(),
                );
            }
            let snapshot = self
                .create_snapshot(name, volume_id, &metadata, parameters.force)
                .await?;
            Ok(v1::CreateSnapshotResponse {
                snapshot: Some(csi_snapshot(&snapshot)),
            })
        })
        .await
    }

    async fn delete_snapshot(
        &self,
        request: Request<v1::DeleteSnapshotRequest>,
    ) -> Result<Response<v1::DeleteSnapshotResponse>, Status> {
        handle("DeleteSnapshot", request.into_inner(), |r| async move {
            self.delete_snapshot(required("snapshot_id", &r.snapshot_id)?)
                .await?;
            Ok(v1::DeleteSnapshotResponse {})
        })
        .await
    }

    async fn list_snapshots(
        &self,
        request: Request<v1::ListSnapshotsRequest>,
    ) -> Result<Response<v1::ListSnapshotsResponse>, Status> {
        handle("ListSnapshots", request.into_inner(), |r| async move {
            let snapshots = if !r.snapshot_id.is_empty() {
                match self.cloud.snapshot(&r.snapshot_id).await {
                    Ok(s) => vec![s],
                    Err(e) if e.is_not_found() => Vec::new(),
                    Err(e) => return Err(e.into()),
                }
                .into_iter()
                .filter(|s| r.source_volume_id.is_empty() || s.volume_id == r.source_volume_id)
                .collect()
            } else {
                let volume = Some(r.source_volume_id.as_str()).filter(|v| !v.is_empty());
                self.cloud.snapshots(None, volume).await?
            };
            let (snapshots, next_token) = page(snapshots, &r.starting_token, r.max_entries)?;
            Ok(v1::ListSnapshotsResponse {
                entries: snapshots
                    .iter()
                    .map(|s| v1::list_snapshots_response::Entry {
                        snapshot: Some(csi_snapshot(s)),
                    })
                    .collect(),
                next_token,
            })
        })
        .await
    }

    async fn controller_expand_volume(
        &self,
        request: Request<v1::ControllerExpandVolumeRequest>,
    ) -> Result<Response<v1::ControllerExpandVolumeResponse>, Status> {
        handle(
            "ControllerExpandVolume",
            request.into_inner(),
            |r| async move {
                let id = required("volume_id", &r.volume_id)?;
                let range = r
                    .capacity_range
                    .ok_or_else(|| Error::InvalidArgument("capacity_range is missing".into()))?;
                let size = size_gib(range.required_bytes, range.limit_bytes)?;
                let grown = self.expand(id, size).await?;
                let block = matches!(
                    r.volume_capability
                        .as_ref()
                        .and_then(|c| c.access_type.as_ref()),
                    Some(v1::volume_capability::AccessType::Block(_))
                );
                Ok(v1::ControllerExpandVolumeResponse {
                    capacity_bytes: grown.saturating_mul(GIB),
                    node_expansion_required: !block,
                })
            },
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use v1::volume_capability::{AccessMode, AccessType, MountVolume};

    fn capability(mode: Mode) -> VolumeCapability {
        VolumeCapability {
            access_type: Some(AccessType::Mount(MountVolume::default())),
            access_mode: Some(AccessMode { mode: mode as i32 }),
        }
    }

    #[test]
    fn capabilities_need_a_type_and_a_mode() {
        assert!(check_capabilities(&[]).is_err());
        assert!(check_capabilities(&[capability(Mode::SingleNodeWriter)]).is_ok());
        let mut no_type = capability(Mode::SingleNodeWriter);
        no_type.access_type = None;
        assert!(check_capabilities(&[no_type]).is_err());
        assert!(check_capabilities(&[capability(Mode::Unknown)]).is_err());
    }

    #[test]
    fn multi_node_modes_are_told_apart() {
        assert!(multi_node(Mode::MultiNodeMultiWriter));
        assert!(!multi_node(Mode::SingleNodeMultiWriter));
    }

    #[test]
    fn snapshot_times_parse_with_and_without_zone() {
        let mut snapshot = Snapshot {
            created_at: Some("2026-11-25T13:00:00.000000".into()),
            ..Snapshot::default()
        };
        assert_eq!(timestamp(&snapshot).map(|t| t.seconds), Some(1_795_611_600));
        snapshot.created_at = Some("2026-11-25T13:00:00Z".into());
        assert_eq!(timestamp(&snapshot).map(|t| t.seconds), Some(1_795_611_600));
    }
}
