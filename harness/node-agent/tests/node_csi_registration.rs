//! kubelet's CSI plugin registration in the node agent, with the real `node-driver-registrar`
//! binary against an in-test CSI Identity+Node server, on a real control plane: the CSINode
//! entry (node id, topology keys, allocatable count), the Node's topology label and nodeid
//! annotation, a refused registration ending the registrar, and deregistration when the
//! registrar stops.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use csi_proto::v1::node_server::{Node as CsiNode, NodeServer};
use csi_proto::v1::{NodeGetInfoRequest, NodeGetInfoResponse, Topology};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::CSINode;
use kube::api::Api;
use node_agent::csi::NODE_ID_ANNOTATION;
use testkit::drivers::{TestIdentity, serve_on_socket, start_registrar};
use testkit::node::{NodeBed, RunningAgent, wait_csi_drivers};
use testkit::wait_for;
use tonic::{Request, Response, Status};

const NODE: &str = "csi-node-a";
const DRIVER: &str = "registration-test.csi.example.com";
const TOPOLOGY_KEY: &str = "topology.registration-test.csi.example.com/zone";
const WAIT: Duration = Duration::from_secs(60);

/// A CSI Node service answering NodeGetInfo only.
#[derive(Clone)]
struct TestPlugin {
    name: String,
    node_id: String,
    topology: HashMap<String, String>,
    max_volumes: i64,
}

#[tonic::async_trait]
impl CsiNode for TestPlugin {
    async fn node_get_info(
        &self,
        _: Request<NodeGetInfoRequest>,
    ) -> Result<Response<NodeGetInfoResponse>, Status> {
        Ok(Response::new(NodeGetInfoResponse {
            node_id: self.node_id.clone(),
            max_volumes_per_node: self.max_volumes,
            accessible_topology: Some(Topology {
                segments: self.topology.clone(),
            }),
        }))
    }
}

/// Serves `plugin` (with a node-only Identity) on `<run_dir>/plugins/<name>/csi.sock`,
/// where kubelet's `/var/lib/kubelet/plugins/<name>/csi.sock` is on this node.
async fn serve_plugin(run_dir: &Path, plugin: TestPlugin) -> PathBuf {
    let socket = run_dir.join("plugins").join(&plugin.name).join("csi.sock");
    let router = tonic::transport::Server::builder()
        .add_service(TestIdentity::node_only(&plugin.name).service())
        .add_service(NodeServer::new(plugin));
    serve_on_socket(router, &socket).await;
    socket
}

fn annotation_ids(node: &Node) -> Option<BTreeMap<String, String>> {
    let text = node
        .metadata
        .annotations
        .as_ref()?
        .get(NODE_ID_ANNOTATION)?;
    Some(serde_json::from_str(text).unwrap())
}

fn drivers_of(csinode: &CSINode) -> String {
    serde_json::to_string(&csinode.spec.drivers).unwrap()
}

#[tokio::test]
async fn registrar_sockets_become_csinode_entries_and_node_labels() {
    let bed = NodeBed::start().await;
    let client = bed.client();
    let dir = bed.dir();
    let mut config = bed.agent_config(NODE, testkit::node::pod_sandbox());
    config.zone = Some("zone-1".into());
    let run_dir = config.run_dir.clone();
    let agent = RunningAgent::start(config);

    let nodes: Api<Node> = Api::all(client.clone());
    let csinodes: Api<CSINode> = Api::all(client.clone());
    // At start, as kubelet: an empty CSINode owned by the Node.
    let node = wait_for("the Node", WAIT, || async {
        nodes.get_opt(NODE).await.map_err(|e| e.to_string())
    })
    .await;
    let csinode = wait_for("the empty CSINode", WAIT, || async {
        csinodes.get_opt(NODE).await.map_err(|e| e.to_string())
    })
    .await;
    assert!(csinode.spec.drivers.is_empty(), "{}", drivers_of(&csinode));
    let owner = &csinode.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), Some(&owner.uid)),
        ("Node", NODE, node.metadata.uid.as_ref())
    );

    // A registrar for a driver with topology and a volume limit.
    let driver_socket = serve_plugin(
        &run_dir,
        TestPlugin {
            name: DRIVER.into(),
            node_id: "storage-node-7".into(),
            topology: HashMap::from([(TOPOLOGY_KEY.into(), "zone-a".into())]),
            max_volumes: 12,
        },
    )
    .await;
    let mut registrar =
        start_registrar(&driver_socket, &run_dir, DRIVER, &dir.join("registrar.log"));
    let csinode = wait_csi_drivers(&client, NODE, &[DRIVER], WAIT).await;
    let entry = csinode
        .spec
        .drivers
        .into_iter()
        .find(|d| d.name == DRIVER)
        .unwrap();
    assert_eq!(entry.node_id, "storage-node-7");
    assert_eq!(entry.topology_keys, Some(vec![TOPOLOGY_KEY.to_string()]));
    assert_eq!(entry.allocatable.and_then(|a| a.count), Some(12));
    let node = nodes.get(NODE).await.unwrap();
    let labels = node.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get(TOPOLOGY_KEY).map(String::as_str),
        Some("zone-a"),
        "{labels:?}"
    );
    assert_eq!(
        annotation_ids(&node),
        Some(BTreeMap::from([(
            DRIVER.to_string(),
            "storage-node-7".to_string()
        )]))
    );
    assert!(
        registrar.child().try_wait().unwrap().is_none(),
        "the registrar exited: {}",
        registrar.log()
    );

    // A driver whose topology contradicts the Node's zone label is refused, and the
    // registrar exits with the agent's reason, as upstream's does.
    let colliding = "colliding.csi.example.com";
    let colliding_socket = serve_plugin(
        &run_dir,
        TestPlugin {
            name: colliding.into(),
            node_id: "x".into(),
            topology: HashMap::from([("topology.kubernetes.io/zone".into(), "zone-2".into())]),
            max_volumes: 0,
        },
    )
    .await;
    let mut refused = start_registrar(
        &colliding_socket,
        &run_dir,
        colliding,
        &dir.join("refused-registrar.log"),
    );
    let status = tokio::time::timeout(WAIT, refused.child().wait())
        .await
        .expect("the refused registrar exits")
        .unwrap();
    let log = refused.log();
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(log.contains("topology value collision"), "{log}");
    let csinode = csinodes.get(NODE).await.unwrap();
    assert!(
        csinode.spec.drivers.iter().all(|d| d.name != colliding),
        "{}",
        drivers_of(&csinode)
    );

    // Stopping the registrar removes its socket: the driver leaves the CSINode and the
    // annotation (the topology label stays, as with kubelet).
    let pid = nix::unistd::Pid::from_raw(i32::try_from(registrar.id().unwrap()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = tokio::time::timeout(WAIT, registrar.child().wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{}", registrar.log());
    wait_for(
        "the driver to leave the CSINode and the Node",
        WAIT,
        || async {
            let csinode = csinodes.get(NODE).await.map_err(|e| e.to_string())?;
            let node = nodes.get(NODE).await.map_err(|e| e.to_string())?;
            let ids = annotation_ids(&node);
            if csinode.spec.drivers.is_empty() && ids.is_none() {
                Ok(Some(()))
            } else {
                Err(format!(
                    "drivers {} annotation {ids:?}",
                    drivers_of(&csinode)
                ))
            }
        },
    )
    .await;

    agent.stop().await;
    bed.shutdown().await;
}
