//! `conformance run` as a user runs it: the real binary, on the embedded default and on an
//! existing cluster through its kubeconfig; its report, JUnit XML and evidence; exit status
//! 2 for bad input before anything starts, 1 for a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod conformance_common;

use std::path::{Path, PathBuf};
use std::process::Command;

use cluster::{EmbeddedCluster, EmbeddedOptions};
use conformance_common::{conformance, junit_cases, read, run, scratch, text, workspace};
use rstest::rstest;
use suites::e2e::{EnvironmentOptions, ManilaCsiEnvironment};

const SPEC: &str = "fixtures/driver-specs/manila-nfs.yaml";
const CINDER_SPEC: &str = "fixtures/driver-specs/cinder.yaml";

#[test]
fn the_default_run_passes_every_suite_and_leaves_nothing_behind() {
    let out_dir = scratch("conformance-run-");
    let output = out_dir.path().join("out");
    let out = run(&["--output", output.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(
        out.status.success(),
        "exit {}:\n{stdout}\n{stderr}",
        out.status
    );

    let cases = junit_cases(&read(&output.join("junit.xml")));
    let failed: Vec<_> = cases.iter().filter(|(_, o)| o == "failed").collect();
    assert!(failed.is_empty(), "{failed:?}");
    for suite in [
        "sanity",
        "provisioning",
        "snapshottable",
        "multiVolume",
        "volume-expand",
        "topology",
        "teardown",
    ] {
        let passed = cases
            .iter()
            .filter(|(n, o)| n.starts_with(&format!("[{suite}] ")) && o == "passed")
            .count();
        assert!(passed > 0, "no passed test of suite {suite}: {cases:?}");
    }
    // What ran and what was skipped, with the reasons: every storage test applies to the
    // embedded default but those of capabilities the Manila spec does not claim.
    let outcomes: Vec<String> = cases.iter().map(|(n, o)| format!("{n}: {o}")).collect();
    insta::assert_snapshot!("default_run_outcomes", outcomes.join("\n"));
    let report = read(&output.join("report.md"));
    assert!(report.starts_with("# Conformance run: PASSED"), "{report}");
    assert!(report.contains("| volume-expand |"), "{report}");
    assert!(stdout.contains("0 failed"), "{stdout}");
    assert!(stderr.contains("PASS [multiVolume]"), "{stderr}");
    assert!(
        !output.join("evidence").exists(),
        "evidence without failures"
    );
}

#[rstest]
#[case::unknown_suite(&["--suite", "volumes-typo"], "unknown suite \"volumes-typo\"")]
#[case::bad_regex(&["--focus", "("], "--focus \"(\" is not a regular expression")]
#[case::no_parallelism(&["--parallel", "0"], "--parallel must be at least 1")]
#[case::kubeconfig_without_spec(&["--kubeconfig", "/nonexistent"], "--kubeconfig needs --driver-spec")]
#[case::missing_kubeconfig(
    &["--kubeconfig", "/nonexistent/kubeconfig", "--driver-spec", SPEC],
    "--kubeconfig /nonexistent/kubeconfig: no such file"
)]
#[case::missing_spec(&["--driver-spec", "/nonexistent/spec.yaml"], "/nonexistent/spec.yaml")]
#[case::cinder_in_containers(
    &["--driver-spec", CINDER_SPEC, "--backend", "containers"],
    "the Cinder driver runs on --backend embedded only"
)]
fn bad_input_exits_2_before_anything_starts(#[case] args: &[&str], #[case] message: &str) {
    let args: Vec<String> = args
        .iter()
        .map(|a| {
            if *a == SPEC || *a == CINDER_SPEC {
                workspace(a).display().to_string()
            } else {
                a.to_string()
            }
        })
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run(&args);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(message), "{stderr}");
    assert!(!stderr.contains("starting an embedded cluster"), "{stderr}");
}

#[test]
fn a_spec_file_error_names_the_key_and_line() {
    let dir = scratch("conformance-spec-");
    let spec = dir.path().join("driver.yaml");
    std::fs::write(
        &spec,
        "StorageClass:\n  FromName: true\nDriverInfo:\n  Name: manila.csi.openstack.org\n  Capabilities:\n    persistance: true\n",
    )
    .unwrap();
    let out = run(&["--driver-spec", spec.to_str().unwrap()]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("driver.yaml:6:5"), "{stderr}");
    assert!(stderr.contains("persistance"), "{stderr}");
    assert!(stderr.contains("persistence"), "{stderr}");
}

