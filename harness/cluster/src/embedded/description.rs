//! `cluster.json`: what another process needs to attach to a running embedded cluster, and the
//! layout of the cluster's run directory.
//!
//! ```text
//! <run dir>/
//!   run.lock          held by the cluster process (its pid inside)
//!   processes         the node agents started (pid, start time, name)
//!   cluster.json      this description, written once every node is Ready
//!   control.sock      control requests (restart a node agent)
//!   cluster.log       the cluster process's log, when it runs in the background
//!   control-plane/    the control plane's run directory (logs/, pki/, admin.kubeconfig)
//!   nodes/<node>/     a node agent's run directory (kubeconfig, pods)
//!   nodes/<node>.log  a node agent's log
//! ```

use std::path::{Path, PathBuf};

use kube_support::error::IoContext;
use serde::{Deserialize, Serialize};

use super::super::error::{Error, Result};

/// The description file's name in the run directory.
pub const DESCRIPTION_FILE: &str = "cluster.json";
/// The control socket's name in the run directory.
pub const CONTROL_SOCKET: &str = "control.sock";
/// The background cluster process's log in the run directory.
pub const CLUSTER_LOG: &str = "cluster.log";

/// A running embedded cluster as another process sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterDescription {
    /// The admin kubeconfig.
    pub kubeconfig: PathBuf,
    /// The apiserver's URL.
    pub api_url: String,
    /// The nodes, in creation order.
    pub nodes: Vec<NodeDescription>,
    /// The pid of the process owning the cluster.
    pub pid: u32,
    /// For the containers backend: the network and the containers (absent for the
    /// embedded backend).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub containers: Option<ContainersDescription>,
}

/// The docker objects of a cluster of the containers backend.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainersDescription {
    /// The cluster's docker network.
    pub network: String,
    /// The control plane's container.
    pub control_plane: String,
    /// Each node's container, by node name.
    pub nodes: std::collections::BTreeMap<String, String>,
}

/// One simulated node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeDescription {
    /// The Node's name.
    pub name: String,
    /// Its zone (`topology.kubernetes.io/zone`).
    pub zone: String,
    /// The node agent's run directory (its pods live there).
    pub run_dir: PathBuf,
    /// The node agent's log.
    pub log: PathBuf,
}

impl ClusterDescription {
    /// Reads the description from a cluster's run directory.
    pub fn read(run_dir: &Path) -> Result<Self> {
        let path = run_dir.join(DESCRIPTION_FILE);
        let text = match std::fs::read(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::NotRunning {
                    run_dir: run_dir.to_path_buf(),
                    reason: format!("no {DESCRIPTION_FILE} (not started, or not ready yet)"),
                });
            }
            Err(e) => return Err(Error::io("reading", &path)(e)),
        };
        serde_json::from_slice(&text).map_err(|source| Error::Description { path, source })
    }

    /// Writes the description atomically (a reader sees all of it or nothing).
    pub fn write(&self, run_dir: &Path) -> Result<()> {
        let path = run_dir.join(DESCRIPTION_FILE);
        let tmp = run_dir.join(format!("{DESCRIPTION_FILE}.tmp"));
        let text = serde_json::to_vec_pretty(self).map_err(|source| Error::Description {
            path: path.clone(),
            source,
        })?;
        std::fs::write(&tmp, text).map_err(Error::io("writing", &tmp))?;
        std::fs::rename(&tmp, &path).map_err(Error::io("renaming", &tmp))
    }

    /// The node called `name`.
    pub fn node(&self, name: &str) -> Result<&NodeDescription> {
        self.nodes
            .iter()
            .find(|n| n.name == name)
            .ok_or_else(|| Error::UnknownNode {
                node: name.into(),
                known: self.node_names().join(", "),
            })
    }

    /// The nodes' names.
    pub fn node_names(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.name.clone()).collect()
    }
}

impl ContainersDescription {
    /// The container of worker node `node`.
    pub fn node_container(&self, node: &str) -> Result<&str> {
        self.nodes
            .get(node)
            .map(String::as_str)
            .ok_or_else(|| Error::UnknownNode {
                node: node.into(),
                known: self.nodes.keys().cloned().collect::<Vec<_>>().join(", "),
            })
    }

    /// The containers' names: control plane first, then the nodes.
    pub fn container_names(&self) -> Vec<String> {
        std::iter::once(self.control_plane.clone())
            .chain(self.nodes.values().cloned())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn round_trips_and_names_unknown_nodes() {
        let dir = tempfile::Builder::new()
            .prefix("description-")
            .tempdir()
            .unwrap();
        let description = ClusterDescription {
            kubeconfig: "/x/admin.kubeconfig".into(),
            api_url: "https://127.0.0.1:6443".into(),
            nodes: vec![NodeDescription {
                name: "node-1".into(),
                zone: "zone-a".into(),
                run_dir: "/x/nodes/node-1".into(),
                log: "/x/nodes/node-1.log".into(),
            }],
            pid: 42,
            containers: None,
        };
        description.write(dir.path()).unwrap();
        assert_eq!(ClusterDescription::read(dir.path()).unwrap(), description);
        let err = description.node("node-9").unwrap_err().to_string();
        assert_eq!(err, "no node node-9 in this cluster (nodes: node-1)");
    }

    #[test]
    fn containers_are_named_by_node() {
        let containers = ContainersDescription {
            network: "occ-x".into(),
            control_plane: "occ-x-control-plane".into(),
            nodes: [("node-1", "occ-x-node-1"), ("node-2", "occ-x-node-2")]
                .into_iter()
                .map(|(n, c)| (n.to_string(), c.to_string()))
                .collect(),
        };
        assert_eq!(containers.node_container("node-2").unwrap(), "occ-x-node-2");
        let err = containers.node_container("node-9").unwrap_err().to_string();
        assert_eq!(
            err,
            "no node node-9 in this cluster (nodes: node-1, node-2)"
        );
        assert_eq!(
            containers.container_names(),
            ["occ-x-control-plane", "occ-x-node-1", "occ-x-node-2"]
        );
    }

    #[test]
    fn a_missing_description_says_the_cluster_is_not_running() {
        let dir = tempfile::Builder::new()
            .prefix("description-")
            .tempdir()
            .unwrap();
        let err = ClusterDescription::read(dir.path()).unwrap_err();
        assert!(matches!(err, Error::NotRunning { .. }), "{err}");
    }
}
