//! The kind backend: a control-plane node and two workers, real kubelets and containerd in
//! node containers, bootstrapped with kubeadm. Nodes register with their zones; pods on
//! different nodes reach each other across the pod network and the `kubernetes` Service
//! through kube-proxy; an image made from one of the project's binaries is imported into the
//! nodes' containerd and runs; a stopped cluster leaves no container, network, cgroup or
//! directory.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use cluster::containers::{LabelledObject, labelled_objects};
use cluster::kind::{self, KindNodeImage};
use cluster::{KindCluster, KindOptions};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, PostParams};
use kube::runtime::conditions::is_pod_running;
use kube_support::wait::{wait_for, wait_until};

const WAIT: Duration = Duration::from_secs(120);

/// The image the project binary is imported as.
const PROJECT_IMAGE: &str = "localhost/openstack-csi-conformance/node-agent:test";

/// A pod's PID 1 gets no signal it has no handler for, so a bare `sleep` sits out the whole
/// 30 s grace period on deletion (and the namespace's deletion with it); this one stops at
/// SIGTERM, as a well-behaved application does.
const SLEEP_UNTIL_TERM: &str = "sleep 3600 & trap 'kill $!; exit 0' TERM; wait";

fn pod(name: &str, node: &str, image: &str, command: &[&str]) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name },
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "containers": [{
                "name": "app",
                "image": image,
                "imagePullPolicy": "Never",
                "command": command,
            }],
        },
    }))
    .unwrap()
}

fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_cluster_runs_pods_across_nodes_with_services_and_project_images() {
    testkit::init_tracing("cluster=info,node_agent=info,control_plane=info,pod_runtime=info");
    let work = tempfile::tempdir().unwrap();
    let archive = work.path().join("node-agent.tar");
    kind::project_image_archive(
        PROJECT_IMAGE,
        &[cluster::embedded::locate_node_agent().expect("the node-agent binary")],
        &archive,
    )
    .await
    .expect("the project image archive is built");

    // The local image on every machine (its busybox image is what the pods run; a machine
    // with kindest/node would otherwise use that).
    let image = kind::local_kind_node_image().await.unwrap();
    let cluster = KindCluster::start(KindOptions {
        nodes: 2,
        zones: vec!["zone-a".into(), "zone-b".into()],
        image_archives: vec![archive],
        image: Some(image),
        ..Default::default()
    })
    .await
    .expect("the kind cluster starts");
    let run_dir = cluster.run_dir().display().to_string();
    assert!(matches!(cluster.image(), KindNodeImage::Local(_)));
    let busybox = "localhost/openstack-csi-conformance/busybox:bookworm";
    let handle = cluster.cluster().await.unwrap();
    let client = handle.client();
    assert_eq!(handle.node_names(), vec!["node-1", "node-2"]);
    assert!(handle.has_node_machines());

    // Real kubelets on containerd, with their zones.
    let nodes: Api<Node> = Api::all(client.clone());
    for (name, zone) in [("node-1", "zone-a"), ("node-2", "zone-b")] {
        let node = nodes.get(name).await.unwrap();
        let info = node
            .status
            .as_ref()
            .and_then(|s| s.node_info.clone())
            .unwrap();
        assert!(
            info.container_runtime_version.starts_with("containerd://"),
            "{info:?}"
        );
        assert_eq!(info.kubelet_version, "v1.20.2");
        assert_eq!(label(&node, "topology.kubernetes.io/zone"), Some(zone));
    }
    // The control plane runs as kubeadm's static pods.
    let static_pods: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
    for component in [
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    ] {
        let name = format!("{component}-{}", kind::CONTROL_PLANE_NODE);
        wait_for(&static_pods, &name, is_pod_running(), WAIT)
            .await
            .unwrap();
    }

    // A server on node-2, a client on node-1: across the pod network, and the apiserver
    // through the `kubernetes` Service (kube-proxy's rules).
    let ns = handle.namespace("kind").await.unwrap();
    let pods: Api<Pod> = ns.api();
    pods.create(
        &PostParams::default(),
        &pod(
            "server",
            "node-2",
            busybox,
            &["sh", "-c", "mkdir -p /www && echo served-by-node-2 >/www/index.html && httpd -f -p 8080 -h /www & trap 'kill $!; exit 0' TERM; wait"],
        ),
    )
    .await
    .unwrap();
    pods.create(
        &PostParams::default(),
        &pod("client", "node-1", busybox, &["sh", "-c", SLEEP_UNTIL_TERM]),
    )
    .await
    .unwrap();
    let server = wait_for(&pods, "server", is_pod_running(), WAIT)
        .await
        .unwrap()
        .unwrap();
    wait_for(&pods, "client", is_pod_running(), WAIT)
        .await
        .unwrap();
    let server_ip = server
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .unwrap();
    assert!(server_ip.starts_with("10.244."), "{server_ip}");
    // busybox's nc (its static wget crashes resolving with glibc's static NSS).
    let request = format!("printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 {server_ip} 8080");
    wait_until(
        "the client on node-1 reaches the server on node-2",
        WAIT,
        || async {
            let out = handle
                .exec(ns.name(), "client", "app", &["sh", "-c", &request])
                .await
                .map_err(|e| e.to_string())?;
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            if text.contains("served-by-node-2") {
                Ok(Some(()))
            } else {
                Err(format!("{out:?}"))
            }
        },
    )
    .await
    .unwrap();
    wait_until(
        "the client reaches the kubernetes Service (10.96.0.1:443)",
        WAIT,
        || async {
            let out = handle
                .exec(
                    ns.name(),
                    "client",
                    "app",
                    &["sh", "-c", "nc -w 3 10.96.0.1 443 </dev/null"],
                )
                .await
                .map_err(|e| e.to_string())?;
            if out.status.success() {
                Ok(Some(()))
            } else {
                Err(format!("{out:?}"))
            }
        },
    )
    .await
    .unwrap();

    // The project's binary, imported as an image, runs in containerd.
    pods.create(
        &PostParams::default(),
        &pod(
            "project",
            "node-1",
            PROJECT_IMAGE,
            &["node-agent", "--help"],
        ),
    )
    .await
    .unwrap();
    let ended = |pod: Option<&Pod>| {
        matches!(
            pod.and_then(|p| p.status.as_ref())
                .and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        )
    };
    let project = wait_for(&pods, "project", ended, WAIT)
        .await
        .unwrap()
        .unwrap();
    let log = handle
        .logs(ns.name(), "project", "app", false)
        .await
        .unwrap();
    assert!(log.contains("Usage"), "{log}");
    assert_eq!(
        project.status.and_then(|s| s.phase).as_deref(),
        Some("Succeeded"),
        "{log}"
    );

    ns.cleanup().await.unwrap();
    let cgroups: Vec<String> = cluster.container_names();
    cluster.stop().await.unwrap();
    let left: Vec<LabelledObject> = labelled_objects()
        .await
        .unwrap()
        .into_iter()
        .filter(|o| o.run_dir.as_os_str() == run_dir.as_str())
        .collect();
    assert_eq!(left, Vec::new());
    assert!(!Path::new(&run_dir).exists());
    for hierarchy in std::fs::read_dir("/sys/fs/cgroup").unwrap().flatten() {
        for name in &cgroups {
            let dir = hierarchy.path().join(name);
            assert!(!dir.exists(), "{} was left", dir.display());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_named_and_a_failed_bootstrap_leaves_nothing_behind() {
    testkit::init_tracing("cluster=info,node_agent=info,control_plane=info,pod_runtime=info");
    // Refused before anything starts.
    let err = KindCluster::start(KindOptions {
        image_archives: vec!["/nonexistent/driver.tar".into()],
        ..Default::default()
    })
    .await
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("image_archives") && err.contains("/nonexistent/driver.tar"),
        "{err}"
    );
    let err = KindCluster::start(KindOptions {
        nodes: 0,
        ..Default::default()
    })
    .await
    .unwrap_err()
    .to_string();
    assert!(err.contains("nodes"), "{err}");

    // An archive containerd cannot import fails the bootstrap on the first node, by name;
    // everything started so far goes with the failed start.
    let work = tempfile::tempdir().unwrap();
    let archive = work.path().join("not-an-image.tar");
    std::fs::write(&archive, "not a tarball").unwrap();
    let err = KindCluster::start(KindOptions {
        nodes: 1,
        image_archives: vec![archive.clone()],
        image: Some(kind::local_kind_node_image().await.unwrap()),
        ..Default::default()
    })
    .await
    .unwrap_err();
    let cluster::Error::Bootstrap {
        node,
        step,
        reason,
        run_dir,
    } = &err
    else {
        panic!("not a bootstrap error: {err}");
    };
    assert_eq!(node, kind::CONTROL_PLANE_NODE, "{err}");
    assert_eq!(step, "importing an image archive", "{err}");
    assert!(reason.contains(&archive.display().to_string()), "{err}");
    let run_dir = run_dir.display().to_string();
    assert!(!Path::new(&run_dir).exists(), "{run_dir} was left");
    wait_until(
        "the failed cluster's containers and network gone",
        WAIT,
        || async {
            let left: Vec<LabelledObject> = labelled_objects()
                .await
                .map_err(|e| e.to_string())?
                .into_iter()
                .filter(|o| o.run_dir.as_os_str() == run_dir.as_str())
                .collect();
            if left.is_empty() {
                Ok(Some(()))
            } else {
                Err(format!("{left:?}"))
            }
        },
    )
    .await
    .unwrap();
    // Nor the nodes' cgroups (named after the containers: ock-<run directory id>-…).
    let id = run_dir
        .rsplit_once("kind-")
        .map(|(_, id)| id.to_ascii_lowercase())
        .unwrap();
    for hierarchy in std::fs::read_dir("/sys/fs/cgroup").unwrap().flatten() {
        for entry in std::fs::read_dir(hierarchy.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = entry.file_name().to_string_lossy().into_owned();
            assert!(!name.starts_with(&format!("ock-{id}-")), "{name} was left");
        }
    }
}