/// A class whose share type Manila does not have: the provisioning test fails (its claim is
/// never bound within the spec's ClaimProvision timeout), the run exits 1, and the report
/// points at evidence holding the claim, its events and the driver's logs. The share type
/// is named like the cloud's password, so Manila's "not found" carries the password into the
/// ProvisioningFailed Event and the provisioner's log: a leak the run's secret scan must
/// report, naming where and never the value.
#[test]
fn a_failing_test_is_reported_with_its_evidence() {
    let dir = scratch("conformance-fail-");
    let class = dir.path().join("class.yaml");
    let password = fakes::config::Account::default()
        .password
        .expose()
        .to_string();
    std::fs::write(
        &class,
        format!("apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: broken\nprovisioner: manila.csi.openstack.org\nparameters:\n  type: {password}\n  csi.storage.k8s.io/provisioner-secret-name: manila-csi-secrets\n  csi.storage.k8s.io/provisioner-secret-namespace: manila-csi\n"),
    )
    .unwrap();
    let spec = dir.path().join("driver.yaml");
    std::fs::write(
        &spec,
        "StorageClass:\n  FromFile: class.yaml\nTimeouts:\n  ClaimProvision: 15s\nDriverInfo:\n  Name: manila.csi.openstack.org\n  SupportedSizeRange:\n    Min: 1Gi\n  Capabilities:\n    persistence: true\n",
    )
    .unwrap();
    let output = dir.path().join("out");
    let out = run(&[
        "--driver-spec",
        spec.to_str().unwrap(),
        "--suite",
        "provisioning",
        "--focus",
        "claim's size",
        "--output",
        output.to_str().unwrap(),
    ]);
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        output.join("junit.xml").is_file(),
        "no junit.xml:\n{stdout}\n{stderr}"
    );

    let cases = junit_cases(&read(&output.join("junit.xml")));
    let failed: Vec<&String> = cases
        .iter()
        .filter(|(_, o)| o == "failed")
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        failed,
        [
            "[provisioning] should provision a volume of the claim's size and delete it with the claim",
            "[teardown] no secret of the run in any log, Event or output",
        ],
        "{cases:?}"
    );
    // The scan names what leaked and where (the Event, the provisioner's log), not the value.
    let junit = read(&output.join("junit.xml"));
    let scan = junit
        .split("<testcase ")
        .find(|case| case.contains("no secret of the run"))
        .unwrap_or_default();
    assert!(
        scan.contains("os-password of the driver&apos;s Secret in Event ")
            || scan.contains("os-password of the driver's Secret in Event "),
        "{scan}"
    );
    assert!(scan.contains(".log:"), "{scan}");
    assert!(!scan.contains(&password), "{scan}");
    // The run still tore down cleanly: the failed claim left nothing behind.
    assert!(
        cases
            .iter()
            .any(|(n, o)| n == "[teardown] the run leaves nothing behind" && o == "passed"),
        "{cases:?}"
    );
    let report = read(&output.join("report.md"));
    assert!(report.starts_with("# Conformance run: FAILED"), "{report}");
    assert!(report.contains("claim data Bound"), "{report}");
    let evidence = output
        .join("evidence/provisioning")
        .join("should-provision-a-volume-of-the-claim-s-size-and-delete-it-with-the-claim");
    assert!(
        report.contains("evidence/provisioning/should-provision"),
        "{report}"
    );
    let objects = read(&evidence.join("objects.yaml"));
    assert!(objects.contains("# PersistentVolumeClaims: 1"), "{objects}");
    assert!(objects.contains("name: data"), "{objects}");
    assert!(objects.contains("# CSINodes: 3"), "{objects}");
    let events = read(&evidence.join("events.txt"));
    assert!(
        events.contains("ProvisioningFailed") && events.contains(&password),
        "{events}"
    );
    let driver_logs: Vec<String> = std::fs::read_dir(evidence.join("driver"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        driver_logs
            .iter()
            .any(|f| f.starts_with("openstack-manila-csi-controllerplugin")
                && f.ends_with(".provisioner.log")),
        "{driver_logs:?}"
    );
    assert!(evidence.join("nodes/node-1.log").is_file());
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// The driver installed beforehand (here: the fixtures on an embedded cluster this test
/// starts); `--kubeconfig` runs the same suites, skipping what needs a second driver
/// instance, and reaches the cloud through a clouds.yaml.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_existing_cluster_runs_the_same_suites_through_its_kubeconfig() -> anyhow::Result<()> {
    testkit::init_tracing("suites=info");
    let env = ManilaCsiEnvironment::start(EnvironmentOptions::default()).await?;
    let dir = scratch("conformance-existing-");
    let clouds = dir.path().join("clouds.yaml");
    std::fs::write(
        &clouds,
        env.fake_cloud()
            .expect("the fake cloud")
            .clouds_yaml("fake"),
    )?;
    let output = dir.path().join("out");
    let kubeconfig = env.cluster().kubeconfig().to_path_buf();
    let spec = workspace(SPEC);
    let args = vec![
        "--kubeconfig".to_string(),
        kubeconfig.display().to_string(),
        "--driver-spec".into(),
        spec.display().to_string(),
        "--driver-namespace".into(),
        env.namespace().into(),
        "--clouds-yaml".into(),
        clouds.display().to_string(),
        "--os-cloud".into(),
        "fake".into(),
        "--output".into(),
        output.display().to_string(),
    ];
    let out = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run(&args)
    })
    .await?;
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(
        out.status.success(),
        "exit {}:\n{stdout}\n{stderr}",
        out.status
    );
    // What ran and what was skipped, with the reasons: the default run's tests but those
    // needing a second driver instance the run cannot deploy, and sanity (no CSI endpoint).
    let cases = junit_cases(&read(&output.join("junit.xml")));
    let outcomes: Vec<String> = cases.iter().map(|(n, o)| format!("{n}: {o}")).collect();
    insta::assert_snapshot!("existing_cluster_outcomes", outcomes.join("\n"));
    let report = read(&output.join("report.md"));
    assert!(report.contains("through --kubeconfig"), "{report}");
    // Nothing of the run is left on the cluster or in the cloud.
    env.teardown().await?;
    Ok(())
}

