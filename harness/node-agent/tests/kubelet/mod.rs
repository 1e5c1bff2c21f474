//! What the kubelet API tests share: the run's shared cluster, a test namespace, busybox
//! pods, and the real `kubectl` (the control-plane build's, v1.20) run against it.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use cluster::{Cluster, TestNamespace};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, PostParams};
use kube::runtime::conditions::is_pod_running;
use kube_support::wait::wait_for;
use serde_json::json;

pub const WAIT: Duration = Duration::from_secs(60);

pub async fn setup(prefix: &str) -> (Cluster, TestNamespace) {
    let cluster = Cluster::shared().await.expect("the shared cluster");
    let ns = cluster.namespace(prefix).await.expect("a test namespace");
    (cluster, ns)
}

/// A busybox pod `name` whose container `app` runs `script` with `sh -c`.
pub fn shell_pod(name: &str, script: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": name },
        "spec": {
            "terminationGracePeriodSeconds": 2,
            "containers": [{ "name": "app", "image": "busybox", "command": ["sh", "-c", script] }]
        }
    })
}

pub async fn run_pod(ns: &TestNamespace, manifest: serde_json::Value) -> Pod {
    let pods: Api<Pod> = ns.api();
    let name = manifest["metadata"]["name"].as_str().unwrap().to_string();
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(manifest).unwrap(),
    )
    .await
    .unwrap();
    wait_for(&pods, &name, is_pod_running(), WAIT)
        .await
        .unwrap()
        .unwrap()
}

/// What one kubectl run gave.
#[derive(Debug)]
pub struct Kubectl {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// The control plane's kubectl (v1.20, as the apiserver), else the one on PATH.
pub fn kubectl_binary() -> PathBuf {
    testkit::processes::kubectl_path()
}

pub fn kubectl_command(cluster: &Cluster, args: &[&str]) -> tokio::process::Command {
    kubectl_command_of(&kubectl_binary(), cluster, args)
}

/// A kubectl of 1.30 or later on PATH (WebSocket streams first), when there is one; the
/// test using it says so when there is not.
pub fn recent_kubectl() -> Option<PathBuf> {
    let version = std::process::Command::new("kubectl")
        .args(["version", "--client", "-o", "json"])
        .output();
    let minor = version
        .ok()
        .and_then(|out| serde_json::from_slice::<serde_json::Value>(&out.stdout).ok())
        .and_then(|v| {
            v["clientVersion"]["minor"]
                .as_str()
                .and_then(|m| m.trim_end_matches('+').parse::<u32>().ok())
        });
    if minor.is_none_or(|m| m < 30) {
        eprintln!("no kubectl 1.30+ on PATH (found minor {minor:?}): nothing to check");
        return None;
    }
    Some(PathBuf::from("kubectl"))
}

/// `kubectl` (the binary `kubectl`) with the cluster's kubeconfig and `args`.
pub fn kubectl_command_of(
    kubectl: &std::path::Path,
    cluster: &Cluster,
    args: &[&str],
) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(kubectl);
    command
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig())
        .args(args)
        .kill_on_drop(true);
    command
}

/// Runs kubectl (with `stdin` as its input) and returns what it gave, within 60 s.
pub async fn kubectl_with_input(cluster: &Cluster, args: &[&str], stdin: &[u8]) -> Kubectl {
    use tokio::io::AsyncWriteExt;
    let mut child = kubectl_command(cluster, args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    let mut input = child.stdin.take().unwrap();
    let stdin = stdin.to_vec();
    let writer = tokio::spawn(async move {
        let _ = input.write_all(&stdin).await;
        drop(input);
    });
    let out = tokio::time::timeout(WAIT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("kubectl {args:?} did not end within {WAIT:?}"))
        .unwrap();
    writer.await.unwrap();
    Kubectl {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

pub async fn kubectl(cluster: &Cluster, args: &[&str]) -> Kubectl {
    kubectl_with_input(cluster, args, b"").await
}

/// The kubelet port a node advertises.
pub async fn kubelet_port(cluster: &Cluster, node: &str) -> i32 {
    let nodes: Api<Node> = Api::all(cluster.client());
    nodes
        .get(node)
        .await
        .unwrap()
        .status
        .unwrap()
        .daemon_endpoints
        .unwrap()
        .kubelet_endpoint
        .unwrap()
        .port
}

/// An HTTPS client trusting the cluster CA.
pub fn https_client(cluster: &Cluster) -> reqwest::Client {
    let ca = std::fs::read(cluster.run_dir().join("control-plane/pki/ca.crt")).unwrap();
    reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
        .build()
        .unwrap()
}

/// A free loopback port now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
