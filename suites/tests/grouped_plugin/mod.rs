//! An in-process plugin with the GroupController service and MODIFY_VOLUME, for csi-sanity's volume attribute class, group snapshot and ListVolumes cases, and a run of the suite against it.

use csi_proto::v1::controller_server::{Controller, ControllerServer};
use csi_proto::v1::{self, controller_service_capability};
use csi_proto::{Endpoint, Listener};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use suites::sanity::{self, SanityConfig};
use testkit::task::InProcess;
use tonic::{Request, Response, Status};

/// A plugin with the GroupController service and MODIFY_VOLUME, for csi-sanity's volume
/// attribute class and group snapshot cases; `buggy` breaks each case once, `group_caps`
/// says whether CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT is advertised.
#[derive(Clone, Default)]
pub struct Grouped {
    pub buggy: bool,
    pub group_caps: bool,
    pub volumes: Arc<Mutex<BTreeSet<String>>>,
    pub groups: Arc<Mutex<BTreeSet<String>>>,
    /// Bug for the ListVolumes cases: deleted volumes stay listed.
    pub stale_list: bool,
    pub ghosts: Arc<Mutex<BTreeSet<String>>>,
}

#[tonic::async_trait]
impl csi_proto::v1::identity_server::Identity for Grouped {
    async fn get_plugin_info(
        &self,
        _: Request<v1::GetPluginInfoRequest>,
    ) -> Result<Response<v1::GetPluginInfoResponse>, Status> {
        Ok(Response::new(v1::GetPluginInfoResponse {
            name: "grouped.example.com".into(),
            vendor_version: "0.0.1".into(),
            manifest: Default::default(),
        }))
    }
    async fn get_plugin_capabilities(
        &self,
        _: Request<v1::GetPluginCapabilitiesRequest>,
    ) -> Result<Response<v1::GetPluginCapabilitiesResponse>, Status> {
        use v1::plugin_capability::{self, service};
        let service = |kind: service::Type| v1::PluginCapability {
            r#type: Some(plugin_capability::Type::Service(
                plugin_capability::Service {
                    r#type: kind as i32,
                },
            )),
        };
        Ok(Response::new(v1::GetPluginCapabilitiesResponse {
            capabilities: vec![
                service(service::Type::ControllerService),
                service(service::Type::GroupControllerService),
            ],
        }))
    }
    async fn probe(
        &self,
        _: Request<v1::ProbeRequest>,
    ) -> Result<Response<v1::ProbeResponse>, Status> {
        Ok(Response::new(v1::ProbeResponse { ready: Some(true) }))
    }
}

#[tonic::async_trait]
impl Controller for Grouped {
    async fn controller_get_capabilities(
        &self,
        _: Request<v1::ControllerGetCapabilitiesRequest>,
    ) -> Result<Response<v1::ControllerGetCapabilitiesResponse>, Status> {
        use controller_service_capability::rpc::Type;
        let rpc = |kind: Type| v1::ControllerServiceCapability {
            r#type: Some(controller_service_capability::Type::Rpc(
                controller_service_capability::Rpc {
                    r#type: kind as i32,
                },
            )),
        };
        Ok(Response::new(v1::ControllerGetCapabilitiesResponse {
            capabilities: vec![
                rpc(Type::CreateDeleteVolume),
                rpc(Type::ModifyVolume),
                rpc(Type::ListVolumes),
            ],
        }))
    }
    /// Mutable parameters other than `iops` are refused (bug: accepted).
    async fn create_volume(
        &self,
        request: Request<v1::CreateVolumeRequest>,
    ) -> Result<Response<v1::CreateVolumeResponse>, Status> {
        let request = request.into_inner();
        if request.name.is_empty() || request.volume_capabilities.is_empty() {
            return Err(Status::invalid_argument("name and capabilities required"));
        }
        if !self.buggy && request.mutable_parameters.keys().any(|k| k != "iops") {
            return Err(Status::invalid_argument("unknown mutable parameter"));
        }
        let id = format!("vol-{}", request.name);
        self.volumes.lock().unwrap().insert(id.clone());
        Ok(Response::new(v1::CreateVolumeResponse {
            volume: Some(v1::Volume {
                volume_id: id,
                capacity_bytes: request
                    .capacity_range
                    .map(|c| c.required_bytes)
                    .unwrap_or_default(),
                ..Default::default()
            }),
        }))
    }
    async fn delete_volume(
        &self,
        request: Request<v1::DeleteVolumeRequest>,
    ) -> Result<Response<v1::DeleteVolumeResponse>, Status> {
        let id = request.into_inner().volume_id;
        if id.is_empty() {
            return Err(Status::invalid_argument("volume_id required"));
        }
        if self.volumes.lock().unwrap().remove(&id) && self.stale_list {
            self.ghosts.lock().unwrap().insert(id);
        }
        Ok(Response::new(v1::DeleteVolumeResponse {}))
    }
    /// Tokens are indexes into the sorted volume ids.
    async fn list_volumes(
        &self,
        request: Request<v1::ListVolumesRequest>,
    ) -> Result<Response<v1::ListVolumesResponse>, Status> {
        let request = request.into_inner();
        let mut ids: Vec<String> = self.volumes.lock().unwrap().iter().cloned().collect();
        ids.extend(self.ghosts.lock().unwrap().iter().cloned());
        ids.sort();
        let start: usize = if request.starting_token.is_empty() {
            0
        } else {
            request
                .starting_token
                .parse()
                .map_err(|_| Status::aborted("invalid starting_token"))?
        };
        let end = match request.max_entries {
            0 => ids.len(),
            n => (start + n as usize).min(ids.len()),
        };
        let entries = ids
            .get(start..end)
            .unwrap_or_default()
            .iter()
            .map(|id| v1::list_volumes_response::Entry {
                volume: Some(v1::Volume {
                    volume_id: id.clone(),
                    ..Default::default()
                }),
                status: None,
            })
            .collect();
        let next_token = if end < ids.len() {
            end.to_string()
        } else {
            String::new()
        };
        Ok(Response::new(v1::ListVolumesResponse {
            entries,
            next_token,
        }))
    }
}