/// `--backend containers --install operator`: the control plane and every node in a container
/// of its own, the driver installed by the Manila operator; RWX across nodes and the RWO
/// Multi-Attach refusal pass as on the embedded default, and the run leaves no container,
/// network or directory.
#[test]
fn a_cluster_in_containers_runs_the_suites_with_the_driver_the_operator_installed() {
    let dir = scratch("conformance-containers-");
    let output = dir.path().join("out");
    let out = run(&[
        "--backend",
        "containers",
        "--install",
        "operator",
        "--suite",
        "multiVolume",
        "--focus",
        "concurrently access the single volume from pods on different node|Multi-Attach",
        "--output",
        output.to_str().unwrap(),
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("starting a cluster in containers")
            && stderr.contains("installed by the Manila operator"),
        "{stderr}"
    );
    let cases = junit_cases(&read(&output.join("junit.xml")));
    for name in [
        "[multiVolume] should concurrently access the single volume from pods on different node",
        "[multiVolume] should refuse a ReadWriteOnce volume on a second node (Multi-Attach) until the first pod is gone",
        "[teardown] the run leaves nothing behind",
    ] {
        assert!(
            cases.iter().any(|(n, o)| n == name && o == "passed"),
            "{name} did not pass: {cases:?}"
        );
    }
    let report = read(&output.join("report.md"));
    assert!(report.contains("containers cluster"), "{report}");
    // No container or network of the backend is left (those of runs still in progress,
    // other tests of this nextest run, aside).
    let objects = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(cluster::containers::labelled_objects())
        .unwrap();
    let left: Vec<_> = objects
        .iter()
        .filter(|o| !control_plane::run_dir::is_held(&o.run_dir))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// The node-loss case of `disruption` on the containers backend: a node frozen under a writer
/// of a ReadWriteOnce volume; the test passes (its steps are on its timeline), and on the
/// embedded default the same case is skipped with the reason.
#[test]
fn a_lost_node_keeps_its_volume_until_kubernetes_frees_it_on_the_containers_backend() {
    let dir = scratch("conformance-node-loss-");
    let output = dir.path().join("out");
    let out = run(&[
        "--backend",
        "containers",
        "--suite",
        "disruption",
        "--focus",
        "lost node",
        "--output",
        output.to_str().unwrap(),
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let cases = junit_cases(&read(&output.join("junit.xml")));
    let lost = cases
        .iter()
        .find(|(n, _)| n.starts_with("[disruption] should keep a lost node's"))
        .unwrap_or_else(|| panic!("no node-loss case: {cases:?}"));
    assert_eq!(lost.1, "passed", "{cases:?}\n{stderr}");
    let timelines = output.join("timelines/disruption");
    let timeline = walk(&timelines)
        .iter()
        .map(|p| read(p))
        .find(|t| t.contains("frozen"))
        .unwrap_or_else(|| {
            panic!(
                "no timeline with the node frozen in {}",
                timelines.display()
            )
        });
    for seen in [
        "NotReady",
        "evicted; replacement",
        "Multi-Attach",
        "thawed",
        "Ready on",
    ] {
        assert!(
            timeline.contains(seen),
            "{seen:?} not on the timeline:\n{timeline}"
        );
    }
}

/// A cluster where the driver is not installed: exit 2 naming the driver, no test runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_without_the_driver_is_refused() -> anyhow::Result<()> {
    testkit::init_tracing("cluster=info,node_agent=info,control_plane=info,pod_runtime=info");
    let cluster = EmbeddedCluster::start(EmbeddedOptions {
        nodes: 1,
        zones: vec!["zone-a".into()],
        ..Default::default()
    })
    .await?;
    let kubeconfig = cluster.description().kubeconfig.display().to_string();
    let spec = workspace(SPEC).display().to_string();
    let out = tokio::task::spawn_blocking(move || {
        run(&["--kubeconfig", &kubeconfig, "--driver-spec", &spec])
    })
    .await?;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("has no CSIDriver manila.csi.openstack.org and no node lists it"),
        "{stderr}"
    );
    cluster.stop().await?;
    Ok(())
}

/// `--keep`: after the tests the cluster stays up (the kubeconfig printed works, the driver is
/// there) until the process is told to stop; then it tears down and exits with the result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_leaves_the_cluster_up_until_told_to_stop() -> anyhow::Result<()> {
    use std::io::BufRead;
    let dir = scratch("conformance-keep-");
    let output = dir.path().join("out");
    let mut child = Command::new(conformance())
        .args([
            "run",
            "--plain",
            "--keep",
            "--suite",
            "provisioning",
            "--focus",
            "claim's size",
        ])
        .arg("--output")
        .arg(&output)
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(dir.path().join("stderr"))?)
        .spawn()?;
    let stdout = child.stdout.take().expect("piped stdout");
    let kubeconfig = tokio::task::spawn_blocking(move || {
        let mut lines = std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok);
        let found = lines
            .by_ref()
            .find_map(|line| line.strip_prefix("KUBECONFIG=").map(PathBuf::from));
        // Keep reading, as a terminal would, until the process ends.
        std::thread::spawn(move || lines.for_each(drop));
        found
    })
    .await?;
    let stderr = || read(&dir.path().join("stderr"));
    let kubeconfig =
        kubeconfig.unwrap_or_else(|| panic!("no KUBECONFIG line; stderr:\n{}", stderr()));
    let cluster = cluster::Cluster::from_kubeconfig(&kubeconfig).await?;
    let run_dir = cluster.run_dir().to_path_buf();
    assert!(run_dir.is_dir());
    let drivers: kube::Api<k8s_openapi::api::storage::v1::CSIDriver> =
        kube::Api::all(cluster.client());
    assert!(drivers.get_opt("manila.csi.openstack.org").await?.is_some());

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.id())?),
        nix::sys::signal::Signal::SIGTERM,
    )?;
    let status = tokio::task::spawn_blocking(move || child.wait()).await??;
    assert!(status.success(), "exit {status}; stderr:\n{}", stderr());
    assert!(!run_dir.exists(), "{} left behind", run_dir.display());
    let cases = junit_cases(&read(&output.join("junit.xml")));
    assert!(
        cases
            .iter()
            .any(|(n, o)| n == "[teardown] the run leaves nothing behind" && o == "passed"),
        "{cases:?}"
    );
    Ok(())
}

