//! The life of a background cluster process (`conformance cluster up/status/down`): it
//! serves attaching processes, stops with the process it watches or on `down`, and leaves no
//! process and no directory behind. Each test boots a 1-node cluster of its own.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use cluster::{Cluster, EmbeddedCluster, EmbeddedOptions, Error, TestNamespace};
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::runtime::conditions::is_pod_running;
use kube_support::wait::{wait_for, wait_until};

const WAIT: Duration = Duration::from_secs(60);

/// The `conformance` binary (of the `suites` package), built when missing or stale.
fn conformance_binary() -> PathBuf {
    cluster::embedded::daemon::locate_conformance().expect("the conformance binary")
}

fn conformance(args: &[&str]) -> Output {
    Command::new(conformance_binary())
        .args(args)
        .output()
        .expect("conformance runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `conformance args`, which must fail saying `message` on stderr.
fn conformance_fails(args: &[&str], message: &str) {
    let out = conformance(args);
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded: {stderr}");
    assert!(stderr.contains(message), "{args:?}: {stderr}");
}

/// `cluster up` with one node; returns the run directory it printed.
fn up(extra: &[&str]) -> PathBuf {
    let mut args = vec!["cluster", "up", "--nodes", "1", "--zones", "zone-x"];
    args.extend_from_slice(extra);
    let out = conformance(&args);
    assert!(out.status.success(), "cluster up: {}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let dir = stdout
        .trim()
        .strip_prefix("HARNESS_CLUSTER_DIR=")
        .unwrap_or_else(|| panic!("unexpected output {stdout:?}"));
    PathBuf::from(dir)
}

/// Pids of live processes whose command line names `dir`.
fn processes_naming(dir: &Path) -> Vec<String> {
    let needle = dir.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter_map(|e| {
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            let cmdline = text(&cmdline).replace('\0', " ");
            cmdline
                .contains(&needle)
                .then(|| format!("{} {cmdline}", e.file_name().to_string_lossy()))
        })
        .collect()
}

/// Runs a pod `name` whose container `c` is `sleep <seconds>` (a command line tests can look
/// for) in `ns`, and waits until it runs.
async fn run_sleeper(ns: &TestNamespace, name: &str, seconds: &str) {
    let pods: kube::Api<Pod> = ns.api();
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": { "name": name },
        "spec": { "containers": [{ "name": "c", "image": "busybox", "command": ["sleep", seconds] }] }
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    wait_for(&pods, name, is_pod_running(), WAIT).await.unwrap();
}

async fn gone(dir: &Path) {
    wait_until(
        format!("{} and its processes gone", dir.display()),
        WAIT,
        || {
            let dir = dir.to_path_buf();
            async move {
                let left = processes_naming(&dir);
                if !dir.exists() && left.is_empty() {
                    Ok(Some(()))
                } else {
                    Err(format!("exists: {}, processes: {left:?}", dir.exists()))
                }
            }
        },
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn cluster_process_serves_attaching_processes_and_stops_with_the_watched_process() {
    let mut watched = Command::new("sleep").arg("600").spawn().unwrap();
    let dir = up(&["--until-pid", &watched.id().to_string()]);

    let status = conformance(&["cluster", "status", "--run-dir", dir.to_str().unwrap()]);
    let stdout = text(&status.stdout);
    assert!(status.status.success(), "status: {}", text(&status.stderr));
    assert!(stdout.contains("node-1 zone zone-x Ready"), "{stdout}");

    let cluster = EmbeddedCluster::connect(&dir).await.unwrap();
    assert_eq!(cluster.node_names(), ["node-1"]);
    let ns = cluster.namespace("life").await.unwrap();
    run_sleeper(&ns, "p", "600").await;
    let out = cluster
        .exec(ns.name(), "p", "c", &["hostname"])
        .await
        .unwrap();
    assert_eq!(text(&out.stdout), "p\n");

    // The watched process ends: the cluster stops, pods included, and cleans up.
    watched.kill().unwrap();
    watched.wait().unwrap();
    gone(&dir).await;
    // Pod processes carry no run-directory path; the sleep must be gone too.
    let sleeping = Command::new("pgrep")
        .args(["-f", "^sleep 600$"])
        .output()
        .unwrap();
    assert!(
        text(&sleeping.stdout).trim().is_empty(),
        "pod processes left: {}",
        text(&sleeping.stdout)
    );
}

#[tokio::test]
async fn down_stops_the_cluster_and_a_live_run_directory_is_not_taken_twice() {
    let base = tempfile::Builder::new().prefix("lc-").tempdir().unwrap();
    let dir = base.path().join("shared");
    let dir_arg = dir.to_str().unwrap();
    let started = up(&["--run-dir", dir_arg]);
    assert_eq!(started, std::fs::canonicalize(&dir).unwrap());

    conformance_fails(
        &["cluster", "up", "--nodes", "1", "--run-dir", dir_arg],
        "in use by the cluster process",
    );
    // The refused start did not disturb the running cluster.
    let cluster = Cluster::connect(&started).await.unwrap();
    cluster
        .namespace("still")
        .await
        .unwrap()
        .cleanup()
        .await
        .unwrap();

    let down = conformance(&["cluster", "down", "--run-dir", dir_arg]);
    assert!(down.status.success(), "down: {}", text(&down.stderr));
    gone(&started).await;

    conformance_fails(
        &["cluster", "status", "--run-dir", dir_arg],
        "no cluster running",
    );
    let err = Cluster::connect(&started).await.unwrap_err();
    assert!(matches!(err, Error::NotRunning { .. }), "{err}");
}

#[tokio::test]
async fn a_missing_node_agent_binary_is_named() {
    let err = EmbeddedCluster::start(EmbeddedOptions {
        node_agent: Some("/nonexistent/node-agent".into()),
        ..EmbeddedOptions::default()
    })
    .await
    .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("/nonexistent/node-agent") && message.contains("HARNESS_NODE_AGENT_BIN"),
        "{message}"
    );
}

#[tokio::test]
async fn a_killed_cluster_process_takes_everything_with_it_and_down_cleans_up() {
    let dir = up(&[]);
    let cluster = Cluster::connect(&dir).await.unwrap();
    let ns = cluster.namespace("killed").await.unwrap();
    run_sleeper(&ns, "orphan", "601").await;
    drop(ns);

    let owner = cluster.description().pid;
    Command::new("kill")
        .args(["-KILL", &owner.to_string()])
        .status()
        .unwrap();
    // Components and node agents die with it (PR_SET_PDEATHSIG), the pods with the lifeline.
    wait_until("every cluster process gone", WAIT, || {
        let dir = dir.clone();
        async move {
            let left = processes_naming(&dir);
            let sleeping = Command::new("pgrep")
                .args(["-f", "^sleep 601$"])
                .output()
                .unwrap();
            if left.is_empty() && sleeping.stdout.is_empty() {
                Ok(Some(()))
            } else {
                Err(format!("left: {left:?}, pod: {}", text(&sleeping.stdout)))
            }
        }
    })
    .await
    .unwrap();
    assert!(
        dir.exists(),
        "a killed cluster process cannot clean its directory"
    );
    let err = Cluster::connect(&dir).await.unwrap_err();
    assert!(matches!(err, Error::NotRunning { .. }), "{err}");

    let down = conformance(&["cluster", "down", "--run-dir", dir.to_str().unwrap()]);
    assert!(down.status.success(), "down: {}", text(&down.stderr));
    assert!(!dir.exists());
}

/// "Ready" means a user's first commands work: right after `cluster up` returns, `kubectl
/// run` in `default` creates a pod (the ServiceAccount `default` exists) and `kubectl logs`
/// reads it through the node's kubelet API.
#[tokio::test]
async fn the_first_kubectl_run_after_up_works() {
    let dir = up(&[]);
    let kubeconfig = dir.join("control-plane/admin.kubeconfig");
    let kubectl = |args: &[&str]| {
        Command::new(testkit::processes::kubectl_path())
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(args)
            .output()
            .unwrap()
    };
    let run = kubectl(&[
        "run",
        "first",
        "--image=busybox",
        "--restart=Never",
        "--command",
        "--",
        "sh",
        "-c",
        "echo hello from the first pod",
    ]);
    assert!(run.status.success(), "kubectl run: {}", text(&run.stderr));
    let cluster = Cluster::connect(&dir).await.unwrap();
    let pods: kube::Api<Pod> = kube::Api::namespaced(cluster.client(), "default");
    wait_for(
        &pods,
        "first",
        |p: Option<&Pod>| {
            p.and_then(|p| p.status.as_ref())
                .and_then(|s| s.phase.as_deref())
                == Some("Succeeded")
        },
        WAIT,
    )
    .await
    .unwrap();
    let logs = kubectl(&["logs", "first"]);
    assert!(
        logs.status.success(),
        "kubectl logs: {}",
        text(&logs.stderr)
    );
    assert_eq!(text(&logs.stdout), "hello from the first pod\n");

    let down = conformance(&["cluster", "down", "--run-dir", dir.to_str().unwrap()]);
    assert!(down.status.success(), "down: {}", text(&down.stderr));
    gone(&dir).await;
}
