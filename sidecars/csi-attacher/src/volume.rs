//! The driver's id for a node, which ControllerPublish needs (the PV side — source and
//! capability — is in [`sidecar_common::volume`]).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::CSINode;
use kube::Api;
use kube::Client;

use crate::{Error, Result};

/// The legacy Node annotation: a JSON map from driver name to node id.
pub const NODE_ID_ANNOTATION: &str = "csi.volume.kubernetes.io/nodeid";

/// The driver's id for `node`: the CSINode entry for `driver`, else the legacy
/// `csi.volume.kubernetes.io/nodeid` Node annotation.
pub async fn node_id(client: &Client, driver: &str, node: &str) -> Result<String> {
    let csinode = Api::<CSINode>::all(client.clone())
        .get_opt(node)
        .await
        .map_err(|e| Error::kube(format!("reading CSINode {node}"), e))?;
    if let Some(id) = csinode
        .iter()
        .flat_map(|c| c.spec.drivers.iter())
        .find(|d| d.name == driver)
        .map(|d| d.node_id.clone())
        .filter(|id| !id.is_empty())
    {
        return Ok(id);
    }
    let node_object = Api::<Node>::all(client.clone())
        .get_opt(node)
        .await
        .map_err(|e| Error::kube(format!("reading Node {node}"), e))?;
    let annotation = node_object
        .as_ref()
        .and_then(|n| n.metadata.annotations.as_ref())
        .and_then(|a| a.get(NODE_ID_ANNOTATION));
    if let Some(text) = annotation {
        let ids: BTreeMap<String, String> = serde_json::from_str(text).map_err(|e| {
            Error::Invalid(format!(
                "Node {node} annotation {NODE_ID_ANNOTATION} is not a JSON map: {e}"
            ))
        })?;
        if let Some(id) = ids.get(driver) {
            return Ok(id.clone());
        }
    }
    Err(Error::Invalid(format!(
        "node {node:?} has no ID for driver {driver:?} (no CSINode entry, no {NODE_ID_ANNOTATION} annotation)"
    )))
}
