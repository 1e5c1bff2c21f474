//! What registering a CSI driver changes in the API, as kubelet's node-info manager does it:
//! the Node's `csi.volume.kubernetes.io/nodeid` annotation and topology labels, and the
//! node's CSINode entry.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::{CSINode, CSINodeDriver, CSINodeSpec, VolumeNodeResources};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use super::error::{Error, Result};

/// The Node annotation mapping driver names to their node ids (a JSON object).
pub const NODE_ID_ANNOTATION: &str = "csi.volume.kubernetes.io/nodeid";

/// Attempts of a read-modify-write before a conflict is reported.
const CONFLICT_ATTEMPTS: usize = 5;

/// What NodeGetInfo said about this node, for one driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverNodeInfo {
    /// The driver name.
    pub driver: String,
    /// The node id in the driver's terms.
    pub node_id: String,
    /// `accessible_topology.segments`: become Node labels and CSINode topology keys.
    pub topology: BTreeMap<String, String>,
    /// `max_volumes_per_node`; 0 means no limit (no `allocatable`).
    pub max_volumes: i64,
}

/// Adds the driver to the Node (annotation, labels) and then to the CSINode (created, owned
/// by the Node, when missing).
pub async fn install(client: &Client, node_name: &str, info: &DriverNodeInfo) -> Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let node = retry_conflicts(|| update_node_for_install(&nodes, node_name, info)).await?;
    let csinodes: Api<CSINode> = Api::all(client.clone());
    retry_conflicts(|| install_in_csinode(&csinodes, &node, info)).await
}

/// Removes the driver from the CSINode and from the Node's annotation (the topology labels
/// stay, as with kubelet).
pub async fn uninstall(client: &Client, node_name: &str, driver: &str) -> Result<()> {
    let csinodes: Api<CSINode> = Api::all(client.clone());
    retry_conflicts(|| uninstall_from_csinode(&csinodes, node_name, driver)).await?;
    let nodes: Api<Node> = Api::all(client.clone());
    retry_conflicts(|| remove_node_id(&nodes, node_name, driver)).await
}

/// Creates the node's CSINode with no drivers when it does not exist (kubelet does so at
/// start).
pub async fn ensure_csinode(client: &Client, node_name: &str) -> Result<()> {
    let csinodes: Api<CSINode> = Api::all(client.clone());
    if csinodes
        .get_opt(node_name)
        .await
        .map_err(Error::api(format!("reading CSINode {node_name:?}")))?
        .is_some()
    {
        return Ok(());
    }
    let nodes: Api<Node> = Api::all(client.clone());
    let node = nodes
        .get(node_name)
        .await
        .map_err(Error::api(format!("reading Node {node_name:?}")))?;
    create_csinode(&csinodes, &node, Vec::new()).await
}

async fn retry_conflicts<T, F, Fut>(mut attempt: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let mut tries = 1;
    loop {
        match attempt().await {
            Err(e) if e.is_conflict() && tries < CONFLICT_ATTEMPTS => tries += 1,
            other => return other,
        }
    }
}

fn node_ids(node: &Node) -> Result<BTreeMap<String, String>> {
    let Some(text) = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(NODE_ID_ANNOTATION))
    else {
        return Ok(BTreeMap::new());
    };
    serde_json::from_str(text).map_err(|e| Error::BadNodeIdAnnotation {
        key: NODE_ID_ANNOTATION,
        reason: e.to_string(),
    })
}

