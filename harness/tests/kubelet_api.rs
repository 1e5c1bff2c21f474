//! The node agents' kubelet API as a Kubernetes user meets it: the real `kubectl` (the
//! control-plane build's, v1.20) against the run's shared embedded cluster, through the real
//! apiserver, which dials the node agent's advertised port with its kubelet client
//! certificate. Direct requests check the authentication and authorization of the API.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use harness::cluster::wait::{wait_for, wait_until};
use harness::cluster::{Cluster, TestNamespace};
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{Node, Pod, ServiceAccount};
use kube::api::{Api, PostParams};
use kube::runtime::conditions::is_pod_running;
use rstest::rstest;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

const WAIT: Duration = Duration::from_secs(60);

async fn setup(prefix: &str) -> (Cluster, TestNamespace) {
    let cluster = Cluster::shared().await.expect("the shared cluster");
    let ns = cluster.namespace(prefix).await.expect("a test namespace");
    (cluster, ns)
}

/// A busybox pod `name` whose container `app` runs `script` with `sh -c`.
fn shell_pod(name: &str, script: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": name },
        "spec": {
            "terminationGracePeriodSeconds": 2,
            "containers": [{ "name": "app", "image": "busybox", "command": ["sh", "-c", script] }]
        }
    })
}

async fn run_pod(ns: &TestNamespace, manifest: serde_json::Value) -> Pod {
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
struct Kubectl {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// The control plane's kubectl (v1.20, as the apiserver), else the one on PATH.
fn kubectl_binary() -> PathBuf {
    testkit::processes::kubectl_path()
}

fn kubectl_command(cluster: &Cluster, args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(kubectl_binary());
    command
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig())
        .args(args)
        .kill_on_drop(true);
    command
}

/// Runs kubectl (with `stdin` as its input) and returns what it gave, within 60 s.
async fn kubectl_with_input(cluster: &Cluster, args: &[&str], stdin: &[u8]) -> Kubectl {
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

async fn kubectl(cluster: &Cluster, args: &[&str]) -> Kubectl {
    kubectl_with_input(cluster, args, b"").await
}

/// Waits until the log of `app` of `pod` (kubectl logs, with `extra` flags) holds `want`.
async fn wait_log(cluster: &Cluster, ns: &TestNamespace, pod: &str, extra: &[&str], want: &str) {
    wait_until(
        format!("the log of {pod} holding {want:?}"),
        WAIT,
        || async {
            let mut args = vec!["logs", "-n", ns.name(), pod, "-c", "app"];
            args.extend_from_slice(extra);
            let out = kubectl(cluster, &args).await;
            if out.stdout.contains(want) {
                Ok(Some(()))
            } else {
                Err(format!("{out:?}"))
            }
        },
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn kubectl_logs_plain_tail_and_limit() {
    let (cluster, ns) = setup("logs").await;
    run_pod(
        &ns,
        shell_pod(
            "talker",
            "for i in 1 2 3 4 5; do echo line-$i; done; exec sleep 3600",
        ),
    )
    .await;
    wait_log(&cluster, &ns, "talker", &[], "line-5").await;
    let all = kubectl(&cluster, &["logs", "-n", ns.name(), "talker"]).await;
    assert_eq!(all.code, Some(0), "{all:?}");
    assert_eq!(all.stdout, "line-1\nline-2\nline-3\nline-4\nline-5\n");
    let tail = kubectl(&cluster, &["logs", "-n", ns.name(), "talker", "--tail=2"]).await;
    assert_eq!(tail.stdout, "line-4\nline-5\n", "{tail:?}");
    let limited = kubectl(
        &cluster,
        &["logs", "-n", ns.name(), "talker", "--limit-bytes=9"],
    )
    .await;
    assert_eq!(limited.stdout, "line-1\nli", "{limited:?}");
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn kubectl_logs_follow_streams_a_line_written_later() {
    let (cluster, ns) = setup("follow").await;
    run_pod(
        &ns,
        shell_pod(
            "writer",
            "echo first; while [ ! -e /tmp/go ]; do sleep 0.1; done; echo second; exec sleep 3600",
        ),
    )
    .await;
    wait_log(&cluster, &ns, "writer", &[], "first").await;
    let mut follower = kubectl_command(&cluster, &["logs", "-f", "-n", ns.name(), "writer"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(follower.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(WAIT, lines.next_line()).await;
    assert_eq!(first.unwrap().unwrap().as_deref(), Some("first"));
    // Only now is the second line written.
    let touched = cluster
        .exec(ns.name(), "writer", "app", &["touch", "/tmp/go"])
        .await
        .unwrap();
    assert_eq!(touched.code(), 0, "{touched:?}");
    let second = tokio::time::timeout(WAIT, lines.next_line()).await;
    assert_eq!(second.unwrap().unwrap().as_deref(), Some("second"));
    follower.kill().await.unwrap();
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn kubectl_logs_previous_after_a_restart() {
    let (cluster, ns) = setup("previous").await;
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": "phoenix" },
        "spec": {
            "terminationGracePeriodSeconds": 2,
            "volumes": [{ "name": "state", "emptyDir": {} }],
            "containers": [{
                "name": "app", "image": "busybox",
                "volumeMounts": [{ "name": "state", "mountPath": "/state" }],
                "command": ["sh", "-c",
                    "n=$(cat /state/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /state/n; \
                     echo attempt-$n; if [ $n -lt 2 ]; then exit 1; fi; exec sleep 3600"]
            }]
        }
    });
    let pods: Api<Pod> = ns.api();
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(pod).unwrap(),
    )
    .await
    .unwrap();
    wait_for(
        &pods,
        "phoenix",
        |p: Option<&Pod>| {
            p.and_then(|p| p.status.as_ref())
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|cs| cs.first())
                .is_some_and(|c| c.restart_count >= 1 && c.ready)
        },
        WAIT,
    )
    .await
    .unwrap();
    wait_log(&cluster, &ns, "phoenix", &[], "attempt-2").await;
    let previous = kubectl(
        &cluster,
        &["logs", "-n", ns.name(), "phoenix", "--previous"],
    )
    .await;
    assert_eq!(previous.code, Some(0), "{previous:?}");
    assert_eq!(previous.stdout, "attempt-1\n");
    let current = kubectl(&cluster, &["logs", "-n", ns.name(), "phoenix"]).await;
    assert_eq!(current.stdout, "attempt-2\n", "{current:?}");
    ns.cleanup().await.unwrap();
}

/// Bad requests get the status a real cluster gives, from the apiserver (unknown pod or
/// container) or from the node (no previous attempt).
#[rstest]
#[case::unknown_pod(&["nobody"], "pods \"nobody\" not found")]
#[case::unknown_container(&["quiet", "-c", "ghost"], "container ghost is not valid for pod quiet")]
#[case::no_previous(&["quiet", "--previous"], "previous terminated container \"app\" in pod \"quiet\" not found")]
#[tokio::test]
async fn kubectl_logs_bad_input(#[case] args: &[&str], #[case] message: &str) {
    let (cluster, ns) = setup("logs-bad").await;
    run_pod(&ns, shell_pod("quiet", "exec sleep 3600")).await;
    let mut all = vec!["logs", "-n", ns.name()];
    all.extend_from_slice(args);
    let out = kubectl(&cluster, &all).await;
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains(message), "{out:?}");
    // The node still answers.
    let fine = kubectl(&cluster, &["logs", "-n", ns.name(), "quiet"]).await;
    assert_eq!(fine.code, Some(0), "{fine:?}");
    ns.cleanup().await.unwrap();
}

/// The kubelet port a node advertises.
async fn kubelet_port(cluster: &Cluster, node: &str) -> i32 {
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
fn https_client(cluster: &Cluster) -> reqwest::Client {
    let ca = std::fs::read(cluster.run_dir().join("control-plane/pki/ca.crt")).unwrap();
    reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
        .build()
        .unwrap()
}

#[tokio::test]
async fn the_kubelet_api_refuses_anonymous_and_unauthorized_callers() {
    let (cluster, ns) = setup("kubelet-auth").await;
    let node = cluster.node_names()[0].clone();
    let port = kubelet_port(&cluster, &node).await;
    assert_ne!(port, 10250, "the node advertises its own port");
    let http = https_client(&cluster);
    let url = format!("https://127.0.0.1:{port}/pods");

    // No certificate, no token: 401, as kubelet without anonymous auth.
    let anonymous = http.get(&url).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    assert_eq!(anonymous.text().await.unwrap(), "Unauthorized");
    let bogus = http
        .get(&url)
        .bearer_auth("not-a-token")
        .send()
        .await
        .unwrap();
    assert_eq!(bogus.status(), 401);

    // A service account's token: authenticated, but not allowed nodes/proxy: 403.
    let accounts: Api<ServiceAccount> = ns.api();
    accounts
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "nosy"}})).unwrap(),
        )
        .await
        .unwrap();
    let token = accounts
        .create_token_request("nosy", &PostParams::default(), &TokenRequest::default())
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    let refused = http.get(&url).bearer_auth(&token).send().await.unwrap();
    assert_eq!(refused.status(), 403);
    assert_eq!(
        refused.text().await.unwrap(),
        format!(
            "Forbidden (user=system:serviceaccount:{}:nosy, verb=get, resource=nodes, subresource=proxy)",
            ns.name()
        )
    );

    // Through the apiserver, as the admin: the node's pods.
    let request = http::Request::get(format!("/api/v1/nodes/{node}/proxy/pods"))
        .body(Vec::new())
        .unwrap();
    let pods: serde_json::Value = cluster.client().request(request).await.unwrap();
    assert_eq!(pods["kind"], "PodList", "{pods}");
    ns.cleanup().await.unwrap();
}

