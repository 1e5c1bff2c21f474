//! The node agent against a real control plane: registration and lease, pods run to
//! completion, crash loops with back-off, volumes and env inside containers, probes, graceful
//! deletion and re-adoption after an agent restart.
//!
//! One control plane and one in-process agent (identity `system:node:node-a`) serve all the
//! steps (each boot costs seconds).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Secret};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, PostParams};
use node_agent::NodeAgentConfig;
use serde_json::json;
use testkit::node::{NodeBed, RunningAgent, last_container_pid};
use testkit::objects::{
    container_status, delete_and_wait_gone, namespace, phase, wait_event_with_reason, wait_object,
    wait_pod_phase, wait_token_secret,
};
use testkit::processes::is_alive;
use testkit::wait_for;

const NS: &str = "node-test";
const NODE: &str = "node-a";
const WAIT: Duration = Duration::from_secs(60);
/// The `pod-sandbox` helper of the pod-runtime package (built by testkit when missing or stale).
fn sandbox_helper() -> PathBuf {
    testkit::node::pod_sandbox()
}

/// The agent of `node-a` in zone `zone-1`, region `region-1`, with quick lease renewals and
/// crash-loop back-off (1 s, at most 4 s).
fn agent_config(bed: &NodeBed) -> NodeAgentConfig {
    let mut config = bed.agent_config(NODE, sandbox_helper());
    config.zone = Some("zone-1".into());
    config.region = Some("region-1".into());
    config.timings.lease_renew_interval = Duration::from_secs(1);
    config.timings.backoff_initial = Duration::from_secs(1);
    config.timings.backoff_max = Duration::from_secs(4);
    config
}

fn pod(value: serde_json::Value) -> Pod {
    serde_json::from_value(value).unwrap()
}

/// Waits until the pod satisfies `check`, reporting the last seen status.
async fn wait_pod(pods: &Api<Pod>, name: &str, what: &str, check: impl Fn(&Pod) -> bool) -> Pod {
    wait_object(pods, name, what, WAIT, |p| check(p).then_some(())).await
}

fn waiting_reason(p: &Pod) -> Option<String> {
    container_status(p).state?.waiting?.reason
}

fn condition(p: &Pod, type_: &str) -> Option<String> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.clone())
}