async fn update_node_for_install(
    nodes: &Api<Node>,
    node_name: &str,
    info: &DriverNodeInfo,
) -> Result<Node> {
    let node = nodes
        .get(node_name)
        .await
        .map_err(Error::api(format!("reading Node {node_name:?}")))?;
    let labels = node.metadata.labels.clone().unwrap_or_default();
    for (key, wanted) in &info.topology {
        if let Some(existing) = labels.get(key).filter(|existing| *existing != wanted) {
            return Err(Error::TopologyCollision {
                driver: info.driver.clone(),
                key: key.clone(),
                existing: existing.clone(),
                wanted: wanted.clone(),
            });
        }
    }
    let mut ids = node_ids(&node)?;
    let missing_labels = info.topology.iter().any(|(k, _)| !labels.contains_key(k));
    if ids.get(&info.driver) == Some(&info.node_id) && !missing_labels {
        return Ok(node);
    }
    ids.insert(info.driver.clone(), info.node_id.clone());
    let ids_json = serde_json::to_string(&ids).map_err(|e| Error::BadNodeIdAnnotation {
        key: NODE_ID_ANNOTATION,
        reason: e.to_string(),
    })?;
    // The resourceVersion makes the merge patch fail with a conflict if the map changed
    // since it was read.
    let patch = json!({"metadata": {
        "resourceVersion": node.metadata.resource_version,
        "labels": info.topology,
        "annotations": {NODE_ID_ANNOTATION: ids_json},
    }});
    nodes
        .patch(node_name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map_err(Error::api(format!(
            "adding driver {:?} to Node {node_name:?}",
            info.driver
        )))
}

async fn remove_node_id(nodes: &Api<Node>, node_name: &str, driver: &str) -> Result<()> {
    let Some(node) = nodes
        .get_opt(node_name)
        .await
        .map_err(Error::api(format!("reading Node {node_name:?}")))?
    else {
        return Ok(());
    };
    let mut ids = node_ids(&node)?;
    if ids.remove(driver).is_none() {
        return Ok(());
    }
    let value = if ids.is_empty() {
        serde_json::Value::Null
    } else {
        json!(
            serde_json::to_string(&ids).map_err(|e| Error::BadNodeIdAnnotation {
                key: NODE_ID_ANNOTATION,
                reason: e.to_string(),
            })?
        )
    };
    let patch = json!({"metadata": {
        "resourceVersion": node.metadata.resource_version,
        "annotations": {NODE_ID_ANNOTATION: value},
    }});
    nodes
        .patch(node_name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map_err(Error::api(format!(
            "removing driver {driver:?} from Node {node_name:?}"
        )))?;
    Ok(())
}

/// The CSINode entry kubelet writes for a driver.
pub fn csinode_driver(info: &DriverNodeInfo) -> CSINodeDriver {
    let count = i32::try_from(info.max_volumes).unwrap_or(i32::MAX);
    CSINodeDriver {
        name: info.driver.clone(),
        node_id: info.node_id.clone(),
        // Sorted, as kubelet lists them.
        topology_keys: Some(info.topology.keys().cloned().collect()),
        allocatable: (info.max_volumes > 0).then_some(VolumeNodeResources { count: Some(count) }),
    }
}

async fn create_csinode(
    csinodes: &Api<CSINode>,
    node: &Node,
    drivers: Vec<CSINodeDriver>,
) -> Result<()> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let csinode = CSINode {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Node".into(),
                name: name.clone(),
                uid: node.metadata.uid.clone().unwrap_or_default(),
                ..OwnerReference::default()
            }]),
            ..ObjectMeta::default()
        },
        spec: CSINodeSpec { drivers },
    };
    match csinodes.create(&PostParams::default(), &csinode).await {
        Ok(_) => Ok(()),
        // Created meanwhile (e.g. by the start-up initialisation): the caller retries.
        Err(kube::Error::Api(status)) if status.code == 409 => Err(Error::Api {
            action: format!("creating CSINode {name:?}"),
            source: kube::Error::Api(status),
        }),
        Err(e) => Err(Error::api(format!("creating CSINode {name:?}"))(e)),
    }
}

async fn install_in_csinode(
    csinodes: &Api<CSINode>,
    node: &Node,
    info: &DriverNodeInfo,
) -> Result<()> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let entry = csinode_driver(info);
    let Some(mut csinode) = csinodes
        .get_opt(&name)
        .await
        .map_err(Error::api(format!("reading CSINode {name:?}")))?
    else {
        return create_csinode(csinodes, node, vec![entry]).await;
    };
    if csinode.spec.drivers.contains(&entry) {
        return Ok(());
    }
    csinode.spec.drivers.retain(|d| d.name != info.driver);
    csinode.spec.drivers.push(entry);
    csinodes
        .replace(&name, &PostParams::default(), &csinode)
        .await
        .map_err(Error::api(format!(
            "adding driver {:?} to CSINode {name:?}",
            info.driver
        )))?;
    Ok(())
}

async fn uninstall_from_csinode(
    csinodes: &Api<CSINode>,
    node_name: &str,
    driver: &str,
) -> Result<()> {
    let Some(mut csinode) = csinodes
        .get_opt(node_name)
        .await
        .map_err(Error::api(format!("reading CSINode {node_name:?}")))?
    else {
        return Ok(());
    };
    let before = csinode.spec.drivers.len();
    csinode.spec.drivers.retain(|d| d.name != driver);
    if csinode.spec.drivers.len() == before {
        return Ok(());
    }
    csinodes
        .replace(node_name, &PostParams::default(), &csinode)
        .await
        .map_err(Error::api(format!(
            "removing driver {driver:?} from CSINode {node_name:?}"
        )))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn info(max_volumes: i64) -> DriverNodeInfo {
        DriverNodeInfo {
            driver: "d.example.com".into(),
            node_id: "n-1".into(),
            topology: BTreeMap::from([
                ("topology.d.example.com/zone".into(), "z1".into()),
                ("topology.d.example.com/rack".into(), "r1".into()),
            ]),
            max_volumes,
        }
    }

    #[test]
    fn entry_has_sorted_topology_keys_and_a_count_only_when_limited() {
        let entry = csinode_driver(&info(0));
        assert_eq!(
            entry.topology_keys.unwrap(),
            vec![
                "topology.d.example.com/rack".to_string(),
                "topology.d.example.com/zone".to_string()
            ]
        );
        assert!(entry.allocatable.is_none());
        let limited = csinode_driver(&info(16));
        assert_eq!(limited.allocatable.unwrap().count, Some(16));
        let huge = csinode_driver(&info(i64::MAX));
        assert_eq!(huge.allocatable.unwrap().count, Some(i32::MAX));
    }

    #[test]
    fn a_malformed_node_id_annotation_is_named() {
        let mut node = Node::default();
        node.metadata.annotations = Some(BTreeMap::from([(
            NODE_ID_ANNOTATION.to_string(),
            "not json".to_string(),
        )]));
        let error = node_ids(&node).unwrap_err().to_string();
        assert!(error.contains(NODE_ID_ANNOTATION), "{error}");
    }
}