/// `Cluster::exec` goes through the apiserver (WebSocket, `v4.channel.k8s.io`) to the node's
/// kubelet API: output on both streams and the exit code.
#[tokio::test]
async fn cluster_exec_goes_through_the_apiserver_with_streams_and_exit_code() {
    let (cluster, ns) = setup("ws-exec").await;
    run_pod(&ns, shell_pod("target", "exec sleep 3600")).await;
    let out = cluster
        .exec(
            ns.name(),
            "target",
            "app",
            &["sh", "-c", "echo out; echo err >&2; exit 3"],
        )
        .await
        .unwrap();
    assert_eq!(out.code(), 3, "{out:?}");
    assert_eq!(out.stdout, b"out\n");
    assert_eq!(out.stderr, b"err\n");
    let hostname = cluster
        .exec(ns.name(), "target", "app", &["hostname"])
        .await
        .unwrap();
    assert_eq!(
        (hostname.code(), hostname.stdout.as_slice()),
        (0, &b"target\n"[..])
    );
    ns.cleanup().await.unwrap();
}

#[rstest]
#[case::success("exit 0", 0)]
#[case::failure("exit 3", 3)]
#[case::killed("kill -9 $$", 137)]
#[tokio::test]
async fn kubectl_exec_reports_the_exit_code(#[case] script: &str, #[case] code: i32) {
    let (cluster, ns) = setup("exec-code").await;
    run_pod(&ns, shell_pod("target", "exec sleep 3600")).await;
    let out = kubectl(
        &cluster,
        &[
            "exec",
            "-n",
            ns.name(),
            "target",
            "--",
            "sh",
            "-c",
            &format!("echo before; {script}"),
        ],
    )
    .await;
    assert_eq!(out.code, Some(code), "{out:?}");
    assert_eq!(out.stdout, "before\n", "{out:?}");
    if code != 0 {
        assert!(
            out.stderr
                .contains(&format!("command terminated with exit code {code}")),
            "{out:?}"
        );
    }
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn kubectl_exec_streams_stdin_stdout_and_stderr() {
    let (cluster, ns) = setup("exec-stdin").await;
    run_pod(&ns, shell_pod("target", "exec sleep 3600")).await;
    let out = kubectl_with_input(
        &cluster,
        &[
            "exec",
            "-i",
            "-n",
            ns.name(),
            "target",
            "--",
            "sh",
            "-c",
            "tr a-z A-Z; echo oops >&2",
        ],
        b"hello\nworld\n",
    )
    .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(out.stdout, "HELLO\nWORLD\n");
    assert_eq!(out.stderr, "oops\n");
    ns.cleanup().await.unwrap();
}

/// With `-t` on a terminal (kubectl runs under `script`, which gives it one), the command
/// has a terminal of kubectl's size.
#[tokio::test]
async fn kubectl_exec_with_a_tty() {
    let (cluster, ns) = setup("exec-tty").await;
    run_pod(&ns, shell_pod("target", "exec sleep 3600")).await;
    let command = format!(
        "stty cols 91 rows 37; {} --kubeconfig {} exec -it -n {} target -- sh -c 'tty; stty size'",
        kubectl_binary().display(),
        cluster.kubeconfig().display(),
        ns.name()
    );
    let out = tokio::time::timeout(
        WAIT,
        tokio::process::Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("/dev/pts/"), "no terminal: {stdout:?}");
    assert!(stdout.contains("37 91"), "the terminal's size: {stdout:?}");
    ns.cleanup().await.unwrap();
}

/// A stream closed before its command ends (kubectl killed) takes the command with it:
/// nothing is left running in the container.
#[tokio::test]
async fn a_closed_exec_stream_leaves_no_process() {
    let (cluster, ns) = setup("exec-closed").await;
    run_pod(&ns, shell_pod("target", "exec sleep 3600")).await;
    let marker = format!("sleep 4{}", std::process::id() % 100_000);
    let mut client = kubectl_command(
        &cluster,
        &[
            "exec",
            "-i",
            "-n",
            ns.name(),
            "target",
            "--",
            "sh",
            "-c",
            &format!("{marker}; echo never"),
        ],
    )
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .spawn()
    .unwrap();
    let running = |want: bool| {
        let marker = marker.clone();
        async move {
            let found = std::process::Command::new("pgrep")
                .args(["-f", &format!("^{marker}$")])
                .output()
                .unwrap();
            let running = !found.stdout.is_empty();
            if running == want {
                Ok(Some(()))
            } else {
                Err(format!("running: {running}"))
            }
        }
    };
    wait_until("the exec'd command running", WAIT, || running(true))
        .await
        .unwrap();
    client.kill().await.unwrap();
    wait_until("the exec'd command gone", WAIT, || running(false))
        .await
        .unwrap();
    // The node serves the next exec as before.
    let out = kubectl(
        &cluster,
        &["exec", "-n", ns.name(), "target", "--", "echo", "still"],
    )
    .await;
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (Some(0), "still\n"),
        "{out:?}"
    );
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn kubectl_exec_bad_input() {
    let (cluster, ns) = setup("exec-bad").await;
    run_pod(&ns, shell_pod("target", "exec sleep 3600")).await;
    let missing = kubectl(
        &cluster,
        &["exec", "-n", ns.name(), "target", "--", "no-such-command"],
    )
    .await;
    assert_ne!(missing.code, Some(0), "{missing:?}");
    assert!(missing.stderr.contains("no-such-command"), "{missing:?}");
    let ghost = kubectl(
        &cluster,
        &[
            "exec",
            "-n",
            ns.name(),
            "target",
            "-c",
            "ghost",
            "--",
            "true",
        ],
    )
    .await;
    assert_eq!(ghost.code, Some(1), "{ghost:?}");
    assert!(
        ghost
            .stderr
            .contains("container ghost is not valid for pod target"),
        "{ghost:?}"
    );

    // A container waiting to be restarted is not running.
    let pods: Api<Pod> = ns.api();
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(shell_pod("crasher", "exit 1")).unwrap(),
    )
    .await
    .unwrap();
    wait_for(
        &pods,
        "crasher",
        |p: Option<&Pod>| {
            p.and_then(|p| p.status.as_ref())
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|cs| cs.first())
                .and_then(|c| c.state.as_ref())
                .and_then(|s| s.waiting.as_ref())
                .is_some_and(|w| w.reason.as_deref() == Some("CrashLoopBackOff"))
        },
        WAIT,
    )
    .await
    .unwrap();
    let stopped = kubectl(
        &cluster,
        &["exec", "-n", ns.name(), "crasher", "--", "true"],
    )
    .await;
    assert_eq!(stopped.code, Some(1), "{stopped:?}");
    assert!(
        stopped.stderr.contains("container not running (\"app\")"),
        "{stopped:?}"
    );
    ns.cleanup().await.unwrap();
}