/// A cloud the run does not start, given by a clouds.yaml: a `fake-openstack` process over
/// TLS (clouds.yaml's `cacert` names its CA file), whose NFS exports are directories of this
/// host that the NFS plugin binds (`--nfs-export-root`). Every suite runs against it and
/// leaves nothing in it.
#[test]
fn the_embedded_default_runs_against_a_cloud_given_by_clouds_yaml() {
    let dir = scratch("conformance-cloud-");
    let backend = dir.path().join("backend");
    std::fs::create_dir(&backend).unwrap();
    let clouds = dir.path().join("clouds.yaml");
    let fake = workspace_binaries::binary("fakes", "fake-openstack").unwrap();
    let mut cloud = Command::new(fake)
        .args(["--port", "0", "--tls", "--cloud-name", "external"])
        .args([
            "--availability-zone",
            "zone-a",
            "--availability-zone",
            "zone-b",
        ])
        .arg("--backend-root")
        .arg(&backend)
        .arg("--write-clouds-yaml")
        .arg(&clouds)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("fake-openstack.log")).unwrap())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !clouds.is_file() && std::time::Instant::now() < deadline {
        assert!(
            cloud.try_wait().unwrap().is_none(),
            "fake-openstack exited: {}",
            read(&dir.path().join("fake-openstack.log"))
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(clouds.is_file(), "no clouds.yaml after 30 s");

    let output = dir.path().join("out");
    let out = run(&[
        "--clouds-yaml",
        clouds.to_str().unwrap(),
        "--os-cloud",
        "external",
        "--nfs-export-root",
        backend.to_str().unwrap(),
        "--output",
        output.to_str().unwrap(),
    ]);
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(cloud.id()).unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    cloud.wait().unwrap();
    assert!(
        out.status.success(),
        "exit {}:\n{stdout}\n{stderr}",
        out.status
    );
    // The same tests run, pass and skip as on the default run's own fake cloud.
    let cases = junit_cases(&read(&output.join("junit.xml")));
    let outcomes: Vec<String> = cases.iter().map(|(n, o)| format!("{n}: {o}")).collect();
    insta::assert_snapshot!("default_run_outcomes", outcomes.join("\n"));
    let report = read(&output.join("report.md"));
    assert!(report.contains("(cloud external)"), "{report}");
    // Every share the run made went again: the backend holds no share directory.
    let left: Vec<_> = std::fs::read_dir(backend.join("shares"))
        .map(|d| d.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

/// The resilience suites run only when named (see `run::tests` for the plan); then every
/// test runs alone, passes, and writes its timeline (what was injected when, what the writers
/// saw) into the run's output. One run per suite keeps each under nextest's time limit. The
/// upgrade test starts a cluster of its own, so the run's needs only one node.
#[rstest]
#[case::disruption("disruption", "longest stall", &[])]
#[case::faults("faults", "ProvisioningFailed", &[])]
#[case::upgrade("upgrade", "upgrade N-1 → N: writer stall", &["--nodes", "1"])]
fn a_resilience_suite_runs_when_named_and_writes_its_timelines(
    #[case] suite: &str,
    #[case] seen: &str,
    #[case] extra: &[&str],
) {
    let dir = scratch("conformance-resilience-");
    let output = dir.path().join("out");
    let mut args = vec!["--suite", suite, "--output", output.to_str().unwrap()];
    args.extend(extra);
    let out = run(&args);
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(
        out.status.success(),
        "exit {}:\n{stdout}\n{stderr}",
        out.status
    );
    let cases = junit_cases(&read(&output.join("junit.xml")));
    let outcomes: Vec<String> = cases.iter().map(|(n, o)| format!("{n}: {o}")).collect();
    insta::assert_snapshot!(format!("{suite}_outcomes"), outcomes.join("\n"));
    let timelines = walk(&output.join("timelines").join(suite));
    let passed = cases
        .iter()
        .filter(|(n, o)| n.starts_with(&format!("[{suite}] ")) && o == "passed")
        .count();
    assert!(passed > 0, "{cases:?}");
    assert_eq!(timelines.len(), passed, "{timelines:?}");
    let all: String = timelines.iter().map(|p| read(p)).collect();
    assert!(all.contains("inject"), "{all}");
    assert!(all.contains(seen), "{all}");
}
