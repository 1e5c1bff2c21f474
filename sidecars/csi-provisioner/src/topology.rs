//! Accessibility requirements for CreateVolume and node affinity for the PV, as upstream:
//!
//! - a segment is a node's values of the topology keys its CSINode lists for the driver;
//! - requisite: the StorageClass's `allowedTopologies` (flattened), else every segment of
//!   the cluster's nodes with the same keys (with `--strict-topology` and a selected node:
//!   only that node's);
//! - preferred: the requisite list sorted, rotated so the selected node's segment comes
//!   first (Immediate binding: rotated by a hash of the claim name to spread volumes);
//! - no CSINode lists keys for the driver → no requirement.

use std::collections::{BTreeMap, BTreeSet};

use csi_proto::v1::{Topology, TopologyRequirement};
use k8s_openapi::api::core::v1::{
    Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, TopologySelectorTerm,
    VolumeNodeAffinity,
};
use k8s_openapi::api::storage::v1::CSINode;
use kube::Client;
use kube::api::{Api, ListParams};

use crate::{Error, Result};

/// Topology keys → values of one node (or one allowed combination).
pub type Segment = BTreeMap<String, String>;

/// Reads the cluster's topology and computes the requirement for one claim.
pub async fn requirement(
    client: &Client,
    driver: &str,
    selected_node: Option<&str>,
    allowed: &[TopologySelectorTerm],
    strict: bool,
    claim_name: &str,
) -> Result<Option<TopologyRequirement>> {
    let csinodes: Api<CSINode> = Api::all(client.clone());
    let nodes: Api<Node> = Api::all(client.clone());
    let selected = match selected_node {
        Some(name) => {
            let csinode = csinodes
                .get_opt(name)
                .await
                .map_err(|e| Error::kube(format!("reading CSINode {name}"), e))?;
            let keys = csinode.as_ref().and_then(|c| driver_keys(c, driver)).ok_or_else(|| {
                Error::NotReady(format!(
                    "the selected node {name:?} has no CSINode entry for driver {driver} with topology keys yet"
                ))
            })?;
            let node = nodes
                .get(name)
                .await
                .map_err(|e| Error::kube(format!("reading the selected node {name}"), e))?;
            Some(segment_of(&node, &keys).ok_or_else(|| {
                Error::NotReady(format!(
                    "the selected node {name:?} lacks some of the topology labels {keys:?}"
                ))
            })?)
        }
        None => None,
    };
    let allowed = flatten_allowed(allowed);
    let mut cluster = Vec::new();
    if allowed.is_empty() && !(strict && selected.is_some()) {
        let all_csinodes = csinodes
            .list(&ListParams::default())
            .await
            .map_err(|e| Error::kube("listing CSINodes", e))?;
        let all_nodes = nodes
            .list(&ListParams::default())
            .await
            .map_err(|e| Error::kube("listing Nodes", e))?;
        let wanted_keys = selected
            .as_ref()
            .map(|s| s.keys().cloned().collect::<BTreeSet<_>>());
        for csinode in &all_csinodes.items {
            let Some(keys) = driver_keys(csinode, driver) else {
                continue;
            };
            if wanted_keys
                .as_ref()
                .is_some_and(|w| *w != keys.iter().cloned().collect())
            {
                continue;
            }
            let name = csinode.metadata.name.as_deref().unwrap_or_default();
            if let Some(segment) = all_nodes
                .items
                .iter()
                .find(|n| n.metadata.name.as_deref() == Some(name))
                .and_then(|n| segment_of(n, &keys))
            {
                cluster.push(segment);
            }
        }
    }
    Ok(build(selected, cluster, allowed, strict, claim_name))
}

/// The pure part of [`requirement`].
pub fn build(
    selected: Option<Segment>,
    cluster: Vec<Segment>,
    allowed: Vec<Segment>,
    strict: bool,
    claim_name: &str,
) -> Option<TopologyRequirement> {
    let mut requisite: Vec<Segment> = if !allowed.is_empty() {
        allowed
    } else if strict && selected.is_some() {
        selected.clone().into_iter().collect()
    } else {
        cluster.into_iter().chain(selected.clone()).collect()
    };
    requisite.sort();
    requisite.dedup();
    if requisite.is_empty() {
        return None;
    }
    let mut preferred = requisite.clone();
    let start = match &selected {
        Some(segment) => preferred.iter().position(|s| s == segment).unwrap_or(0),
        None => claim_name.bytes().map(usize::from).sum::<usize>() % preferred.len(),
    };
    preferred.rotate_left(start);
    let topology = |s: Segment| Topology {
        segments: s.into_iter().collect(),
    };
    Some(TopologyRequirement {
        requisite: requisite.into_iter().map(topology).collect(),
        preferred: preferred.into_iter().map(topology).collect(),
    })
}

