//! The containers backend: a control plane and two nodes, each in its own container on a
//! private network. Nodes and their pods have addresses of their own; exec and logs go
//! through the apiserver to each node's kubelet API by the node container's name; a frozen
//! node and a node cut off the network turn NotReady and come back; a stopped cluster leaves no container, network or
//! directory.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::Duration;

use cluster::containers::{LabelledObject, labelled_objects};
use cluster::embedded::is_node_ready;
use cluster::{ContainerCluster, ContainerOptions, NodeAction};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, PostParams};
use kube::runtime::conditions::is_pod_running;
use kube_support::wait::{wait_for, wait_until};

const WAIT: Duration = Duration::from_secs(90);

fn pod_on(node: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": format!("on-{node}") },
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "containers": [{
                "name": "app",
                "image": "busybox",
                "command": ["sh", "-c", "echo started on $(hostname); exec sleep 3600"],
            }],
        },
    }))
    .unwrap()
}

fn internal_ip(node: &Node) -> String {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .and_then(|a| a.iter().find(|a| a.type_ == "InternalIP"))
        .map(|a| a.address.clone())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_in_containers_have_their_own_addresses_and_can_be_frozen() {
    testkit::init_tracing("cluster=info,node_agent=info,control_plane=info,pod_runtime=info");
    let cluster = ContainerCluster::start(ContainerOptions {
        nodes: 2,
        zones: vec!["zone-a".into(), "zone-b".into()],
        // A frozen node is NotReady within seconds rather than Kubernetes' 40.
        controller_manager_args: vec![
            "--node-monitor-grace-period=12s".into(),
            "--node-monitor-period=2s".into(),
        ],
        ..Default::default()
    })
    .await
    .expect("the container cluster starts");
    let run_dir = cluster.run_dir().display().to_string();
    let gateway = cluster.network().gateway();
    let handle = cluster.cluster().await.unwrap();
    let client = handle.client();
    assert!(handle.has_node_machines());

    // Each node reports its own address on the network, not loopback.
    let nodes: Api<Node> = Api::all(client.clone());
    let mut addresses = BTreeSet::new();
    for name in ["node-1", "node-2"] {
        let node = nodes.get(name).await.unwrap();
        let ip: std::net::IpAddr = internal_ip(&node).parse().unwrap();
        assert!(!ip.is_loopback() && ip != gateway, "{name}: {ip}");
        addresses.insert(ip);
    }
    assert_eq!(addresses.len(), 2, "{addresses:?}");

    // A pod on each node runs with its node's address; exec and logs reach it through the
    // apiserver and the node's kubelet API.
    let ns = handle.namespace("containers").await.unwrap();
    let pods: Api<Pod> = ns.api();
    for node in ["node-1", "node-2"] {
        pods.create(&PostParams::default(), &pod_on(node))
            .await
            .unwrap();
    }
    for node in ["node-1", "node-2"] {
        let name = format!("on-{node}");
        let pod = wait_for(&pods, &name, is_pod_running(), WAIT)
            .await
            .unwrap();
        let pod_ip = pod
            .unwrap()
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.clone())
            .unwrap();
        assert_eq!(pod_ip, internal_ip(&nodes.get(node).await.unwrap()));
        let out = handle
            .exec(ns.name(), &name, "app", &["cat", "/etc/hostname"])
            .await
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), name);
        wait_until(format!("the log of {name}"), WAIT, || async {
            let log = handle
                .logs(ns.name(), &name, "app", false)
                .await
                .map_err(|e| e.to_string())?;
            Ok(log.contains(&format!("started on {name}")).then_some(())).map_err(|_: ()| log)
        })
        .await
        .unwrap();
    }

    // Frozen, node-2 stops renewing its Lease and turns NotReady; thawed, Ready again.
    handle
        .node_action("node-2", NodeAction::Pause)
        .await
        .unwrap();
    wait_for(
        &nodes,
        "node-2",
        |n: Option<&Node>| n.is_some_and(|n| !is_node_ready(n)),
        WAIT,
    )
    .await
    .unwrap();
    assert!(is_node_ready(&nodes.get("node-1").await.unwrap()));
    handle
        .node_action("node-2", NodeAction::Unpause)
        .await
        .unwrap();
    wait_for(
        &nodes,
        "node-2",
        |n: Option<&Node>| n.is_some_and(is_node_ready),
        WAIT,
    )
    .await
    .unwrap();

    // Cut off the network, node-1 turns NotReady too; connected again, Ready, and its pods
    // are reached again through the apiserver.
    handle
        .node_action("node-1", NodeAction::Disconnect)
        .await
        .unwrap();
    wait_for(
        &nodes,
        "node-1",
        |n: Option<&Node>| n.is_some_and(|n| !is_node_ready(n)),
        WAIT,
    )
    .await
    .unwrap();
    handle
        .node_action("node-1", NodeAction::Reconnect)
        .await
        .unwrap();
    wait_for(
        &nodes,
        "node-1",
        |n: Option<&Node>| n.is_some_and(is_node_ready),
        WAIT,
    )
    .await
    .unwrap();
    wait_until("exec on node-1 after it is back", WAIT, || async {
        match handle.exec(ns.name(), "on-node-1", "app", &["true"]).await {
            Ok(out) if out.status.success() => Ok(Some(())),
            Ok(out) => Err(format!("{out:?}")),
            Err(e) => Err(e.to_string()),
        }
    })
    .await
    .unwrap();

    // The embedded backend's agent restart is refused here, with the reason.
    let err = handle
        .restart_node_agent("node-1")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("embedded backend"), "{err}");

    ns.cleanup().await.unwrap();
    cluster.stop().await.unwrap();
    let left: Vec<LabelledObject> = labelled_objects()
        .await
        .unwrap()
        .into_iter()
        .filter(|o| o.run_dir.as_os_str() == run_dir.as_str())
        .collect();
    assert_eq!(left, Vec::new());
    assert!(!std::path::Path::new(&run_dir).exists());
}
