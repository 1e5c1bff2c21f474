//! The sanity suite against the real `manila-csi-plugin` (controller + node, NFS) forwarding
//! to the real `nfs-csi-plugin` (local mounter, private mount namespace), both as processes
//! on unix sockets, with the fake Keystone + Manila cloud in-process.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeSet;

use csi_proto::v1::controller_client::ControllerClient;
use csi_proto::v1::{self, node_client::NodeClient};
use fakes::{FakeCloud, SecretKind};
use suites::sanity::case::Case;
use suites::sanity::context::CaseContext;
use suites::sanity::verdict::{CaseResult, Verdict};
use suites::sanity::{self, CsiSecrets, Outcome, SanityConfig};
use support::Plugin;
use tempfile::TempDir;

/// Cases the Manila driver is known to fail, with the driver deviation each one shows
/// (see the suite's report to the driver's owner). Empty means the driver passes every
/// applicable case; an entry whose case passes makes the test fail so it gets removed.
const EXPECTED_FAILURES: &[(&str, &str)] = &[];

/// The fake cloud and both plugins (fields drop in order: plugins first, scratch dir last).
struct Manila {
    manila: Plugin,
    nfs: Plugin,
    cloud: FakeCloud,
    dir: TempDir,
}

impl Manila {
    async fn start() -> Manila {
        let dir = support::scratch();
        let cloud = testkit::cloud::fake_cloud().await;
        let nfs = support::start_nfs_plugin(dir.path()).await;
        let manila = support::start_manila_plugin(dir.path(), &nfs).await;
        Manila {
            manila,
            nfs,
            cloud,
            dir,
        }
    }

    fn config(&self) -> SanityConfig {
        let secrets_file =
            support::write_secrets_file(self.dir.path(), &self.cloud.secret(SecretKind::Password));
        let mut config = SanityConfig::new(self.manila.endpoint.clone());
        config.mount_dir = self.dir.path().join("csi-mount");
        config.staging_dir = self.dir.path().join("csi-staging");
        config.secrets = CsiSecrets::from_yaml_file(&secrets_file).unwrap();
        config
    }

