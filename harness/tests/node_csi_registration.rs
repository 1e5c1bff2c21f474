//! kubelet's CSI plugin registration in the node agent, with the real `node-driver-registrar`
//! binary against an in-test CSI Identity+Node server, on a real control plane: the CSINode
//! entry (node id, topology keys, allocatable count), the Node's topology label and nodeid
//! annotation, a refused registration ending the registrar, and deregistration when the
//! registrar stops.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod control_plane_support;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use control_plane_support::wait_for;
use csi_proto::v1::identity_server::{Identity, IdentityServer};
use csi_proto::v1::node_server::{Node as CsiNode, NodeServer};
use csi_proto::v1::{
    GetPluginCapabilitiesRequest, GetPluginCapabilitiesResponse, GetPluginInfoRequest,
    GetPluginInfoResponse, NodeGetInfoRequest, NodeGetInfoResponse, ProbeRequest, ProbeResponse,
    Topology,
};
use csi_proto::{Endpoint, Listener};
use harness::control_plane::{ClientIdentity, ControlPlane};
use harness::node::csi::NODE_ID_ANNOTATION;
use harness::node::{NodeAgent, NodeAgentConfig};
use harness::runtime::Lifeline;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::CSINode;
use kube::api::Api;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};
use tonic::{Request, Response, Status};

const NODE: &str = "csi-node-a";
const DRIVER: &str = "registration-test.csi.example.com";
const TOPOLOGY_KEY: &str = "topology.registration-test.csi.example.com/zone";
const WAIT: Duration = Duration::from_secs(60);

/// A CSI plugin answering Identity and NodeGetInfo only.
#[derive(Clone)]
struct TestPlugin {
    name: String,
    node_id: String,
    topology: HashMap<String, String>,
    max_volumes: i64,
}

#[tonic::async_trait]
impl Identity for TestPlugin {
    async fn get_plugin_info(
        &self,
        _: Request<GetPluginInfoRequest>,
    ) -> Result<Response<GetPluginInfoResponse>, Status> {
        Ok(Response::new(GetPluginInfoResponse {
            name: self.name.clone(),
            vendor_version: "0.0.1".into(),
            manifest: Default::default(),
        }))
    }
    async fn get_plugin_capabilities(
        &self,
        _: Request<GetPluginCapabilitiesRequest>,
    ) -> Result<Response<GetPluginCapabilitiesResponse>, Status> {
        Ok(Response::new(GetPluginCapabilitiesResponse::default()))
    }
    async fn probe(&self, _: Request<ProbeRequest>) -> Result<Response<ProbeResponse>, Status> {
        Ok(Response::new(ProbeResponse { ready: Some(true) }))
    }
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

/// Serves `plugin` on `<run_dir>/plugins/<name>/csi.sock`, where kubelet's
/// `/var/lib/kubelet/plugins/<name>/csi.sock` is on this node.
async fn serve_plugin(run_dir: &Path, plugin: TestPlugin) -> PathBuf {
    let dir = run_dir.join("plugins").join(&plugin.name);
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("csi.sock");
    let listener = Listener::bind(&Endpoint::Unix(socket.clone()))
        .await
        .unwrap();
    let router = tonic::transport::Server::builder()
        .add_service(IdentityServer::new(plugin.clone()))
        .add_service(NodeServer::new(plugin));
    tokio::spawn(csi_proto::serve(router, listener, std::future::pending()));
    socket
}

/// The registrar binary, built if missing or stale.
fn registrar_binary() -> PathBuf {
    harness::workspace::binary("node-driver-registrar", "node-driver-registrar").unwrap()
}

fn start_registrar(binary: &Path, driver_socket: &Path, run_dir: &Path, driver: &str) -> Child {
    Command::new(binary)
        .arg(format!("--csi-address={}", driver_socket.display()))
        .arg(format!(
            "--kubelet-registration-path=/var/lib/kubelet/plugins/{driver}/csi.sock"
        ))
        .arg(format!(
            "--plugin-registration-path={}",
            run_dir.join("plugins_registry").display()
        ))
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

async fn stderr_of(child: &mut Child) -> String {
    let mut text = String::new();
    if let Some(mut stderr) = child.stderr.take() {
        stderr.read_to_string(&mut text).await.unwrap();
    }
    text
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
    let _ = tracing_subscriber::fmt()
        .with_env_filter("harness=info")
        .with_test_writer()
        .try_init();
    let registrar = registrar_binary();
    let cp = ControlPlane::builder()
        .start()
        .await
        .expect("control plane starts");
    let client = cp.client();
    let dir = harness::runtime::host_mounts::ScratchDir::new().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    cp.write_kubeconfig(
        &kubeconfig,
        &ClientIdentity {
            user: format!("system:node:{NODE}"),
            group: Some("system:nodes".into()),
        },
    )
    .unwrap();
    let run_dir = dir.path().join("node");
    let mut config = NodeAgentConfig::new(
        NODE,
        kubeconfig,
        &run_dir,
        cp.ports().apiserver,
        cp.ca_file(),
    );
    config.zone = Some("zone-1".into());
    config.sandbox_helper = Some(PathBuf::from(env!("CARGO_BIN_EXE_pod-sandbox")));
    config.lifeline = Some(Lifeline::this_process().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let agent = tokio::spawn(NodeAgent::run(config, async move {
        let _ = stopped.await;
    }));

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
    let mut child = start_registrar(&registrar, &driver_socket, &run_dir, DRIVER);
    let entry = wait_for("the driver in the CSINode", WAIT, || async {
        let csinode = csinodes.get(NODE).await.map_err(|e| e.to_string())?;
        Ok(csinode
            .spec
            .drivers
            .iter()
            .find(|d| d.name == DRIVER)
            .cloned())
    })
    .await;
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
    assert!(child.try_wait().unwrap().is_none(), "the registrar exited");

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
    let mut refused = start_registrar(&registrar, &colliding_socket, &run_dir, colliding);
    let status = tokio::time::timeout(WAIT, refused.wait())
        .await
        .expect("the refused registrar exits")
        .unwrap();
    let log = stderr_of(&mut refused).await;
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
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id().unwrap()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = tokio::time::timeout(WAIT, child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{}", stderr_of(&mut child).await);
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

    stop.send(()).unwrap();
    agent.await.unwrap().expect("the agent stops cleanly");
    cp.shutdown().await.unwrap();
}
