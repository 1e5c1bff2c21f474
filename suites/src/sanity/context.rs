//! The connections and advertised capabilities of a run ([`Session`]) and what one case
//! works with ([`CaseContext`]): clients, request builders, unique names, and the record of
//! every volume, snapshot, stage and publish it made so the runner can undo them.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use csi_proto::v1::controller_client::ControllerClient;
use csi_proto::v1::identity_client::IdentityClient;
use csi_proto::v1::node_client::NodeClient;
use csi_proto::v1::plugin_capability::{self, service};
use csi_proto::v1::volume_capability::access_mode::Mode;
use csi_proto::v1::volume_capability::{AccessMode, BlockVolume, MountVolume};
use csi_proto::v1::{
    self, CapacityRange, PluginCapability, VolumeCapability, controller_service_capability,
    node_service_capability,
};
use tonic::transport::Channel;
use tonic::{Code, Status};

use super::case::{CaseResult, Verdict, describe_status};
use super::config::{AccessType, SanityConfig};
use super::error::{Error, Result};

/// A controller RPC capability.
pub type ControllerCap = controller_service_capability::rpc::Type;
/// A node RPC capability.
pub type NodeCap = node_service_capability::rpc::Type;

/// Whether a service is there, and what it advertises.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Service<T> {
    /// Served, with these RPC capabilities.
    Available(Vec<T>),
    /// Not offered by the plugin (its cases are skipped with this reason).
    Absent(String),
    /// Offered but its GetCapabilities failed (its cases fail with this).
    Broken(String),
}

impl<T: PartialEq> Service<T> {
    fn has(&self, capability: &T) -> bool {
        matches!(self, Service::Available(caps) if caps.contains(capability))
    }
}

/// Connections and capabilities, fetched once per run.
#[derive(Debug)]
pub struct Session {
    pub(crate) config: SanityConfig,
    node_channel: Channel,
    controller_channel: Channel,
    /// Plugin capabilities advertised on the (node) endpoint.
    pub plugin_capabilities: Vec<PluginCapability>,
    /// The Controller service.
    pub controller: Service<ControllerCap>,
    /// The Node service.
    pub node: Service<NodeCap>,
    /// Appended to every name the run gives (volumes, snapshots), like csi-sanity's.
    pub suffix: String,
}

fn endpoint_error(endpoint: &csi_proto::Endpoint, reason: String) -> Error {
    Error::Endpoint {
        endpoint: endpoint.to_string(),
        reason,
    }
}