    fn logs(&self) -> String {
        format!(
            "--- manila-csi-plugin log:\n{}\n--- nfs-csi-plugin log:\n{}",
            self.manila.log(),
            self.nfs.log()
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manila_driver_passes_every_applicable_sanity_case() {
    let env = Manila::start().await;
    let report = sanity::run(env.config()).await.unwrap();
    let summary = report.summary();
    println!("{summary}");

    let failed: BTreeSet<&str> = report.failures().map(|c| c.name.as_str()).collect();
    let expected: BTreeSet<&str> = EXPECTED_FAILURES.iter().map(|(name, _)| *name).collect();
    assert_eq!(
        failed,
        expected,
        "unexpected failures (or expected failures that now pass):\n{summary}\n{}",
        env.logs()
    );
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    insta::assert_yaml_snapshot!("manila_outcomes", support::outcomes(&report));

    let junit = report.to_junit().unwrap();
    assert!(junit.contains(&format!(r#"tests="{}""#, report.cases.len())));

    let leftovers = env.cloud.leftovers();
    assert!(
        leftovers.is_empty(),
        "the suite left {leftovers:?} in the cloud"
    );
    let left_in_mount_dir = env.dir.path().join("csi-mount").exists();
    assert!(!left_in_mount_dir, "the mount dir was not removed");
}

/// A case that provisions, stages and publishes, then fails: the runner must still undo
/// all of it.
async fn provision_then_fail(cx: &mut CaseContext) -> CaseResult {
    let volume = cx
        .must_create_volume(cx.create_request(&cx.unique("doomed")))
        .await?;
    let snapshot = cx
        .create_ready_snapshot(cx.snapshot_request(&cx.unique("doomed-snap"), &volume.volume_id))
        .await?;
    let stage = v1::NodeStageVolumeRequest {
        volume_id: volume.volume_id.clone(),
        staging_target_path: cx.staging_path(),
        volume_capability: Some(cx.writer()),
        secrets: cx.config().secrets.node_stage_volume_secret.clone(),
        volume_context: volume.volume_context.clone(),
        ..Default::default()
    };
    cx.node_stage(stage)
        .await
        .map_err(|s| Verdict::Fail(s.to_string()))?;
    let publish = v1::NodePublishVolumeRequest {
        volume_id: volume.volume_id.clone(),
        target_path: cx.target_path(),
        volume_capability: Some(cx.writer()),
        secrets: cx.config().secrets.node_publish_volume_secret.clone(),
        volume_context: volume.volume_context.clone(),
        ..Default::default()
    };
    cx.node_publish(publish)
        .await
        .map_err(|s| Verdict::Fail(s.to_string()))?;
    Err(Verdict::Fail(format!(
        "failing on purpose with {} and {} published",
        volume.volume_id, snapshot.snapshot_id
    )))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runner_cleans_up_after_a_failing_case() {
    let env = Manila::start().await;
    let doomed = Case {
        group: "Cleanup",
        describe: "",
        it: "fails after provisioning, staging and publishing",
        run: |cx| Box::pin(provision_then_fail(cx)),
    };
    let report = sanity::run_cases(env.config(), &[doomed], |_| {})
        .await
        .unwrap();
    let [case] = report.cases.as_slice() else {
        panic!("{report:?}")
    };
    match &case.outcome {
        Outcome::Failed(reason) => {
            assert!(reason.starts_with("failing on purpose"), "{reason}");
            assert!(
                !reason.contains("cleanup failed"),
                "{reason}\n{}",
                env.logs()
            );
        }
        other => panic!("expected the failure, got {other:?}\n{}", env.logs()),
    }
    let leftovers = env.cloud.leftovers();
    assert!(leftovers.is_empty(), "cleanup left {leftovers:?}");
    assert!(
        !env.dir.path().join("csi-mount/target").exists(),
        "the target path was not unpublished"
    );
    // The plugin's namespace has no mount left under the scratch directory.
    let mounts = std::fs::read_to_string(format!("/proc/{}/mountinfo", env.nfs.pid())).unwrap();
    let scratch = env.dir.path().display().to_string();
    assert!(!mounts.contains(&scratch), "mounts left:\n{mounts}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manila_driver_response_shapes() {
    let env = Manila::start().await;
    let channel = csi_proto::connect(&env.manila.endpoint).await.unwrap();
    let (info, capabilities) = support::identity_shapes(&channel).await;
    insta::assert_debug_snapshot!("manila_plugin_info", info);
    insta::assert_debug_snapshot!("manila_plugin_capabilities", capabilities);
    let controller = ControllerClient::new(channel.clone())
        .controller_get_capabilities(v1::ControllerGetCapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner();
    insta::assert_debug_snapshot!("manila_controller_capabilities", controller);
    let node_capabilities = support::node_capabilities(&channel).await;
    insta::assert_debug_snapshot!("manila_node_capabilities", node_capabilities);
    let node_info = NodeClient::new(channel)
        .node_get_info(v1::NodeGetInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    insta::assert_debug_snapshot!("manila_node_info", node_info);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csi_sanity_binary_runs_against_the_manila_driver() {
    let env = Manila::start().await;
    let secrets =
        support::write_secrets_file(env.dir.path(), &env.cloud.secret(SecretKind::Password));
    let junit = env.dir.path().join("junit.xml");
    let ginkgo_junit = env.dir.path().join("ginkgo-junit.xml");
    let mount = env.dir.path().join("bin-mount");
    let staging = env.dir.path().join("bin-staging");
    // Go-style single-dash flags, as csi-sanity users write them.
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_csi-sanity"))
        .arg(format!("-csi.endpoint={}", env.manila.endpoint))
        .arg(format!("-csi.secrets={}", secrets.display()))
        .arg(format!("--csi.mountdir={}", mount.display()))
        .arg(format!("--csi.stagingdir={}", staging.display()))
        .arg("--csi.idempotentcount=3")
        .arg(format!("--junit={}", junit.display()))
        .arg(format!("-ginkgo.junit-report={}", ginkgo_junit.display()))
        // Repeated focus and skip, as Ginkgo takes them: any focus, no skip.
        .args([
            "-ginkgo.focus=Node Service",
            "--ginkgo.focus",
            "Identity",
            "--skip",
            "NodeExpandVolume",
            "-ginkgo.skip=NodeGetVolumeStats",
        ])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{stdout}\n{stderr}\n{}",
        env.logs()
    );
    assert!(
        stdout.ends_with("18 passed, 0 failed, 74 skipped\n"),
        "{stdout}"
    );
    assert!(
        stderr.contains(
            "[SKIP] Node Service NodeGetVolumeStats should fail when no volume id is provided"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("[PASS] Node Service should be idempotent"),
        "{stderr}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains(r#"<testsuite name="Node Service""#), "{xml}");
    // As csi-sanity (Ginkgo) writes it: one suite, `[It] <full name>`, status attributes.
    let xml = std::fs::read_to_string(&ginkgo_junit).unwrap();
    assert!(
        xml.contains(r#"<testsuite name="CSI Driver Test Suite" package=""#)
            && xml.contains(r#"tests="92" disabled="0" skipped="74" errors="0" failures="0""#),
        "{xml}"
    );
    assert!(
        xml.contains(r#"<testcase name="[It] Node Service should be idempotent" classname="CSI Driver Test Suite" status="passed""#),
        "{xml}"
    );
    assert!(
        xml.contains(
            r#"<skipped message="skipped - matched by skip /NodeGetVolumeStats/"></skipped>"#
        ),
        "{xml}"
    );
    assert!(!stdout.contains("fake-password") && !stderr.contains("fake-password"));
    assert!(env.cloud.leftovers().is_empty());
}

/// The same suite as `conformance sanity`, with `--endpoint` for `--csi.endpoint`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_sanity_runs_against_the_manila_driver() {
    let env = Manila::start().await;
    let secrets =
        support::write_secrets_file(env.dir.path(), &env.cloud.secret(SecretKind::Password));
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_conformance"))
        .arg("sanity")
        .arg(format!("--endpoint={}", env.manila.endpoint))
        .arg(format!("--csi.secrets={}", secrets.display()))
        .arg(format!(
            "--csi.mountdir={}",
            env.dir.path().join("c-mount").display()
        ))
        .arg(format!(
            "--csi.stagingdir={}",
            env.dir.path().join("c-staging").display()
        ))
        .args(["--focus", "Identity|CreateVolume"])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{stdout}\n{stderr}\n{}",
        env.logs()
    );
    assert!(stdout.contains(" passed, 0 failed, "), "{stdout}");
    assert!(
        stderr.contains("[PASS] Identity Service GetPluginInfo"),
        "{stderr}"
    );
    assert!(env.cloud.leftovers().is_empty());
}

#[test]
fn csi_sanity_binary_names_bad_flags() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_csi-sanity"))
        .args([
            "--csi.endpoint",
            "unix:///nonexistent/csi.sock",
            "--focus",
            "(",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--focus \"(\" is not a valid regular expression"),
        "{stderr}"
    );

    let output = std::process::Command::new(env!("CARGO_BIN_EXE_csi-sanity"))
        .args(["--csi.endpoint", "unix:///nonexistent/csi.sock"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("unix:///nonexistent/csi.sock"), "{stderr}");
}