async fn exec(config: &NodeAgentConfig, pod: &str, argv: &[&str]) -> String {
    let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
    let out = node_agent::exec(&config.run_dir, NS, pod, "main", &argv)
        .await
        .unwrap();
    assert_eq!(
        out.code(),
        0,
        "{argv:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test]
async fn node_agent_runs_pods_like_a_kubelet() {
    let bed = NodeBed::start().await;
    let client = bed.client();
    let config = agent_config(&bed);
    let agent = RunningAgent::start(config.clone());

    // Registration: labels, annotation, capacity, addresses, nodeInfo, Ready.
    let nodes: Api<Node> = Api::all(client.clone());
    let node = wait_for("node-a Ready", WAIT, || async {
        let Some(node) = nodes.get_opt(NODE).await.map_err(|e| e.to_string())? else {
            return Err("not registered".into());
        };
        let ready = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        Ok(ready.then_some(node))
    })
    .await;
    let labels = node.metadata.labels.clone().unwrap();
    assert_eq!(labels["kubernetes.io/hostname"], NODE);
    assert_eq!(labels["topology.kubernetes.io/zone"], "zone-1");
    assert_eq!(
        labels["failure-domain.beta.kubernetes.io/region"],
        "region-1"
    );
    assert_eq!(
        node.metadata.annotations.unwrap()["volumes.kubernetes.io/controller-managed-attach-detach"],
        "true"
    );
    let status = node.status.unwrap();
    assert_eq!(status.node_info.unwrap().kubelet_version, "v1.20.2");
    assert_eq!(status.allocatable.unwrap()["pods"].0, "110");
    assert!(
        status
            .addresses
            .unwrap()
            .iter()
            .any(|a| a.type_ == "InternalIP" && a.address == "127.0.0.1")
    );

    // The Lease exists and is renewed.
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let first = wait_for("the node lease", WAIT, || async {
        Ok(leases
            .get_opt(NODE)
            .await
            .map_err(|e| e.to_string())?
            .and_then(|l| l.spec?.renew_time))
    })
    .await;
    wait_for("a lease renewal", WAIT, || async {
        let now = leases
            .get(NODE)
            .await
            .map_err(|e| e.to_string())?
            .spec
            .and_then(|s| s.renew_time);
        Ok(now.filter(|t| *t != first))
    })
    .await;

    // A namespace whose default service account has its token (admission needs it in 1.20).
    namespace(&client, NS).await;
    wait_token_secret(&client, NS, WAIT).await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);

    // 1. A bare pod runs to completion.
    let created = Instant::now();
    pods.create(
        &PostParams::default(),
        &pod(json!({
            "metadata": {"name": "hello"},
            "spec": {
                "nodeName": NODE,
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox",
                    "command": ["sh", "-c", "echo hello from $(hostname); sleep 2"]}]
            }
        })),
    )
    .await
    .unwrap();
    let running = wait_pod_phase(&pods, "hello", "Running", WAIT).await;
    let latency = created.elapsed();
    eprintln!("pod create -> Running observed after {latency:?}");
    let cs = container_status(&running);
    assert!(cs.ready && cs.state.unwrap().running.is_some());
    assert_eq!(
        running.status.as_ref().unwrap().pod_ip.as_deref(),
        Some("127.0.0.1")
    );
    assert_eq!(condition(&running, "Ready").as_deref(), Some("True"));
    let done = wait_pod_phase(&pods, "hello", "Succeeded", WAIT).await;
    let terminated = container_status(&done).state.unwrap().terminated.unwrap();
    assert_eq!(terminated.exit_code, 0);
    assert_eq!(terminated.reason.as_deref(), Some("Completed"));
    assert!(terminated.finished_at.is_some() && terminated.container_id.is_some());
    let log = node_agent::logs(&config.run_dir, NS, "hello", "main", false).unwrap();
    assert_eq!(log, "hello from hello\n");
    for reason in ["Pulled", "Created", "Started"] {
        let event = wait_event_with_reason(&client, NS, "hello", reason, WAIT).await;
        assert_eq!(event.source.unwrap().component.as_deref(), Some("kubelet"));
    }

    // A command that cannot run ends the attempt at once: exit 128, StartError.
    pods.create(
        &PostParams::default(),
        &pod(json!({
            "metadata": {"name": "missing"},
            "spec": {
                "nodeName": NODE,
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox", "command": ["/no/such/binary"]}]
            }
        })),
    )
    .await
    .unwrap();
    let failed = wait_pod_phase(&pods, "missing", "Failed", WAIT).await;
    let terminated = container_status(&failed).state.unwrap().terminated.unwrap();
    assert_eq!(terminated.exit_code, 128);
    assert_eq!(terminated.reason.as_deref(), Some("StartError"));
    assert!(
        terminated.message.unwrap().contains("/no/such/binary"),
        "the message names the command"
    );

    // 2. A crashing container is restarted with back-off.
    pods.create(
        &PostParams::default(),
        &pod(json!({
            "metadata": {"name": "crasher"},
            "spec": {
                "nodeName": NODE,
                "containers": [{"name": "main", "image": "busybox",
                    "command": ["sh", "-c", "echo attempt; exit 3"]}]
            }
        })),
    )
    .await
    .unwrap();
    let mut saw_backoff = false;
    let crashed = wait_pod(&pods, "crasher", "restartCount >= 3", |p| {
        container_status(p).restart_count >= 3
    })
    .await;
    let cs = container_status(&crashed);
    let last = cs.last_state.unwrap().terminated.unwrap();
    assert_eq!(last.exit_code, 3);
    assert_eq!(last.reason.as_deref(), Some("Error"));
    assert_eq!(phase(&crashed), "Running");
    if let Some(waiting) = cs.state.unwrap().waiting {
        saw_backoff = waiting.reason.as_deref() == Some("CrashLoopBackOff");
    }
    wait_event_with_reason(&client, NS, "crasher", "BackOff", WAIT).await;
    if !saw_backoff {
        wait_pod(&pods, "crasher", "waiting in CrashLoopBackOff", |p| {
            waiting_reason(p).as_deref() == Some("CrashLoopBackOff")
        })
        .await;
    }
    let previous = node_agent::logs(&config.run_dir, NS, "crasher", "main", true).unwrap();
    assert_eq!(previous, "attempt\n");

    // 3. ConfigMap and Secret volumes, env, downward API, service-account files; a
    // readiness probe.
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    config_maps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "settings"},
                "data": {"greeting": "hi", "LEVEL": "debug"}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "creds"},
                "stringData": {"password": "s3cret", "user": "admin"}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    pods.create(
        &PostParams::default(),
        &pod(json!({
            "metadata": {"name": "configured", "labels": {"app": "demo"}},
            "spec": {
                "nodeName": NODE,
                "volumes": [
                    {"name": "settings", "configMap": {"name": "settings"}},
                    {"name": "creds", "secret": {"secretName": "creds", "defaultMode": 0o400,
                        "items": [{"key": "password", "path": "db/pass"}]}},
                    {"name": "info", "downwardAPI": {"items": [
                        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
                    {"name": "scratch", "emptyDir": {}},
                    // What the ServiceAccount admission plugin adds from 1.21 on.
                    {"name": "api-access", "projected": {"defaultMode": 0o444, "sources": [
                        {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}}
                    ]}}
                ],
                "containers": [{
                    "name": "main", "image": "busybox",
                    "command": ["sh", "-c", "sleep 3600"],
                    "workingDir": "/scratch",
                    "env": [
                        {"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "greeting"}}},
                        {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
                        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                        {"name": "MESSAGE", "value": "$(GREETING) from $(POD_NAME)"}
                    ],
                    "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "CM_"}],
                    "volumeMounts": [
                        {"name": "settings", "mountPath": "/etc/settings"},
                        {"name": "creds", "mountPath": "/etc/creds"},
                        {"name": "info", "mountPath": "/etc/info"},
                        {"name": "scratch", "mountPath": "/scratch"},
                        {"name": "api-access", "mountPath": "/var/run/projected"}
                    ],
                    "readinessProbe": {"exec": {"command": ["test", "-f", "/scratch/ready"]},
                        "periodSeconds": 1, "failureThreshold": 1}
                }]
            }
        })),
    )
    .await
    .unwrap();
    let running = wait_pod_phase(&pods, "configured", "Running", WAIT).await;
    assert!(
        !container_status(&running).ready,
        "not ready before the probe passes"
    );
    assert_eq!(
        exec(&config, "configured", &["cat", "/etc/settings/greeting"]).await,
        "hi"
    );
    assert_eq!(
        exec(&config, "configured", &["cat", "/etc/creds/db/pass"]).await,
        "s3cret"
    );
    assert_eq!(
        exec(
            &config,
            "configured",
            &["stat", "-c", "%a", "/etc/creds/db/pass"]
        )
        .await
        .trim(),
        "400"
    );
    assert_eq!(
        exec(&config, "configured", &["cat", "/etc/info/labels"]).await,
        "app=\"demo\""
    );
    assert_eq!(
        exec(&config, "configured", &["pwd"]).await.trim(),
        "/scratch"
    );
    let env = exec(&config, "configured", &["env"]).await;
    let env: BTreeMap<&str, &str> = env.lines().filter_map(|l| l.split_once('=')).collect();
    assert_eq!(env["GREETING"], "hi");
    assert_eq!(env["PASSWORD"], "s3cret");
    assert_eq!(env["POD_NAME"], "configured");
    assert_eq!(env["NODE"], NODE);
    assert_eq!(env["MESSAGE"], "hi from configured");
    assert_eq!(env["CM_LEVEL"], "debug");
    assert_eq!(env["KUBERNETES_SERVICE_HOST"], "127.0.0.1");
    assert_eq!(
        env["KUBERNETES_SERVICE_PORT"],
        bed.cp.ports().apiserver.to_string()
    );
    let sa = "/var/run/secrets/kubernetes.io/serviceaccount";
    assert_eq!(
        exec(&config, "configured", &["cat", &format!("{sa}/namespace")]).await,
        NS
    );
    let ca = exec(&config, "configured", &["cat", &format!("{sa}/ca.crt")]).await;
    assert_eq!(
        ca.trim(),
        std::fs::read_to_string(bed.cp.ca_file()).unwrap().trim()
    );
    assert!(
        !exec(&config, "configured", &["cat", &format!("{sa}/token")])
            .await
            .is_empty()
    );
    let projected = "/var/run/projected";
    assert_eq!(
        exec(
            &config,
            "configured",
            &["cat", &format!("{projected}/namespace")]
        )
        .await,
        NS
    );
    let projected_ca = exec(
        &config,
        "configured",
        &["cat", &format!("{projected}/ca.crt")],
    )
    .await;
    assert_eq!(projected_ca, ca);
    let token = exec(
        &config,
        "configured",
        &["cat", &format!("{projected}/token")],
    )
    .await;
    assert_eq!(token.split('.').count(), 3, "a JWT");
    // Secret and ConfigMap volumes are read-only.
    let argv = ["sh", "-c", "echo x > /etc/settings/new"].map(String::from);
    let out = node_agent::exec(&config.run_dir, NS, "configured", "main", &argv)
        .await
        .unwrap();
    assert_ne!(out.code(), 0, "wrote into a configMap volume");
    exec(&config, "configured", &["touch", "/scratch/ready"]).await;
    wait_pod(&pods, "configured", "Ready", |p| {
        condition(p, "Ready").as_deref() == Some("True")
    })
    .await;

    // Missing references: the pod waits (FailedMount; CreateContainerConfigError) and starts
    // once they exist.
    for (name, volumes, env, mounts) in [
        (
            "late-volume",
            json!([{"name": "later", "configMap": {"name": "later"}}]),
            json!([]),
            json!([{"name": "later", "mountPath": "/later"}]),
        ),
        (
            "late-env",
            json!([]),
            json!([{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "later", "key": "x"}}}]),
            json!([]),
        ),
    ] {
        pods.create(
            &PostParams::default(),
            &pod(json!({
                "metadata": {"name": name},
                "spec": {
                    "nodeName": NODE,
                    "volumes": volumes,
                    "containers": [{"name": "main", "image": "busybox",
                        "command": ["sleep", "3600"], "env": env, "volumeMounts": mounts}]
                }
            })),
        )
        .await
        .unwrap();
    }
    let mount_failure =
        wait_event_with_reason(&client, NS, "late-volume", "FailedMount", WAIT).await;
    assert!(mount_failure.message.unwrap().contains("\"later\""));
    wait_pod(&pods, "late-env", "CreateContainerConfigError", |p| {
        waiting_reason(p).as_deref() == Some("CreateContainerConfigError")
    })
    .await;
    wait_event_with_reason(&client, NS, "late-env", "Failed", WAIT).await;
    config_maps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "later"}, "data": {"x": "1"}}))
                .unwrap(),
        )
        .await
        .unwrap();
    for name in ["late-volume", "late-env"] {
        wait_pod_phase(&pods, name, "Running", WAIT).await;
        pods.delete(name, &DeleteParams::default()).await.unwrap();
    }

    // 4. Agent restart: the container keeps running (same pid), the status stays.
    let before = wait_pod(&pods, "configured", "ready", |p| container_status(p).ready).await;
    let uid = before.metadata.uid.clone().unwrap();
    let main_pid = || last_container_pid(&config.runtime_dir(), &sandbox_helper(), &uid);
    let pid = main_pid();
    agent.stop().await;
    assert!(is_alive(pid), "the container survives the agent");
    let agent = RunningAgent::start(config.clone());
    // The new agent re-adopts it: the pod is still managed (exec works, probe keeps it ready),
    // and nothing restarted.
    let restarted_at = Timestamp::now();
    wait_for("the restarted agent's lease renewal", WAIT, || async {
        let renewed = leases
            .get(NODE)
            .await
            .map_err(|e| e.to_string())?
            .spec
            .and_then(|s| s.renew_time)
            .is_some_and(|t| t.0 > restarted_at);
        Ok(renewed.then_some(()))
    })
    .await;
    exec(&config, "configured", &["rm", "/scratch/ready"]).await;
    wait_pod(
        &pods,
        "configured",
        "unready after the readiness file is gone",
        |p| !container_status(p).ready,
    )
    .await;
    let after = pods.get("configured").await.unwrap();
    assert_eq!(main_pid(), pid, "same process after the agent restart");
    let (b, a) = (container_status(&before), container_status(&after));
    assert_eq!(a.restart_count, 0);
    assert_eq!(a.container_id, b.container_id);
    assert_eq!(
        a.state.unwrap().running.unwrap().started_at,
        b.state.unwrap().running.unwrap().started_at
    );
    assert_eq!(
        after.status.as_ref().unwrap().start_time,
        before.status.as_ref().unwrap().start_time
    );

    // 5. Graceful deletion: SIGTERM reaches the container, then the pod object goes.
    let marker_dir = tempfile::Builder::new()
        .prefix("node-agent-")
        .tempdir()
        .unwrap();
    pods.create(
        &PostParams::default(),
        &pod(json!({
            "metadata": {"name": "graceful"},
            "spec": {
                "nodeName": NODE,
                "terminationGracePeriodSeconds": 30,
                "volumes": [{"name": "out", "hostPath": {"path": marker_dir.path(), "type": "Directory"}}],
                "containers": [{"name": "main", "image": "busybox",
                    "command": ["sh", "-c", "trap 'echo TERM > /out/signal; exit 0' TERM; while true; do sleep 0.1; done"],
                    "volumeMounts": [{"name": "out", "mountPath": "/out"}]}]
            }
        })),
    )
    .await
    .unwrap();
    wait_pod_phase(&pods, "graceful", "Running", WAIT).await;
    let deleted = Instant::now();
    delete_and_wait_gone(&pods, "graceful", WAIT).await;
    let took = deleted.elapsed();
    assert_eq!(
        std::fs::read_to_string(marker_dir.path().join("signal")).unwrap(),
        "TERM\n"
    );
    assert!(
        took < Duration::from_secs(20),
        "deletion waited for the grace period: {took:?}"
    );
    wait_event_with_reason(&client, NS, "graceful", "Killing", WAIT).await;

    // The re-adopted pod is deleted too (the new agent manages it).
    delete_and_wait_gone(&pods, "configured", WAIT).await;
    assert!(!is_alive(pid), "the container ended with its pod");

    agent.stop().await;
    bed.shutdown().await;
}
