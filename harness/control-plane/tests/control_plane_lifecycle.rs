//! Control planes side by side, clean shutdown, and a harness that dies: two boots, one in
//! this process and one in a helper process (this test binary, re-run in helper mode).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use control_plane::{ControlPlane, Error, client_from_kubeconfig, run_dir};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use testkit::objects::namespace;
use testkit::processes::{is_alive, kubectl, processes_mentioning, wait_all_gone};
use tokio::io::{AsyncBufReadExt, BufReader};

const HELPER_ENV: &str = "CONTROL_PLANE_HELPER_BASE_DIR";
const HELPER_TEST: &str = "helper_process_runs_a_control_plane_until_killed";

/// What the helper process reports once its control plane is ready.
#[derive(serde::Serialize, serde::Deserialize, Debug)]
struct HelperReport {
    kubeconfig: PathBuf,
    run_dir: PathBuf,
    api_url: String,
    pids: Vec<u32>,
}

/// Helper mode: boots a control plane, reports it on stdout and runs until killed. Does
/// nothing unless started by the test below (which sets the environment variable).
#[tokio::test]
#[ignore = "helper process of two_control_planes_run_side_by_side_and_leave_nothing_behind"]
async fn helper_process_runs_a_control_plane_until_killed() {
    let Some(base) = std::env::var_os(HELPER_ENV) else {
        return;
    };
    let cp = ControlPlane::builder()
        .base_dir(base)
        .start()
        .await
        .expect("helper control plane starts");
    let report = HelperReport {
        kubeconfig: cp.kubeconfig().to_path_buf(),
        run_dir: cp.run_dir().to_path_buf(),
        api_url: cp.api_url().to_string(),
        pids: cp.pids().into_iter().map(|(_, pid)| pid).collect(),
    };
    println!("READY {}", serde_json::to_string(&report).unwrap());
    std::future::pending::<()>().await;
}

async fn start_helper(base: &Path) -> (tokio::process::Child, HelperReport) {
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([HELPER_TEST, "--exact", "--ignored", "--nocapture"])
        .env(HELPER_ENV, base)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the helper process");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let report = tokio::time::timeout(Duration::from_secs(180), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(json) = line.strip_prefix("READY ") {
                return serde_json::from_str::<HelperReport>(json).unwrap();
            }
        }
        panic!("the helper process ended without reporting a control plane");
    })
    .await
    .expect("the helper's control plane is ready in time");
    (child, report)
}

#[tokio::test]
async fn two_control_planes_run_side_by_side_and_leave_nothing_behind() {
    let base = tempfile::Builder::new().prefix("cpl-").tempdir().unwrap();
    let (in_process, (mut helper, other)) = tokio::join!(
        ControlPlane::builder().base_dir(base.path()).start(),
        start_helper(base.path())
    );
    let cp = in_process.expect("in-process control plane starts");

    // Both serve, on different ports, each its own data.
    assert_ne!(cp.api_url(), other.api_url);
    assert_ne!(cp.run_dir(), other.run_dir);
    let other_client = client_from_kubeconfig(&other.kubeconfig).await.unwrap();
    namespace(&cp.client(), "only-here").await;
    assert!(
        Api::<Namespace>::all(other_client)
            .get_opt("only-here")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        kubectl(&cp, &["get", "ns", "only-here", "-o", "name"]).contains("namespace/only-here")
    );

    // The helper harness dies hard: its components die with it, its run directory stays
    // behind, stale, and the next cleaning removes it.
    assert!(other.pids.iter().all(|p| is_alive(*p)));
    kill(Pid::from_raw(helper.id().unwrap() as i32), Signal::SIGKILL).unwrap();
    helper.wait().await.unwrap();
    wait_all_gone("the dead harness's components to die with it", &other.pids).await;
    assert!(
        other.run_dir.exists(),
        "a dead harness leaves its run directory"
    );
    let cleaned = run_dir::clean_stale(base.path()).unwrap();
    assert_eq!(
        cleaned.iter().map(|s| s.path.clone()).collect::<Vec<_>>(),
        vec![other.run_dir.clone()]
    );
    assert!(!other.run_dir.exists());
    // The live control plane's directory is not stale and was left alone.
    assert!(cp.run_dir().exists());

    // A clean shutdown leaves no process and no directory.
    let pids: Vec<u32> = cp.pids().into_iter().map(|(_, pid)| pid).collect();
    let dir = cp.run_dir().to_path_buf();
    cp.shutdown().await.expect("shutdown");
    assert!(
        pids.iter().all(|p| !is_alive(*p)),
        "components still running after shutdown: {pids:?}"
    );
    assert!(
        !dir.exists(),
        "run directory {} left after shutdown",
        dir.display()
    );
}

#[tokio::test]
async fn a_component_that_cannot_start_is_named_with_its_log_and_nothing_is_left() {
    let base = tempfile::Builder::new().prefix("cpl-").tempdir().unwrap();
    let err = ControlPlane::builder()
        .base_dir(base.path())
        .apiserver_arg("--no-such-flag=1")
        .start()
        .await
        .expect_err("an unknown apiserver flag must fail the start");
    match &err {
        Error::Exited {
            component,
            log_tail,
            ..
        } => {
            assert_eq!(*component, "kube-apiserver");
            assert!(log_tail.contains("no-such-flag"), "log tail: {log_tail}");
        }
        other => panic!("expected Exited, got {other}"),
    }
    assert!(err.to_string().contains("kube-apiserver"), "{err}");
    // etcd, already running, was stopped and the run directory removed.
    let base_str = base.path().display().to_string();
    assert_eq!(processes_mentioning(&base_str), Vec::<u32>::new());
    assert_eq!(std::fs::read_dir(base.path()).unwrap().count(), 0);
}