/// The topology keys `csinode` lists for `driver`, if any.
fn driver_keys(csinode: &CSINode, driver: &str) -> Option<Vec<String>> {
    csinode
        .spec
        .drivers
        .iter()
        .find(|d| d.name == driver)
        .and_then(|d| d.topology_keys.clone())
        .filter(|keys| !keys.is_empty())
}

fn segment_of(node: &Node, keys: &[String]) -> Option<Segment> {
    let labels = node.metadata.labels.as_ref()?;
    keys.iter()
        .map(|k| labels.get(k).map(|v| (k.clone(), v.clone())))
        .collect()
}

/// Each term's expressions multiplied out into segments.
pub fn flatten_allowed(terms: &[TopologySelectorTerm]) -> Vec<Segment> {
    let mut out = Vec::new();
    for term in terms {
        let mut segments = vec![Segment::new()];
        for expression in term.match_label_expressions.iter().flatten() {
            segments = segments
                .into_iter()
                .flat_map(|s| {
                    expression.values.iter().map(move |v| {
                        let mut s = s.clone();
                        s.insert(expression.key.clone(), v.clone());
                        s
                    })
                })
                .collect();
        }
        out.extend(segments.into_iter().filter(|s| !s.is_empty()));
    }
    out
}

/// The PV's node affinity: one term per accessible segment, each key `In` its value.
pub fn node_affinity(accessible: &[Topology]) -> Option<VolumeNodeAffinity> {
    let terms: Vec<NodeSelectorTerm> = accessible
        .iter()
        .filter(|t| !t.segments.is_empty())
        .map(|t| {
            let sorted: BTreeMap<_, _> = t.segments.iter().collect();
            NodeSelectorTerm {
                match_expressions: Some(
                    sorted
                        .into_iter()
                        .map(|(k, v)| NodeSelectorRequirement {
                            key: k.clone(),
                            operator: "In".into(),
                            values: Some(vec![v.clone()]),
                        })
                        .collect(),
                ),
                ..NodeSelectorTerm::default()
            }
        })
        .collect();
    (!terms.is_empty()).then_some(VolumeNodeAffinity {
        required: Some(NodeSelector {
            node_selector_terms: terms,
        }),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use k8s_openapi::api::core::v1::TopologySelectorLabelRequirement;

    const KEY: &str = "topology.manila.csi.openstack.org/zone";

    fn zone(z: &str) -> Segment {
        Segment::from([(KEY.to_string(), z.to_string())])
    }

    fn zones(t: &[Topology]) -> Vec<String> {
        t.iter().map(|t| t.segments[KEY].clone()).collect()
    }

    #[test]
    fn selected_node_comes_first_in_preferred() {
        let r = build(
            Some(zone("b")),
            vec![zone("a"), zone("c"), zone("b")],
            vec![],
            false,
            "x",
        )
        .unwrap();
        assert_eq!(zones(&r.requisite), ["a", "b", "c"]);
        assert_eq!(zones(&r.preferred), ["b", "c", "a"]);
    }

    #[test]
    fn strict_topology_keeps_only_the_selected_node() {
        let r = build(
            Some(zone("b")),
            vec![zone("a"), zone("b")],
            vec![],
            true,
            "x",
        )
        .unwrap();
        assert_eq!(zones(&r.requisite), ["b"]);
        assert_eq!(zones(&r.preferred), ["b"]);
    }

    #[test]
    fn allowed_topologies_are_the_requisite() {
        let terms = [TopologySelectorTerm {
            match_label_expressions: Some(vec![TopologySelectorLabelRequirement {
                key: KEY.into(),
                values: vec!["z1".into(), "z2".into()],
            }]),
        }];
        let allowed = flatten_allowed(&terms);
        let r = build(Some(zone("z2")), vec![zone("other")], allowed, false, "x").unwrap();
        assert_eq!(zones(&r.requisite), ["z1", "z2"]);
        assert_eq!(zones(&r.preferred), ["z2", "z1"]);
    }

    #[test]
    fn no_topology_means_no_requirement() {
        assert_eq!(build(None, vec![], vec![], false, "x"), None);
    }

    #[test]
    fn node_affinity_has_a_term_per_segment() {
        let accessible = [Topology {
            segments: [(KEY.to_string(), "nova".to_string())].into(),
        }];
        let affinity = node_affinity(&accessible).unwrap();
        let terms = affinity.required.unwrap().node_selector_terms;
        assert_eq!(terms.len(), 1);
        let expression = &terms[0].match_expressions.as_ref().unwrap()[0];
        assert_eq!(
            (expression.key.as_str(), expression.operator.as_str()),
            (KEY, "In")
        );
        assert_eq!(
            expression.values.as_deref(),
            Some(&["nova".to_string()][..])
        );
        assert_eq!(node_affinity(&[]), None);
    }
}