/// A free loopback port now.
fn free_port() -> u16 {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test]
async fn kubectl_port_forward_reaches_an_http_server_in_a_pod() {
    let (cluster, ns) = setup("port-forward").await;
    let port = free_port();
    run_pod(
        &ns,
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": "web" },
            "spec": {
                "terminationGracePeriodSeconds": 2,
                "containers": [{
                    "name": "app", "image": "busybox",
                    "command": ["sh", "-c", format!(
                        "mkdir -p /tmp/www && echo served-by-web > /tmp/www/index.html && \
                         exec /usr/bin/python3 -m http.server {port} --bind 0.0.0.0 --directory /tmp/www")],
                }]
            }
        }),
    )
    .await;
    let mut forwarder = kubectl_command(
        &cluster,
        &[
            "port-forward",
            "-n",
            ns.name(),
            "pod/web",
            &format!(":{port}"),
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut lines = BufReader::new(forwarder.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(WAIT, lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap_or_default();
    // "Forwarding from 127.0.0.1:41234 -> 8080"
    let local: u16 = line
        .split_whitespace()
        .nth(2)
        .and_then(|a| a.rsplit(':').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("unexpected kubectl output {line:?}"));
    let http = reqwest::Client::new();
    let body = wait_until("the pod's server through the forward", WAIT, || async {
        match http
            .get(format!("http://127.0.0.1:{local}/index.html"))
            .send()
            .await
        {
            Ok(r) if r.status().is_success() => {
                Ok(Some(r.text().await.map_err(|e| e.to_string())?))
            }
            Ok(r) => Err(format!("status {}", r.status())),
            Err(e) => Err(e.to_string()),
        }
    })
    .await
    .unwrap();
    assert_eq!(body, "served-by-web\n");
    // A second connection over the same forward.
    let again = http
        .get(format!("http://127.0.0.1:{local}/index.html"))
        .send()
        .await
        .unwrap();
    assert_eq!(again.text().await.unwrap(), "served-by-web\n");
    forwarder.kill().await.unwrap();
    ns.cleanup().await.unwrap();
}

/// `/stats/summary` through the apiserver (as metrics and volume-stats checks read it): the
/// node's file system, CPU and memory, the pod's and its container's, and its emptyDir
/// volume with the bytes written into it.
#[tokio::test]
async fn stats_summary_reports_pods_and_their_volumes() {
    let (cluster, ns) = setup("stats").await;
    let pod = run_pod(
        &ns,
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": "filler" },
            "spec": {
                "terminationGracePeriodSeconds": 2,
                "volumes": [{ "name": "scratch", "emptyDir": {} }],
                "containers": [{
                    "name": "app", "image": "busybox",
                    "volumeMounts": [{ "name": "scratch", "mountPath": "/scratch" }],
                    "command": ["sh", "-c",
                        "head -c 1048576 /dev/urandom > /scratch/blob && touch /scratch/done && exec sleep 3600"]
                }]
            }
        }),
    )
    .await;
    let node = pod.spec.unwrap().node_name.unwrap();
    let path = format!("/api/v1/nodes/{node}/proxy/stats/summary");
    let volume = wait_until("the emptyDir's usage in the summary", WAIT, || async {
        let request = http::Request::get(&path).body(Vec::new()).unwrap();
        let summary: serde_json::Value = cluster
            .client()
            .request(request)
            .await
            .map_err(|e| e.to_string())?;
        if summary["node"]["nodeName"] != node.as_str()
            || summary["node"]["fs"]["capacityBytes"].as_u64().unwrap_or(0) == 0
        {
            return Err(format!("node: {}", summary["node"]));
        }
        let pods = summary["pods"].as_array().cloned().unwrap_or_default();
        let Some(ours) = pods
            .iter()
            .find(|p| p["podRef"]["name"] == "filler" && p["podRef"]["namespace"] == ns.name())
        else {
            return Err(format!("no pod filler in {pods:?}"));
        };
        // Memory and CPU from /proc: the node's, the pod's and its container's processes.
        let positive = |v: &serde_json::Value| v.as_u64().unwrap_or(0) > 0;
        let container = ours["containers"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["name"] == "app"))
            .cloned()
            .unwrap_or_default();
        if !positive(&summary["node"]["memory"]["workingSetBytes"])
            || !positive(&summary["node"]["cpu"]["usageCoreNanoSeconds"])
            || !positive(&ours["memory"]["rssBytes"])
            || !positive(&container["memory"]["rssBytes"])
            || container["cpu"]["usageCoreNanoSeconds"].as_u64().is_none()
        {
            return Err(format!("node: {}, pod: {ours}", summary["node"]));
        }
        let volume = ours["volume"]
            .as_array()
            .and_then(|v| v.iter().find(|v| v["name"] == "scratch"))
            .cloned();
        match volume {
            Some(v) if v["usedBytes"].as_u64().unwrap_or(0) >= 1_048_576 => Ok(Some(v)),
            other => Err(format!("volume: {other:?}")),
        }
    })
    .await
    .unwrap();
    assert!(volume["capacityBytes"].as_u64().unwrap() > 0, "{volume}");
    assert!(volume["inodesUsed"].as_u64().unwrap() >= 3, "{volume}");
    ns.cleanup().await.unwrap();
}