fn advertises_controller(capabilities: &[PluginCapability]) -> bool {
    capabilities.iter().any(|c| {
        matches!(&c.r#type, Some(plugin_capability::Type::Service(s))
            if s.r#type == service::Type::ControllerService as i32)
    })
}

impl Session {
    /// Connects to the endpoint(s) and asks for their capabilities. Fails only when the
    /// endpoint cannot be reached or its Identity service does not answer.
    pub async fn connect(config: SanityConfig) -> Result<Self> {
        config.validate()?;
        let node_channel = csi_proto::connect(&config.endpoint)
            .await
            .map_err(|e| endpoint_error(&config.endpoint, e.to_string()))?;
        let controller_channel = match &config.controller_endpoint {
            None => node_channel.clone(),
            Some(endpoint) => csi_proto::connect(endpoint)
                .await
                .map_err(|e| endpoint_error(endpoint, e.to_string()))?,
        };
        let plugin_capabilities = IdentityClient::new(node_channel.clone())
            .get_plugin_capabilities(v1::GetPluginCapabilitiesRequest {})
            .await
            .map_err(|s| {
                endpoint_error(
                    &config.endpoint,
                    format!("GetPluginCapabilities failed: {}", describe_status(&s)),
                )
            })?
            .into_inner()
            .capabilities;
        let controller_offered = match &config.controller_endpoint {
            Some(_) => true,
            None => advertises_controller(&plugin_capabilities),
        };
        let controller = if controller_offered {
            match ControllerClient::new(controller_channel.clone())
                .controller_get_capabilities(v1::ControllerGetCapabilitiesRequest {})
                .await
            {
                Ok(response) => Service::Available(
                    response
                        .into_inner()
                        .capabilities
                        .iter()
                        .filter_map(|c| match &c.r#type {
                            Some(controller_service_capability::Type::Rpc(rpc)) => {
                                ControllerCap::try_from(rpc.r#type).ok()
                            }
                            None => None,
                        })
                        .collect(),
                ),
                Err(status) => Service::Broken(format!(
                    "ControllerGetCapabilities failed: {}",
                    describe_status(&status)
                )),
            }
        } else {
            Service::Absent(
                "the plugin does not advertise CONTROLLER_SERVICE and no controller endpoint was given"
                    .into(),
            )
        };
        let node = match NodeClient::new(node_channel.clone())
            .node_get_capabilities(v1::NodeGetCapabilitiesRequest {})
            .await
        {
            Ok(response) => Service::Available(
                response
                    .into_inner()
                    .capabilities
                    .iter()
                    .filter_map(|c| match &c.r#type {
                        Some(node_service_capability::Type::Rpc(rpc)) => {
                            NodeCap::try_from(rpc.r#type).ok()
                        }
                        None => None,
                    })
                    .collect(),
            ),
            Err(status) if status.code() == Code::Unimplemented => Service::Absent(format!(
                "the endpoint has no Node service (NodeGetCapabilities: {})",
                status.message()
            )),
            Err(status) => Service::Broken(format!(
                "NodeGetCapabilities failed: {}",
                describe_status(&status)
            )),
        };
        let random = uuid::Uuid::new_v4().simple().to_string().to_uppercase();
        Ok(Session {
            suffix: format!("-{}-{}", &random[..8], &random[8..16]),
            config,
            node_channel,
            controller_channel,
            plugin_capabilities,
            controller,
            node,
        })
    }

    /// The run's configuration.
    pub fn config(&self) -> &SanityConfig {
        &self.config
    }

    /// True when the plugin advertises the plugin service capability `kind`.
    pub fn has_plugin_service(&self, kind: service::Type) -> bool {
        self.plugin_capabilities.iter().any(|c| {
            matches!(&c.r#type, Some(plugin_capability::Type::Service(s)) if s.r#type == kind as i32)
        })
    }
}

/// Something a case made that must be undone.
#[derive(Debug, Clone)]
enum Made {
    Volume {
        id: String,
        staged_at: Option<String>,
        published_at: Vec<String>,
        published_to: Vec<String>,
    },
    Snapshot {
        id: String,
    },
}

/// A call that may have made something and whose answer never came: the case was
/// interrupted (Ctrl-C) or timed out while it ran. Cleanup repeats creates (they are
/// idempotent by name) to learn what they made, and reverses stages and publishes.
#[derive(Debug, Clone)]
enum InFlight {
    CreateVolume(v1::CreateVolumeRequest),
    CreateSnapshot(v1::CreateSnapshotRequest),
    NodeStage { volume_id: String, path: String },
    NodePublish { volume_id: String, path: String },
}

/// How long cleanup keeps repeating an interrupted create the plugin is still busy with
/// (`Aborted`, `Unavailable`, `DeadlineExceeded`).
const REPEAT_TIMEOUT: Duration = Duration::from_secs(60);

/// What one case works with.
#[derive(Debug)]
pub struct CaseContext {
    session: Arc<Session>,
    made: Vec<Made>,
    /// Calls started and not answered yet, by a number of their own.
    in_flight: Vec<(u64, InFlight)>,
    calls: u64,
    /// Paths made for this case (removed after it).
    pub(crate) made_paths: Vec<super::paths::MadePath>,
    /// This case's mount directory (the configured one, or what the create command gave).
    pub(crate) mount_dir: PathBuf,
    /// This case's staging path (the configured one, or what the create command gave).
    pub(crate) staging_dir: PathBuf,
}

impl CaseContext {
    pub(crate) fn new(session: Arc<Session>) -> Self {
        CaseContext {
            made: Vec::new(),
            in_flight: Vec::new(),
            calls: 0,
            made_paths: Vec::new(),
            mount_dir: session.config.mount_dir.clone(),
            staging_dir: session.config.staging_dir.clone(),
            session,
        }
    }

    /// Records `call` as started; [`CaseContext::answered`] forgets it. One that stays
    /// recorded was cut off and is undone by cleanup.
    fn started(&mut self, call: InFlight) -> u64 {
        self.calls += 1;
        self.in_flight.push((self.calls, call));
        self.calls
    }

    fn answered(&mut self, call: u64) {
        self.in_flight.retain(|(n, _)| *n != call);
    }

    /// The run's configuration.
    pub fn config(&self) -> &SanityConfig {
        &self.session.config
    }

    /// The session (capabilities).
    pub fn session(&self) -> &Session {
        &self.session
    }

    // ---- capabilities -------------------------------------------------------------

    /// The controller capabilities; skips when there is no Controller service and fails
    /// when it could not be asked.
    pub fn controller_caps(&self) -> CaseResult<&[ControllerCap]> {
        match &self.session.controller {
            Service::Available(caps) => Ok(caps),
            Service::Absent(reason) => Err(Verdict::Skip(reason.clone())),
            Service::Broken(error) => Err(Verdict::Fail(error.clone())),
        }
    }

    /// Skips with `reason` unless the controller advertises `capability`.
    pub fn require_controller(&self, capability: ControllerCap, reason: &str) -> CaseResult {
        if self.controller_caps()?.contains(&capability) {
            Ok(())
        } else {
            Err(Verdict::Skip(format!(
                "{reason}: the controller does not advertise {}",
                capability.as_str_name()
            )))
        }
    }

    /// Whether the controller advertises `capability` (false without a controller).
    pub fn has_controller(&self, capability: ControllerCap) -> bool {
        self.session.controller.has(&capability)
    }

    /// The node capabilities; skips when there is no Node service.
    pub fn node_caps(&self) -> CaseResult<&[NodeCap]> {
        match &self.session.node {
            Service::Available(caps) => Ok(caps),
            Service::Absent(reason) => Err(Verdict::Skip(reason.clone())),
            Service::Broken(error) => Err(Verdict::Fail(error.clone())),
        }
    }

    /// Skips with `reason` unless the node advertises `capability`.
    pub fn require_node(&self, capability: NodeCap, reason: &str) -> CaseResult {
        if self.node_caps()?.contains(&capability) {
            Ok(())
        } else {
            Err(Verdict::Skip(format!(
                "{reason}: the node does not advertise {}",
                capability.as_str_name()
            )))
        }
    }

    /// Whether the node advertises `capability`.
    pub fn has_node(&self, capability: NodeCap) -> bool {
        self.session.node.has(&capability)
    }

    /// Skips cases that need to provision a volume when the plugin cannot.
    pub fn require_provisioning(&self) -> CaseResult {
        self.require_controller(
            ControllerCap::CreateDeleteVolume,
            "needs a volume and the plugin cannot create one",
        )
    }

    // ---- clients ------------------------------------------------------------------

    /// A Controller client (controller endpoint).
    pub fn controller(&self) -> ControllerClient<Channel> {
        ControllerClient::new(self.session.controller_channel.clone())
    }

    /// A GroupController client (controller endpoint, as csi-sanity).
    pub fn group_controller(
        &self,
    ) -> csi_proto::v1::group_controller_client::GroupControllerClient<Channel> {
        csi_proto::v1::group_controller_client::GroupControllerClient::new(
            self.session.controller_channel.clone(),
        )
    }

    /// A Node client.
    pub fn node(&self) -> NodeClient<Channel> {
        NodeClient::new(self.session.node_channel.clone())
    }

    /// Identity clients of every endpoint, labelled.
    pub fn identities(&self) -> Vec<(&'static str, IdentityClient<Channel>)> {
        let mut clients = vec![(
            "node",
            IdentityClient::new(self.session.node_channel.clone()),
        )];
        if self.session.config.controller_endpoint.is_some() {
            clients.push((
                "controller",
                IdentityClient::new(self.session.controller_channel.clone()),
            ));
        }
        clients
    }

    // ---- names, paths and requests ------------------------------------------------

    /// `prefix` plus the run's unique suffix.
    pub fn unique(&self, prefix: &str) -> String {
        format!("{prefix}{}", self.session.suffix)
    }

    /// A unique name of exactly `length` characters starting with `prefix`.
    pub fn unique_with_length(&self, prefix: &str, length: usize) -> String {
        let mut name = self.unique(prefix);
        while name.len() < length {
            name.push_str(&uuid::Uuid::new_v4().simple().to_string());
        }
        name.truncate(length);
        name
    }

    /// A volume id that is well formed (a UUID) but names no volume.
    pub fn unknown_volume_id(&self) -> String {
        uuid::Uuid::new_v4().to_string()
    }

    /// A node id that names no node.
    pub fn unknown_node_id(&self) -> String {
        self.unique("fake-node-id")
    }

    /// NodePublishVolume's target path: `<mountdir>/target` (with a create command,
    /// `<the path it printed>/target`).
    pub fn target_path(&self) -> String {
        self.mount_dir.join("target").display().to_string()
    }

    /// This case's mount directory: `--csi.mountdir`, or the path the create command
    /// printed.
    pub fn mount_dir(&self) -> &Path {
        &self.mount_dir
    }

    /// NodeStageVolume's staging target path: `--csi.stagingdir`, or the path the create
    /// command printed.
    pub fn staging_path(&self) -> String {
        self.staging_dir.display().to_string()
    }

    /// What is at `path`: by `--csi.checkpathcmd` when given, else looked up here.
    pub async fn path_kind(&self, path: &Path) -> Result<super::PathKind, String> {
        super::paths::path_kind(path, &self.config().path_commands).await
    }

    /// A capability with `mode` and the configured access type.
    pub fn capability(&self, mode: Mode) -> VolumeCapability {
        let access_type = match self.config().test_volume_access_type {
            AccessType::Mount => v1::volume_capability::AccessType::Mount(MountVolume::default()),
            AccessType::Block => v1::volume_capability::AccessType::Block(BlockVolume {}),
        };
        VolumeCapability {
            access_mode: Some(AccessMode { mode: mode as i32 }),
            access_type: Some(access_type),
        }
    }

    /// The usual single-node-writer capability.
    pub fn writer(&self) -> VolumeCapability {
        self.capability(Mode::SingleNodeWriter)
    }

    /// CreateVolume for `name` with the test size as required bytes only.
    pub fn create_request(&self, name: &str) -> v1::CreateVolumeRequest {
        v1::CreateVolumeRequest {
            name: name.to_owned(),
            volume_capabilities: vec![self.writer()],
            capacity_range: Some(CapacityRange {
                required_bytes: self.config().test_volume_size,
                limit_bytes: 0,
            }),
            secrets: self.config().secrets.create_volume_secret.clone(),
            parameters: self.config().test_volume_parameters.clone(),
            ..Default::default()
        }
    }

    /// CreateVolume for `name` with required = limit = the test size.
    pub fn create_request_exact(&self, name: &str) -> v1::CreateVolumeRequest {
        let mut request = self.create_request(name);
        request.capacity_range = Some(CapacityRange {
            required_bytes: self.config().test_volume_size,
            limit_bytes: self.config().test_volume_size,
        });
        request
    }

    /// CreateSnapshot of `source` named `name`.
    pub fn snapshot_request(&self, name: &str, source: &str) -> v1::CreateSnapshotRequest {
        v1::CreateSnapshotRequest {
            name: name.to_owned(),
            source_volume_id: source.to_owned(),
            secrets: self.config().secrets.create_snapshot_secret.clone(),
            parameters: self.config().test_snapshot_parameters.clone(),
        }
    }

    // ---- tracked calls --------------------------------------------------------------

    fn volume_mut(&mut self, id: &str) -> Option<&mut Made> {
        self.made
            .iter_mut()
            .find(|m| matches!(m, Made::Volume { id: v, .. } if v == id))
    }

    fn track_volume(&mut self, id: &str) {
        if !id.is_empty() && self.volume_mut(id).is_none() {
            self.made.push(Made::Volume {
                id: id.to_owned(),
                staged_at: None,
                published_at: Vec::new(),
                published_to: Vec::new(),
            });
        }
    }

    /// CreateVolume; a returned volume is recorded for cleanup.
    pub async fn create_volume(
        &mut self,
        request: v1::CreateVolumeRequest,
    ) -> std::result::Result<v1::Volume, Status> {
        let call = self.started(InFlight::CreateVolume(request.clone()));
        let response = self.controller().create_volume(request).await;
        self.answered(call);
        let volume = response?.into_inner().volume.unwrap_or_default();
        self.track_volume(&volume.volume_id);
        Ok(volume)
    }

    /// CreateVolume that must succeed with a volume id.
    pub async fn must_create_volume(
        &mut self,
        request: v1::CreateVolumeRequest,
    ) -> CaseResult<v1::Volume> {
        let name = request.name.clone();
        let volume = self.create_volume(request).await.map_err(|s| {
            Verdict::Fail(format!(
                "CreateVolume {name:?} failed: {}",
                describe_status(&s)
            ))
        })?;
        if volume.volume_id.is_empty() {
            return Err(Verdict::Fail(format!(
                "CreateVolume {name:?} returned no volume id"
            )));
        }
        Ok(volume)
    }

    /// DeleteVolume; on success the volume is no longer cleaned up.
    pub async fn delete_volume(&mut self, volume_id: &str) -> std::result::Result<(), Status> {
        let request = v1::DeleteVolumeRequest {
            volume_id: volume_id.to_owned(),
            secrets: self.config().secrets.delete_volume_secret.clone(),
        };
        self.controller().delete_volume(request).await?;
        self.made
            .retain(|m| !matches!(m, Made::Volume { id, .. } if id == volume_id));
        Ok(())
    }

    /// CreateSnapshot; a returned snapshot is recorded for cleanup.
    pub async fn create_snapshot(
        &mut self,
        request: v1::CreateSnapshotRequest,
    ) -> std::result::Result<v1::Snapshot, Status> {
        let call = self.started(InFlight::CreateSnapshot(request.clone()));
        let response = self.controller().create_snapshot(request).await;
        self.answered(call);
        let snapshot = response?.into_inner().snapshot.unwrap_or_default();
        self.track_snapshot(&snapshot.snapshot_id);
        Ok(snapshot)
    }

    fn track_snapshot(&mut self, id: &str) {
        let known = self
            .made
            .iter()
            .any(|m| matches!(m, Made::Snapshot { id: s } if s == id));
        if !id.is_empty() && !known {
            self.made.push(Made::Snapshot { id: id.to_owned() });
        }
    }

    /// CreateSnapshot that must succeed with a well-formed snapshot.
    pub async fn must_create_snapshot(
        &mut self,
        request: v1::CreateSnapshotRequest,
    ) -> CaseResult<v1::Snapshot> {
        let name = request.name.clone();
        let snapshot = self.create_snapshot(request).await.map_err(|s| {
            Verdict::Fail(format!(
                "CreateSnapshot {name:?} failed: {}",
                describe_status(&s)
            ))
        })?;
        verify_snapshot(&snapshot, &format!("CreateSnapshot {name:?}"))?;
        Ok(snapshot)
    }

    /// Repeats CreateSnapshot (idempotent) until the snapshot is ready to use, with a
    /// growing interval, up to the configured timeout.
    pub async fn create_ready_snapshot(
        &mut self,
        request: v1::CreateSnapshotRequest,
    ) -> CaseResult<v1::Snapshot> {
        let deadline = tokio::time::Instant::now() + self.config().snapshot_ready_timeout;
        let mut interval = Duration::from_millis(20);
        loop {
            let snapshot = self.must_create_snapshot(request.clone()).await?;
            if snapshot.ready_to_use {
                return Ok(snapshot);
            }
            if tokio::time::Instant::now() + interval > deadline {
                return Err(Verdict::Fail(format!(
                    "snapshot {} ({:?}) not ready to use after {:?}",
                    snapshot.snapshot_id,
                    request.name,
                    self.config().snapshot_ready_timeout
                )));
            }
            tokio::time::sleep(interval).await;
            interval = (interval * 2).min(Duration::from_secs(2));
        }
    }

    /// Creates a volume then a snapshot of it (ListSnapshots cases).
    pub async fn snapshot_of_new_volume(
        &mut self,
        volume_name: &str,
        snapshot_name: &str,
    ) -> CaseResult<(v1::Volume, v1::Snapshot)> {
        let volume = self
            .must_create_volume(self.create_request_exact(volume_name))
            .await?;
        let snapshot = self
            .must_create_snapshot(self.snapshot_request(snapshot_name, &volume.volume_id))
            .await?;
        Ok((volume, snapshot))
    }

    /// DeleteSnapshot; on success the snapshot is no longer cleaned up.
    pub async fn delete_snapshot(&mut self, snapshot_id: &str) -> std::result::Result<(), Status> {
        let request = v1::DeleteSnapshotRequest {
            snapshot_id: snapshot_id.to_owned(),
            secrets: self.config().secrets.delete_snapshot_secret.clone(),
        };
        self.controller().delete_snapshot(request).await?;
        self.made
            .retain(|m| !matches!(m, Made::Snapshot { id } if id == snapshot_id));
        Ok(())
    }

    /// ControllerPublishVolume; a success is undone by cleanup.
    pub async fn controller_publish(
        &mut self,
        request: v1::ControllerPublishVolumeRequest,
    ) -> std::result::Result<v1::ControllerPublishVolumeResponse, Status> {
        let (volume_id, node_id) = (request.volume_id.clone(), request.node_id.clone());
        let response = self
            .controller()
            .controller_publish_volume(request)
            .await?
            .into_inner();
        if let Some(Made::Volume { published_to, .. }) = self.volume_mut(&volume_id)
            && !published_to.contains(&node_id)
        {
            published_to.push(node_id);
        }
        Ok(response)
    }

    /// ControllerUnpublishVolume; forgets the publication on success.
    pub async fn controller_unpublish(
        &mut self,
        volume_id: &str,
        node_id: &str,
    ) -> std::result::Result<(), Status> {
        let request = v1::ControllerUnpublishVolumeRequest {
            volume_id: volume_id.to_owned(),
            node_id: node_id.to_owned(),
            secrets: self
                .config()
                .secrets
                .controller_unpublish_volume_secret
                .clone(),
        };
        self.controller()
            .controller_unpublish_volume(request)
            .await?;
        if let Some(Made::Volume { published_to, .. }) = self.volume_mut(volume_id) {
            published_to.retain(|n| n != node_id);
        }
        Ok(())
    }

    /// NodeStageVolume; a success is undone by cleanup.
    pub async fn node_stage(
        &mut self,
        request: v1::NodeStageVolumeRequest,
    ) -> std::result::Result<(), Status> {
        let (volume_id, path) = (
            request.volume_id.clone(),
            request.staging_target_path.clone(),
        );
        let call = self.started(InFlight::NodeStage {
            volume_id: volume_id.clone(),
            path: path.clone(),
        });
        let response = self.node().node_stage_volume(request).await;
        self.answered(call);
        response?;
        if let Some(Made::Volume { staged_at, .. }) = self.volume_mut(&volume_id) {
            *staged_at = Some(path);
        }
        Ok(())
    }

    /// NodeUnstageVolume; forgets the stage on success.
    pub async fn node_unstage(
        &mut self,
        volume_id: &str,
        path: &str,
    ) -> std::result::Result<(), Status> {
        let request = v1::NodeUnstageVolumeRequest {
            volume_id: volume_id.to_owned(),
            staging_target_path: path.to_owned(),
        };
        self.node().node_unstage_volume(request).await?;
        if let Some(Made::Volume { staged_at, .. }) = self.volume_mut(volume_id) {
            *staged_at = None;
        }
        Ok(())
    }

    /// NodePublishVolume; a success is undone by cleanup.
    pub async fn node_publish(
        &mut self,
        request: v1::NodePublishVolumeRequest,
    ) -> std::result::Result<(), Status> {
        let (volume_id, path) = (request.volume_id.clone(), request.target_path.clone());
        let call = self.started(InFlight::NodePublish {
            volume_id: volume_id.clone(),
            path: path.clone(),
        });
        let response = self.node().node_publish_volume(request).await;
        self.answered(call);
        response?;
        if let Some(Made::Volume { published_at, .. }) = self.volume_mut(&volume_id)
            && !published_at.contains(&path)
        {
            published_at.push(path);
        }
        Ok(())
    }

    /// NodeUnpublishVolume; forgets the publication on success.
    pub async fn node_unpublish(
        &mut self,
        volume_id: &str,
        path: &str,
    ) -> std::result::Result<(), Status> {
        let request = v1::NodeUnpublishVolumeRequest {
            volume_id: volume_id.to_owned(),
            target_path: path.to_owned(),
        };
        self.node().node_unpublish_volume(request).await?;
        if let Some(Made::Volume { published_at, .. }) = self.volume_mut(volume_id) {
            published_at.retain(|p| p != path);
        }
        Ok(())
    }

    /// Undoes everything the case left: calls cut off in flight first (creates repeated to
    /// learn what they made, stages and publishes reversed), then node unpublish and
    /// unstage, controller unpublish, then snapshots and volumes deleted newest first (so a
    /// snapshot goes before its source volume and a restored volume before its snapshot).
    /// Returns what could not be undone. What is undone is forgotten as it goes, so a
    /// cleanup cut short leaves exactly the rest in [`CaseContext::leftovers`].
    pub async fn cleanup(&mut self) -> Vec<String> {
        let mut problems = Vec::new();
        while let Some((_, call)) = self.in_flight.first().cloned() {
            let problem = self.undo_in_flight(call).await;
            // Forgotten once undone (or found impossible), not before: a cleanup cut short
            // still lists it.
            self.in_flight.remove(0);
            problems.extend(problem);
        }
        for item in self.made.clone() {
            let Made::Volume {
                id,
                staged_at,
                published_at,
                published_to,
            } = item
            else {
                continue;
            };
            for path in published_at {
                if let Err(s) = self.node_unpublish(&id, &path).await {
                    problems.push(format!(
                        "NodeUnpublishVolume {id} at {path}: {}",
                        describe_status(&s)
                    ));
                }
            }
            if let Some(path) = staged_at
                && let Err(s) = self.node_unstage(&id, &path).await
            {
                problems.push(format!(
                    "NodeUnstageVolume {id} at {path}: {}",
                    describe_status(&s)
                ));
            }
            for node in published_to {
                if let Err(s) = self.controller_unpublish(&id, &node).await {
                    problems.push(format!(
                        "ControllerUnpublishVolume {id} from {node}: {}",
                        describe_status(&s)
                    ));
                }
            }
        }
        for item in self.made.clone().iter().rev() {
            let (kind, id, result) = match item {
                Made::Snapshot { id } => ("DeleteSnapshot", id, self.delete_snapshot(id).await),
                Made::Volume { id, .. } => ("DeleteVolume", id, self.delete_volume(id).await),
            };
            if let Err(s) = result {
                problems.push(format!("{kind} {id}: {}", describe_status(&s)));
            }
        }
        problems
    }

    /// Undoes one call cut off in flight; what could not be undone.
    async fn undo_in_flight(&mut self, call: InFlight) -> Option<String> {
        match call {
            InFlight::CreateVolume(request) => {
                let name = request.name.clone();
                match repeat(|| {
                    let (mut client, request) = (self.controller(), request.clone());
                    async move { client.create_volume(request).await }
                })
                .await
                {
                    Ok(response) => {
                        let id = response.into_inner().volume.unwrap_or_default().volume_id;
                        self.track_volume(&id);
                        None
                    }
                    Err(s) => Some(format!(
                        "CreateVolume {name:?} was cut off and repeating it to learn the volume id failed ({}): a volume of that name may be left",
                        describe_status(&s)
                    )),
                }
            }
            InFlight::CreateSnapshot(request) => {
                let name = request.name.clone();
                match repeat(|| {
                    let (mut client, request) = (self.controller(), request.clone());
                    async move { client.create_snapshot(request).await }
                })
                .await
                {
                    Ok(response) => {
                        let id = response
                            .into_inner()
                            .snapshot
                            .unwrap_or_default()
                            .snapshot_id;
                        self.track_snapshot(&id);
                        None
                    }
                    Err(s) => Some(format!(
                        "CreateSnapshot {name:?} was cut off and repeating it to learn the snapshot id failed ({}): a snapshot of that name may be left",
                        describe_status(&s)
                    )),
                }
            }
            // A publish or stage that never happened unpublishes as a no-op (or NotFound).
            InFlight::NodePublish { volume_id, path } => {
                match self.node_unpublish(&volume_id, &path).await {
                    Err(s) if s.code() != Code::NotFound => Some(format!(
                        "NodeUnpublishVolume {volume_id} at {path} (its publish was cut off): {}",
                        describe_status(&s)
                    )),
                    _ => None,
                }
            }
            InFlight::NodeStage { volume_id, path } => {
                match self.node_unstage(&volume_id, &path).await {
                    Err(s) if s.code() != Code::NotFound => Some(format!(
                        "NodeUnstageVolume {volume_id} at {path} (its stage was cut off): {}",
                        describe_status(&s)
                    )),
                    _ => None,
                }
            }
        }
    }

    /// What this case made and has not undone (yet), one line each.
    pub fn leftovers(&self) -> Vec<String> {
        let mut left: Vec<String> = self
            .in_flight
            .iter()
            .map(|(_, call)| match call {
                InFlight::CreateVolume(r) => format!("maybe a volume named {:?}", r.name),
                InFlight::CreateSnapshot(r) => format!("maybe a snapshot named {:?}", r.name),
                InFlight::NodeStage { volume_id, path } => {
                    format!("maybe volume {volume_id} staged at {path}")
                }
                InFlight::NodePublish { volume_id, path } => {
                    format!("maybe volume {volume_id} published at {path}")
                }
            })
            .collect();
        for item in &self.made {
            match item {
                Made::Snapshot { id } => left.push(format!("snapshot {id}")),
                Made::Volume {
                    id,
                    staged_at,
                    published_at,
                    published_to,
                } => {
                    let mut where_ = Vec::new();
                    where_.extend(published_at.iter().map(|p| format!("published at {p}")));
                    where_.extend(staged_at.iter().map(|p| format!("staged at {p}")));
                    where_.extend(published_to.iter().map(|n| format!("attached to {n}")));
                    if where_.is_empty() {
                        left.push(format!("volume {id}"));
                    } else {
                        left.push(format!("volume {id} ({})", where_.join(", ")));
                    }
                }
            }
        }
        left
    }
}

/// Runs `call` until it succeeds, fails for good, or [`REPEAT_TIMEOUT`] passes; the plugin
/// may still be busy with the call that was cut off (`Aborted`, `Unavailable`,
/// `DeadlineExceeded`), so those are retried with a growing interval.
async fn repeat<T, F, Fut>(mut call: F) -> std::result::Result<T, Status>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = std::result::Result<T, Status>>,
{
    let deadline = tokio::time::Instant::now() + REPEAT_TIMEOUT;
    let mut interval = Duration::from_millis(20);
    loop {
        match call().await {
            Err(s)
                if matches!(
                    s.code(),
                    Code::Aborted | Code::Unavailable | Code::DeadlineExceeded
                ) && tokio::time::Instant::now() + interval < deadline =>
            {
                tokio::time::sleep(interval).await;
                interval = (interval * 2).min(Duration::from_secs(2));
            }
            outcome => return outcome,
        }
    }
}

/// Checks what csi-sanity requires of every returned snapshot.
pub fn verify_snapshot(snapshot: &v1::Snapshot, what: &str) -> CaseResult {
    let missing: Vec<&str> = [
        ("snapshot_id", snapshot.snapshot_id.is_empty()),
        ("source_volume_id", snapshot.source_volume_id.is_empty()),
        (
            "creation_time",
            snapshot
                .creation_time
                .as_ref()
                .is_none_or(|t| t.seconds == 0 && t.nanos == 0),
        ),
    ]
    .into_iter()
    .filter_map(|(field, missing)| missing.then_some(field))
    .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(Verdict::Fail(format!(
            "{what}: the snapshot lacks {}",
            missing.join(", ")
        )))
    }
}
