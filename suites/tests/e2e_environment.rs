//! An e2e environment never outlives its test: dropped without teardown (a failed assertion,
//! a panic), it ends its cluster's processes, unmounts what is mounted below its run directory
//! and removes it, with the fake cloud's exports inside.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};

use suites::e2e::workload::{Workload, claim, pod_with_claim};
use suites::e2e::{EnvironmentOptions, ManilaCsiEnvironment};
use testkit::processes::processes_mentioning;

/// The mount points of this process's mount namespace at or below `dir`.
fn mounts_below(dir: &Path) -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .filter(|mount_point| Path::new(mount_point).starts_with(dir))
        .map(str::to_owned)
        .collect()
}

/// What the failing test saw before it failed: the run directory, the mounts below it and
/// the processes naming it.
type Seen = (PathBuf, Vec<String>, Vec<u32>);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_test_that_panics_leaves_no_run_dir_mount_or_process_behind() {
    testkit::init_tracing(
        "suites=info,cluster=info,node_agent=info,control_plane=info,pod_runtime=info",
    );
    let (seen_tx, seen_rx) = tokio::sync::oneshot::channel::<Seen>();
    let failing_test = tokio::spawn(async move {
        let env = ManilaCsiEnvironment::start(EnvironmentOptions {
            keep_run_dir: false,
            ..Default::default()
        })
        .await
        .expect("the driver deploys");
        let workload = Workload::create(&env, "e2e-leak").await.unwrap();
        workload
            .bound_claim(&claim("data", None, "1Gi", "ReadWriteMany"))
            .await
            .unwrap();
        workload
            .ready_pod(&pod_with_claim("user", "data", None, "echo x > /data/f"))
            .await
            .unwrap();
        let run_dir = env.run_dir().to_path_buf();
        let needle = run_dir.to_str().unwrap();
        let seen = (
            run_dir.clone(),
            mounts_below(&run_dir),
            processes_mentioning(needle),
        );
        seen_tx.send(seen).unwrap();
        panic!("a failing assertion, with the pod running on its published volume");
    });
    let failure = failing_test.await.expect_err("the test body panicked");
    assert!(failure.is_panic(), "{failure}");

    let (run_dir, mounts, processes) = seen_rx.await.unwrap();
    // There was something to leak: the volume published in the pod's directory, the nodes'
    // shared pods/ and plugins/, the control plane, node agents and pods.
    assert!(
        mounts
            .iter()
            .any(|m| m.contains("/volumes/kubernetes.io~csi/")),
        "{mounts:#?}"
    );
    assert!(!processes.is_empty());
    // Nothing is left of it.
    assert!(!run_dir.exists(), "{} is left", run_dir.display());
    assert_eq!(mounts_below(&run_dir), Vec::<String>::new());
    assert_eq!(
        processes_mentioning(run_dir.to_str().unwrap()),
        Vec::<u32>::new()
    );
}
