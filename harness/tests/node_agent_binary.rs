//! The `node-agent` binary against a real control plane: init containers, OnFailure restarts,
//! liveness/httpGet/tcpSocket probes, an in-cluster client under its service account's RBAC,
//! and a SIGTERM'd agent whose pods keep running and are re-adopted by the next one.
//!
//! One control plane serves all the steps (each boot costs seconds).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod control_plane_support;

use std::net::TcpListener;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use control_plane_support::{is_alive, kubectl_path, wait_for};
use harness::control_plane::{ClientIdentity, ControlPlane};
use harness::runtime::Lifeline;
use k8s_openapi::api::core::v1::{ContainerStatus, Event, Namespace, Pod, Secret};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;
use tokio::process::{Child, Command};

const NS: &str = "agent-bin";
const NODE: &str = "node-b";
const WAIT: Duration = Duration::from_secs(60);

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
        .arg(env!("CARGO_BIN_EXE_pod-sandbox"))
        .env(var, fd)
        .env("RUST_LOG", "harness=info")
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

fn summary(pod: &Pod) -> String {
    let status = pod.status.clone().unwrap_or_default();
    format!(
        "phase={:?} init={} containers={}",
        status.phase,
        serde_json::to_string(&status.init_container_statuses).unwrap(),
        serde_json::to_string(&status.container_statuses).unwrap()
    )
}

async fn wait_pod(pods: &Api<Pod>, name: &str, what: &str, check: impl Fn(&Pod) -> bool) -> Pod {
    wait_for(&format!("pod {name}: {what}"), WAIT, || async {
        match pods.get_opt(name).await.map_err(|e| e.to_string())? {
            Some(p) if check(&p) => Ok(Some(p)),
            Some(p) => Err(summary(&p)),
            None => Err("no such pod".into()),
        }
    })
    .await
}

async fn wait_gone(pods: &Api<Pod>, name: &str) {
    wait_for(&format!("pod {name} to disappear"), WAIT, || async {
        match pods.get_opt(name).await.map_err(|e| e.to_string())? {
            None => Ok(Some(())),
            Some(p) => Err(summary(&p)),
        }
    })
    .await
}

fn phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn main_status(p: &Pod) -> ContainerStatus {
    p.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first().cloned())
        .unwrap_or_default()
}

async fn wait_event_message(client: &Client, pod: &str, reason: &str, needle: &str) {
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    wait_for(
        &format!("event {reason} ({needle}) for {pod}"),
        WAIT,
        || async {
            let list = events
                .list(&ListParams::default().fields(&format!("involvedObject.name={pod}")))
                .await
                .map_err(|e| e.to_string())?;
            let found = list.items.iter().any(|e| {
                e.reason.as_deref() == Some(reason)
                    && e.message.as_deref().is_some_and(|m| m.contains(needle))
            });
            if found {
                Ok(Some(()))
            } else {
                Err(format!(
                    "seen: {:?}",
                    list.items
                        .iter()
                        .map(|e| (e.reason.clone(), e.message.clone()))
                        .collect::<Vec<_>>()
                ))
            }
        },
    )
    .await
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
    let cp = ControlPlane::builder()
        .start()
        .await
        .expect("control plane starts");
    let client = cp.client();
    let dir = harness::runtime::host_mounts::ScratchDir::new().unwrap();
    cp.write_kubeconfig(
        &dir.path().join("kubeconfig"),
        &ClientIdentity {
            user: format!("system:node:{NODE}"),
            group: Some("system:nodes".into()),
        },
    )
    .unwrap();
    let agent = start_agent(&cp, dir.path());

    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap(),
        )
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    wait_for("the default token secret", WAIT, || async {
        let list = secrets
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        Ok(list
            .items
            .into_iter()
            .find(|s| s.type_.as_deref() == Some("kubernetes.io/service-account-token")))
    })
    .await;
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
    let staged = wait_pod(&pods, "staged", "Succeeded", |p| phase(p) == "Succeeded").await;
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
    assert_eq!(main_status(&staged).restart_count, 1);
    let log = harness::node::logs(&dir.path().join("node"), NS, "staged", "main", false).unwrap();
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
    wait_pod(&pods, "web", "ready", |p| main_status(p).ready).await;
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
        main_status(p).restart_count >= 1
    })
    .await;
    wait_event_message(&client, "unhealthy", "Killing", "failed liveness probe").await;
    wait_event_message(&client, "unhealthy", "Unhealthy", "Liveness probe failed").await;

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
    wait_pod(&pods, "client", "Succeeded", |p| phase(p) == "Succeeded").await;
    let log = harness::node::logs(&dir.path().join("node"), NS, "client", "main", false).unwrap();
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
    let before = main_status(&web);
    let web_pid = {
        let runtime = harness::runtime::Runtime::new(harness::runtime::RuntimeConfig {
            helper: env!("CARGO_BIN_EXE_pod-sandbox").into(),
            ..harness::runtime::RuntimeConfig::new(dir.path().join("node/runtime"))
        })
        .unwrap();
        let sandbox = runtime
            .sandbox(web.metadata.uid.as_deref().unwrap())
            .unwrap()
            .unwrap();
        sandbox.containers().unwrap().last().unwrap().process().pid as u32
    };
    stop_agent(agent).await;
    assert!(is_alive(web_pid), "the web server survives the agent");
    let agent = start_agent(&cp, dir.path());
    // The new agent manages it: deleting the pod stops it.
    let after = wait_pod(&pods, "web", "still ready", |p| main_status(p).ready).await;
    assert_eq!(main_status(&after).container_id, before.container_id);
    assert_eq!(main_status(&after).restart_count, before.restart_count);
    pods.delete("web", &DeleteParams::default()).await.unwrap();
    wait_gone(&pods, "web").await;
    assert!(!is_alive(web_pid), "the web server ended with its pod");

    stop_agent(agent).await;
    cp.shutdown().await.unwrap();
}
