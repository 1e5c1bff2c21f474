//! The `node-agent` binary against a real control plane: init containers, OnFailure restarts,
//! liveness/httpGet/tcpSocket probes, an in-cluster client under its service account's RBAC,
//! and a SIGTERM'd agent whose pods keep running and are re-adopted by the next one.
//!
//! One control plane serves all the steps (each boot costs seconds).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use control_plane::ControlPlane;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, PostParams};
use pod_runtime::Lifeline;
use serde_json::json;
use testkit::node::{NodeBed, last_container_pid, write_node_kubeconfig};
use testkit::objects::{
    container_status, delete_and_wait_gone, namespace, wait_event, wait_object, wait_pod_phase,
    wait_token_secret,
};
use testkit::processes::{is_alive, kubectl_path};
use tokio::process::{Child, Command};

const NS: &str = "agent-bin";
const NODE: &str = "node-b";
const WAIT: Duration = Duration::from_secs(60);
/// The `pod-sandbox` helper of the pod-runtime package (built by testkit when missing or stale).
fn sandbox_helper() -> PathBuf {
    testkit::node::pod_sandbox()
}

fn start_agent(cp: &ControlPlane, dir: &Path) -> Child {
    let (var, fd) = Lifeline::this_process().unwrap().env();
    Command::new(env!("CARGO_BIN_EXE_node-agent"))
        .arg("--node-name")
        .arg(NODE)
        .arg("--zone")
        .arg("zone-b")
        .arg("--kubeconfig")
        .arg(dir.join("kubeconfig"))
        .arg("--run-dir")
        .arg(dir.join("node"))
        .arg("--cluster-ca")
        .arg(cp.ca_file())
        .arg("--api-server-port")
        .arg(cp.ports().apiserver.to_string())
        .arg("--backoff-initial-seconds")
        .arg("0.5")
        .arg("--backoff-max-seconds")
        .arg("2")
        .arg("--sandbox-helper")
        .arg(sandbox_helper())
        .env(var, fd)
        .env(
            "RUST_LOG",
            "cluster=info,node_agent=info,control_plane=info,pod_runtime=info",
        )
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("node-agent starts")
}