/// `kubectl attach` streams the container's output from now on and ends when it exits.
#[tokio::test]
async fn kubectl_attach_follows_the_output_until_the_container_ends() {
    let (cluster, ns) = setup("attach").await;
    let mut pod = shell_pod(
        "ticker",
        "i=0; while [ ! -e /tmp/stop ]; do echo tick-$i; i=$((i+1)); sleep 0.2; done; echo bye",
    );
    pod["spec"]["restartPolicy"] = json!("Never");
    run_pod(&ns, pod).await;
    let mut attached = kubectl_command(&cluster, &["attach", "-n", ns.name(), "ticker"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(attached.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(WAIT, lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap_or_default();
    assert!(first.starts_with("tick-"), "{first:?}");
    let stop = cluster
        .exec(ns.name(), "ticker", "app", &["touch", "/tmp/stop"])
        .await
        .unwrap();
    assert_eq!(stop.code(), 0, "{stop:?}");
    let mut rest = Vec::new();
    while let Ok(Ok(Some(line))) = tokio::time::timeout(WAIT, lines.next_line()).await {
        rest.push(line);
    }
    assert_eq!(rest.last().map(String::as_str), Some("bye"), "{rest:?}");
    let status = tokio::time::timeout(WAIT, attached.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status}");
    ns.cleanup().await.unwrap();
}

/// `--timestamps` stamps each line with the time it was written, `--since-time` and
/// `--since` keep the lines written since.
#[tokio::test]
async fn kubectl_logs_timestamps_and_since() {
    let (cluster, ns) = setup("logs-time").await;
    run_pod(
        &ns,
        shell_pod(
            "clock",
            "echo early; while [ ! -e /tmp/go ]; do sleep 0.1; done; echo late; exec sleep 3600",
        ),
    )
    .await;
    wait_log(&cluster, &ns, "clock", &[], "early").await;
    let stamps = |out: &Kubectl| -> Vec<(k8s_openapi::jiff::Timestamp, String)> {
        out.stdout
            .lines()
            .map(|l| {
                let (time, text) = l.split_once(' ').unwrap();
                let time = time.parse().unwrap_or_else(|e| panic!("{time:?}: {e}"));
                (time, text.to_string())
            })
            .collect()
    };
    let first = stamps(
        &kubectl(
            &cluster,
            &["logs", "-n", ns.name(), "clock", "--timestamps"],
        )
        .await,
    );
    assert_eq!(first.len(), 1, "{first:?}");
    // The apiserver passes sinceTime on in whole seconds: "late" is written after the next
    // whole second after "early".
    let boundary = k8s_openapi::jiff::Timestamp::from_second(first[0].0.as_second() + 1).unwrap();
    wait_until("the next whole second", WAIT, || async {
        if k8s_openapi::jiff::Timestamp::now() > boundary {
            Ok(Some(()))
        } else {
            Err("not yet".to_string())
        }
    })
    .await
    .unwrap();
    let go = cluster
        .exec(ns.name(), "clock", "app", &["touch", "/tmp/go"])
        .await
        .unwrap();
    assert_eq!(go.code(), 0, "{go:?}");
    wait_log(&cluster, &ns, "clock", &[], "late").await;

    let stamped = kubectl(
        &cluster,
        &["logs", "-n", ns.name(), "clock", "--timestamps"],
    )
    .await;
    assert_eq!(stamped.code, Some(0), "{stamped:?}");
    let lines = stamps(&stamped);
    assert_eq!(
        lines.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>(),
        ["early", "late"]
    );
    assert_eq!(lines[0].0, first[0].0, "a line keeps its time");
    assert!(
        lines[0].0 < boundary && boundary <= lines[1].0,
        "{lines:?} vs {boundary}"
    );

    let since = kubectl(
        &cluster,
        &[
            "logs",
            "-n",
            ns.name(),
            "clock",
            &format!("--since-time={boundary}"),
        ],
    )
    .await;
    assert_eq!(since.stdout, "late\n", "{since:?}");
    let recent = kubectl(&cluster, &["logs", "-n", ns.name(), "clock", "--since=1h"]).await;
    assert_eq!(recent.stdout, "early\nlate\n", "{recent:?}");
    ns.cleanup().await.unwrap();
}

/// port-forward over WebSocket (kube-rs, `v4.channel.k8s.io`) through the apiserver: an
/// HTTP request to the pod's server and its answer.
#[tokio::test]
async fn websocket_port_forward_reaches_an_http_server_in_a_pod() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (_cluster, ns) = setup("ws-forward").await;
    let port = free_port();
    run_pod(
        &ns,
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": "web" },
            "spec": {
                "terminationGracePeriodSeconds": 2,
                "containers": [{
                    "name": "app", "image": "busybox",
                    "command": ["sh", "-c", format!(
                        "mkdir -p /tmp/www && echo served-over-ws > /tmp/www/index.html && \
                         exec /usr/bin/python3 -m http.server {port} --bind 0.0.0.0 --directory /tmp/www")],
                }]
            }
        }),
    )
    .await;
    let pods: Api<Pod> = ns.api();
    let answer = wait_until(
        "the pod's server through a WebSocket forward",
        WAIT,
        || async {
            let mut forwarder = pods
                .portforward("web", &[port])
                .await
                .map_err(|e| e.to_string())?;
            let mut stream = forwarder.take_stream(port).ok_or("no stream")?;
            stream
                .write_all(b"GET /index.html HTTP/1.0\r\nHost: web\r\n\r\n")
                .await
                .map_err(|e| e.to_string())?;
            let mut answer = Vec::new();
            stream
                .read_to_end(&mut answer)
                .await
                .map_err(|e| e.to_string())?;
            drop(stream);
            let _ = forwarder.join().await;
            let answer = String::from_utf8_lossy(&answer).into_owned();
            if answer.starts_with("HTTP/1.0 200") {
                Ok(Some(answer))
            } else {
                Err(format!("answer {answer:?}"))
            }
        },
    )
    .await
    .unwrap();
    assert!(answer.ends_with("served-over-ws\n"), "{answer}");
    ns.cleanup().await.unwrap();
}

/// A kubectl of 1.30 or later on PATH execs over WebSocket (`v5.channel.k8s.io`, passed
/// through by the apiserver): exit code and stdin as over SPDY. Without such a kubectl the
/// test says so and checks nothing.
#[tokio::test]
async fn a_websocket_kubectl_execs_with_exit_code_and_stdin() {
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
        return;
    }
    let (cluster, ns) = setup("ws-kubectl").await;
    run_pod(&ns, shell_pod("target", "exec sleep 3600")).await;
    let run = |args: Vec<String>, input: &'static [u8]| {
        let kubeconfig = cluster.kubeconfig().to_path_buf();
        async move {
            use tokio::io::AsyncWriteExt;
            let mut child = tokio::process::Command::new("kubectl")
                .arg("--kubeconfig")
                .arg(kubeconfig)
                .args(args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .unwrap();
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(input).await.unwrap();
            drop(stdin);
            tokio::time::timeout(WAIT, child.wait_with_output())
                .await
                .unwrap()
                .unwrap()
        }
    };
    let args = |extra: &[&str]| -> Vec<String> {
        ["exec", "-n", ns.name(), "target"]
            .iter()
            .chain(extra)
            .map(|s| s.to_string())
            .collect()
    };
    let failed = run(args(&["--", "sh", "-c", "echo out; exit 4"]), b"").await;
    assert_eq!(failed.status.code(), Some(4), "{failed:?}");
    assert_eq!(String::from_utf8_lossy(&failed.stdout), "out\n");
    let echoed = run(args(&["-i", "--", "cat"]), b"through v5\n").await;
    assert_eq!(echoed.status.code(), Some(0), "{echoed:?}");
    assert_eq!(String::from_utf8_lossy(&echoed.stdout), "through v5\n");
    ns.cleanup().await.unwrap();
}
