//! What one case works with ([`CaseContext`]): clients, request builders, unique names, and
//! the record of every volume, snapshot, stage and publish it made so the runner can undo
//! them.
//!
//! - `calls`: the tracked calls (create, delete, publish, stage, …) that keep that record;
//! - `cleanup`: undoing what the record holds, and listing what is left;
//! - `record`: what a case made, and the calls whose answer never came.

mod calls;
mod cleanup;
mod record;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use csi_proto::v1::controller_client::ControllerClient;
use csi_proto::v1::identity_client::IdentityClient;
use csi_proto::v1::node_client::NodeClient;
use csi_proto::v1::volume_capability::access_mode::Mode;
use csi_proto::v1::volume_capability::{AccessMode, BlockVolume, MountVolume};
use csi_proto::v1::{self, CapacityRange, VolumeCapability};
use tonic::transport::Channel;

use super::config::{AccessType, SanityConfig};
use super::session::{ControllerCap, NodeCap, Service, Session};
use super::verdict::{CaseResult, Verdict};
use record::{InFlight, Made};

pub use calls::verify_snapshot;

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
}