async fn stop_agent(mut agent: Child) {
    let pid = nix::unistd::Pid::from_raw(agent.id().unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = tokio::time::timeout(WAIT, agent.wait())
        .await
        .expect("the agent exits after SIGTERM")
        .unwrap();
    assert!(status.success(), "node-agent exited with {status}");
}

fn pod(value: serde_json::Value) -> Pod {
    serde_json::from_value(value).unwrap()
}

/// Waits until the pod satisfies `check`, reporting the last seen status.
async fn wait_pod(pods: &Api<Pod>, name: &str, what: &str, check: impl Fn(&Pod) -> bool) -> Pod {
    wait_object(pods, name, what, WAIT, |p| check(p).then_some(())).await
}

fn free_port() -> u16 {
    TcpListener::bind(("127.0.0.1", 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test]
async fn node_agent_binary_runs_workloads_and_survives_restarts() {
    let bed = NodeBed::start().await;
    let client = bed.client();
    let dir = bed.dir();
    write_node_kubeconfig(&bed.cp, &dir.join("kubeconfig"), NODE);
    let agent = start_agent(&bed.cp, dir);

    namespace(&client, NS).await;
    wait_token_secret(&client, NS, WAIT).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);

    // Init containers run in order before the main one; OnFailure restarts a failure.
    pods.create(
        &PostParams::default(),
        &pod(json!({
            "metadata": {"name": "staged"},
            "spec": {
                "nodeName": NODE,
                "restartPolicy": "OnFailure",
                "volumes": [{"name": "work", "emptyDir": {}}],
                "initContainers": [
                    {"name": "first", "image": "busybox", "command": ["sh", "-c", "echo one > /work/log"],
                     "volumeMounts": [{"name": "work", "mountPath": "/work"}]},
                    {"name": "second", "image": "busybox", "command": ["sh", "-c", "echo two >> /work/log"],
                     "volumeMounts": [{"name": "work", "mountPath": "/work"}]}
                ],
                "containers": [{"name": "main", "image": "busybox",
                    "command": ["sh", "-c", "test -f /work/failed-once || { touch /work/failed-once; exit 1; }; cat /work/log"],
                    "volumeMounts": [{"name": "work", "mountPath": "/work"}]}]
            }
        })),
    )
    .await
    .unwrap();
    let staged = wait_pod_phase(&pods, "staged", "Succeeded", WAIT).await;
    let init = staged
        .status
        .as_ref()
        .unwrap()
        .init_container_statuses
        .clone()
        .unwrap();
    assert_eq!(init.len(), 2);
    for status in &init {
        let t = status.state.clone().unwrap().terminated.unwrap();
        assert_eq!(
            (t.exit_code, t.reason.as_deref()),
            (0, Some("Completed")),
            "{}",
            status.name
        );
    }
    assert_eq!(container_status(&staged).restart_count, 1);
    let log = node_agent::logs(&dir.join("node"), NS, "staged", "main", false).unwrap();
    assert_eq!(log, "one\ntwo\n");

    // Probes: httpGet readiness and tcpSocket liveness against the pod's (host) port; an exec
    // liveness probe that starts failing gets the container restarted.
    let port = free_port();
    pods.create(
        &PostParams::default(),
        &pod(json!({
            "metadata": {"name": "web"},
            "spec": {
                "nodeName": NODE,
                "containers": [{"name": "main", "image": "busybox",
                    "command": ["python3", "-m", "http.server", "--bind", "127.0.0.1", port.to_string()],
                    "workingDir": "/tmp",
                    "ports": [{"name": "http", "containerPort": port}],
                    "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 1},
                    "livenessProbe": {"tcpSocket": {"port": port}, "periodSeconds": 1}}]
            }
        })),
    )
    .await
    .unwrap();
    wait_pod(&pods, "web", "ready", |p| container_status(p).ready).await;
    pods.create(
        &PostParams::default(),
        &pod(json!({
            "metadata": {"name": "unhealthy"},
            "spec": {
                "nodeName": NODE,
                "terminationGracePeriodSeconds": 2,
                "containers": [{"name": "main", "image": "busybox",
                    "command": ["sh", "-c", "touch /tmp/alive; sleep 2; rm /tmp/alive; sleep 3600"],
                    "livenessProbe": {"exec": {"command": ["test", "-f", "/tmp/alive"]},
                        "periodSeconds": 1, "failureThreshold": 1}}]
            }
        })),
    )
    .await
    .unwrap();
    wait_pod(&pods, "unhealthy", "restarted", |p| {
        container_status(p).restart_count >= 1
    })
    .await;
    wait_event(
        &client,
        NS,
        "unhealthy",
        "Killing",
        "failed liveness probe",
        WAIT,
    )
    .await;
    wait_event(
        &client,
        NS,
        "unhealthy",
        "Unhealthy",
        "Liveness probe failed",
        WAIT,
    )
    .await;

    // An in-cluster client (kubectl without kubeconfig) gets exactly what its Role grants.
    let roles: Api<Role> = Api::namespaced(client.clone(), NS);
    roles
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "pod-reader"},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), NS);
    bindings
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "pod-reader"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
                "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": NS}]
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let kubectl = kubectl_path();
    pods.create(
        &PostParams::default(),
        &pod(json!({
            "metadata": {"name": "client"},
            "spec": {
                "nodeName": NODE,
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox",
                    "env": [{"name": "HOME", "value": "/tmp"}],
                    "command": ["sh", "-c", format!(
                        "{k} get pods -o name; echo pods=$?; {k} get secrets -o name; echo secrets=$?",
                        k = kubectl.display())]}]
            }
        })),
    )
    .await
    .unwrap();
    wait_pod_phase(&pods, "client", "Succeeded", WAIT).await;
    let log = node_agent::logs(&dir.join("node"), NS, "client", "main", false).unwrap();
    assert!(
        log.contains("pod/client") && log.contains("pods=0"),
        "{log}"
    );
    assert!(
        log.contains("secrets=1") && log.contains("forbidden"),
        "{log}"
    );

    // SIGTERM: the agent exits cleanly, the pods keep running; the next agent adopts them.
    let web = pods.get("web").await.unwrap();
    let before = container_status(&web);
    let web_pid = last_container_pid(
        &dir.join("node/runtime"),
        &sandbox_helper(),
        web.metadata.uid.as_deref().unwrap(),
    );
    stop_agent(agent).await;
    assert!(is_alive(web_pid), "the web server survives the agent");
    let agent = start_agent(&bed.cp, dir);
    // The new agent manages it: deleting the pod stops it.
    let after = wait_pod(&pods, "web", "still ready", |p| container_status(p).ready).await;
    assert_eq!(container_status(&after).container_id, before.container_id);
    assert_eq!(container_status(&after).restart_count, before.restart_count);
    delete_and_wait_gone(&pods, "web", WAIT).await;
    assert!(!is_alive(web_pid), "the web server ended with its pod");

    stop_agent(agent).await;
    bed.shutdown().await;
}
