//! A fake Nova metadata service: `meta_data.json` per node, for drivers that learn their
//! node id (`uuid`) and zone (`availability_zone`) from it as upstream's CSI drivers do.
//!
//! Real instances all read `http://169.254.169.254/openstack/latest/meta_data.json` and get
//! their own document; here one port serves every simulated node, so each node's document
//! has a path of its own, `/nodes/<node>/openstack/latest/meta_data.json`, and
//! `/openstack/latest/meta_data.json` is the document of the node named `default`. A node
//! without a document answers 404, as an instance without a metadata service fails.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::reply::Reply;

/// The path of the metadata document, as Nova serves it.
pub const DOCUMENT: &str = "/openstack/latest/meta_data.json";
/// The prefix of per-node documents: `/nodes/<node>` + [`DOCUMENT`].
pub const NODES_PREFIX: &str = "/nodes";
/// The node whose document [`DOCUMENT`] serves.
pub const DEFAULT_NODE: &str = "default";

/// What a node's `meta_data.json` says about it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeMetadata {
    /// The instance's id (`uuid`).
    pub uuid: String,
    /// The instance's compute availability zone (`availability_zone`).
    pub availability_zone: String,
    /// The instance's name (`name`, `hostname`); the node name when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl NodeMetadata {
    /// Checks what Nova would never serve: an empty id or zone.
    pub fn validate(&self) -> std::result::Result<(), String> {
        if self.uuid.trim().is_empty() {
            return Err("uuid must not be empty".into());
        }
        if self.availability_zone.trim().is_empty() {
            return Err("availability_zone must not be empty".into());
        }
        Ok(())
    }

    /// The document as Nova writes it (the fields drivers read, plus the usual others).
    pub(crate) fn document(&self, node: &str, project_id: &str) -> Value {
        let name = self.name.as_deref().unwrap_or(node);
        json!({
            "uuid": self.uuid,
            "availability_zone": self.availability_zone,
            "name": name,
            "hostname": name,
            "launch_index": 0,
            "project_id": project_id,
            "meta": {},
            "devices": [],
        })
    }
}

/// The node `path` asks for, if it is a metadata document path.
pub(crate) fn node_of(path: &str) -> Option<&str> {
    if path == DOCUMENT {
        return Some(DEFAULT_NODE);
    }
    let rest = path.strip_prefix(NODES_PREFIX)?.strip_prefix('/')?;
    let (node, document) = rest.split_once('/')?;
    (!node.is_empty() && format!("/{document}") == DOCUMENT).then_some(node)
}

/// Answers a metadata document request for `node`.
pub(crate) fn serve(
    documents: &BTreeMap<String, NodeMetadata>,
    node: &str,
    method: &str,
    project_id: &str,
) -> Reply {
    if method != "GET" {
        return Reply::text(405, "405 Method Not Allowed".into(), "text/plain");
    }
    match documents.get(node) {
        Some(metadata) => Reply::json(200, metadata.document(node, project_id)),
        None => Reply::text(404, "404 Not Found".into(), "text/plain"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_paths() {
        assert_eq!(node_of("/openstack/latest/meta_data.json"), Some("default"));
        assert_eq!(
            node_of("/nodes/worker-1/openstack/latest/meta_data.json"),
            Some("worker-1")
        );
        assert_eq!(node_of("/nodes//openstack/latest/meta_data.json"), None);
        assert_eq!(
            node_of("/nodes/worker-1/openstack/latest/vendor_data.json"),
            None
        );
        assert_eq!(node_of("/openstack/latest"), None);
    }
}