#[tonic::async_trait]
impl csi_proto::v1::group_controller_server::GroupController for Grouped {
    async fn group_controller_get_capabilities(
        &self,
        _: Request<v1::GroupControllerGetCapabilitiesRequest>,
    ) -> Result<Response<v1::GroupControllerGetCapabilitiesResponse>, Status> {
        use v1::group_controller_service_capability::{Rpc, Type, rpc};
        let capabilities = if self.group_caps {
            vec![v1::GroupControllerServiceCapability {
                r#type: Some(Type::Rpc(Rpc {
                    r#type: rpc::Type::CreateDeleteGetVolumeGroupSnapshot as i32,
                })),
            }]
        } else {
            Vec::new()
        };
        Ok(Response::new(v1::GroupControllerGetCapabilitiesResponse {
            capabilities,
        }))
    }
    /// Bug: a group snapshot without a name is made.
    async fn create_volume_group_snapshot(
        &self,
        request: Request<v1::CreateVolumeGroupSnapshotRequest>,
    ) -> Result<Response<v1::CreateVolumeGroupSnapshotResponse>, Status> {
        let request = request.into_inner();
        if request.name.is_empty() && !self.buggy {
            return Err(Status::invalid_argument("name required"));
        }
        let id = format!("group-{}", request.name);
        self.groups.lock().unwrap().insert(id.clone());
        Ok(Response::new(v1::CreateVolumeGroupSnapshotResponse {
            group_snapshot: Some(v1::VolumeGroupSnapshot {
                group_snapshot_id: id,
                ready_to_use: true,
                ..Default::default()
            }),
        }))
    }
    /// Bug: an unknown group snapshot is NotFound.
    async fn delete_volume_group_snapshot(
        &self,
        request: Request<v1::DeleteVolumeGroupSnapshotRequest>,
    ) -> Result<Response<v1::DeleteVolumeGroupSnapshotResponse>, Status> {
        let id = request.into_inner().group_snapshot_id;
        if id.is_empty() {
            return Err(Status::invalid_argument("group_snapshot_id required"));
        }
        if !self.groups.lock().unwrap().remove(&id) && self.buggy {
            return Err(Status::not_found(id));
        }
        Ok(Response::new(v1::DeleteVolumeGroupSnapshotResponse {}))
    }
    async fn get_volume_group_snapshot(
        &self,
        request: Request<v1::GetVolumeGroupSnapshotRequest>,
    ) -> Result<Response<v1::GetVolumeGroupSnapshotResponse>, Status> {
        let id = request.into_inner().group_snapshot_id;
        if id.is_empty() {
            return Err(Status::invalid_argument("group_snapshot_id required"));
        }
        Err(Status::not_found(id))
    }
}

pub async fn run_grouped(plugin: &Grouped, focus: &[&str]) -> sanity::Report {
    let dir = tempfile::Builder::new()
        .prefix("sanity-grouped-")
        .tempdir()
        .unwrap();
    let endpoint = Endpoint::Unix(dir.path().join("grouped.sock"));
    let listener = Listener::bind(&endpoint).await.unwrap();
    let router = tonic::transport::Server::builder()
        .add_service(csi_proto::v1::identity_server::IdentityServer::new(
            plugin.clone(),
        ))
        .add_service(ControllerServer::new(plugin.clone()))
        .add_service(
            csi_proto::v1::group_controller_server::GroupControllerServer::new(plugin.clone()),
        );
    let server = InProcess::spawn(|stopped| csi_proto::serve(router, listener, stopped));
    let mut config = SanityConfig::new(endpoint);
    config.mount_dir = dir.path().join("mnt");
    config.staging_dir = dir.path().join("staging");
    config.test_volume_mutable_parameters = [("iops".to_owned(), "3000".to_owned())].into();
    config.filter.focus = focus
        .iter()
        .map(|f| regex::Regex::new(f).unwrap())
        .collect();
    let report = sanity::run(config).await.unwrap();
    server.stop().await.unwrap();
    report
}

pub const GROUP_AND_CLASSES: &[&str] =
    &["GroupController", "CreateVolume .*volume attribute class"];
