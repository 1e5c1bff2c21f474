//! The OpenStack (Nova) metadata service: where the node service learns its node id (`uuid`)
//! and compute zone (`availability_zone`) when `--nodeid`/`--nodeaz` are not given, as
//! upstream's driver does (both flags are deprecated upstream).

use std::time::Duration;

pub use openstack_client::metadata::DEFAULT_URL;
use openstack_client::metadata::fetch;

use crate::error::{Error, Result};

/// The node's identity as the node service reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeIdentity {
    /// NodeGetInfo's node id.
    pub node_id: String,
    /// The node's zone (only with topology).
    pub zone: Option<String>,
}

/// `--nodeid` and (with topology) `--nodeaz` when given, else what the metadata service at
/// `url` says; the service is only asked when a value is missing.
pub async fn node_identity(
    nodeid: Option<&str>,
    nodeaz: Option<&str>,
    with_topology: bool,
    url: &str,
    timeout: Duration,
) -> Result<NodeIdentity> {
    let nodeid = nodeid.filter(|s| !s.is_empty());
    let nodeaz = nodeaz.filter(|s| !s.is_empty());
    let needs_zone = with_topology && nodeaz.is_none();
    let metadata = if nodeid.is_none() || needs_zone {
        Some(fetch(url, timeout).await?)
    } else {
        None
    };
    let missing = |field: &str| {
        Error::Cloud(openstack_client::Error::Metadata {
            url: url.to_string(),
            reason: format!("the document has no {field}"),
        })
    };
    let node_id = match (nodeid, &metadata) {
        (Some(id), _) => id.to_string(),
        (None, Some(m)) if !m.uuid.is_empty() => m.uuid.clone(),
        (None, _) => return Err(missing("uuid")),
    };
    let zone = if !with_topology {
        None
    } else {
        match (nodeaz, &metadata) {
            (Some(zone), _) => Some(zone.to_string()),
            (None, Some(m)) if !m.availability_zone.is_empty() => Some(m.availability_zone.clone()),
            (None, _) => return Err(missing("availability_zone")),
        }
    };
    Ok(NodeIdentity { node_id, zone })
}
