//! What the in-test CSI node drivers share (`node_csi_block`, `node_csi_staging`,
//! `node_pod_volumes`): their NodeGetInfo and NodeGetCapabilities answers, and the bind
//! mounts they stage and publish with, made in the test process (the host's mount
//! namespace) at the place of kubelet's paths in the agent's run directory.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use csi_proto::v1::node_service_capability::rpc::Type as CapabilityType;
use csi_proto::v1::{
    NodeGetCapabilitiesResponse, NodeGetInfoResponse, NodeServiceCapability,
    node_service_capability,
};
use nix::mount::{MntFlags, MsFlags};
use node_agent::csi::PluginPaths;
use tonic::{Response, Status};

/// NodeGetInfo's answer: `node_id`, no volume limit, no topology.
pub fn node_info(node_id: &str) -> Result<Response<NodeGetInfoResponse>, Status> {
    Ok(Response::new(NodeGetInfoResponse {
        node_id: node_id.into(),
        max_volumes_per_node: 0,
        accessible_topology: None,
    }))
}

/// NodeGetCapabilities' answer: these RPC capabilities.
pub fn capabilities(
    types: &[CapabilityType],
) -> Result<Response<NodeGetCapabilitiesResponse>, Status> {
    let capability = |t: &CapabilityType| NodeServiceCapability {
        r#type: Some(node_service_capability::Type::Rpc(
            node_service_capability::Rpc {
                r#type: (*t).into(),
            },
        )),
    };
    Ok(Response::new(NodeGetCapabilitiesResponse {
        capabilities: types.iter().map(capability).collect(),
    }))
}

/// Where kubelet's path `kubelet_path` is on this machine for the node of `paths`.
pub fn host(paths: &PluginPaths, kubelet_path: &str) -> PathBuf {
    paths.host_path(Path::new(kubelet_path))
}

/// Bind-mounts `source` at `target`.
pub fn bind(source: &Path, target: &Path) -> Result<(), Status> {
    nix::mount::mount(
        Some(source),
        target,
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .map_err(|e| Status::internal(format!("bind {source:?} at {target:?}: {e}")))
}

/// Unmounts `target`; nothing mounted there (or no `target`) is fine.
pub fn unmount(target: &Path) -> Result<(), Status> {
    match nix::mount::umount2(target, MntFlags::empty()) {
        Ok(()) | Err(nix::errno::Errno::EINVAL | nix::errno::Errno::ENOENT) => Ok(()),
        Err(e) => Err(Status::internal(format!("umount {target:?}: {e}"))),
    }
}
