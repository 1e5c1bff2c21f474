//! `conformance run` with the Cinder driver's spec file: the Cinder driver deployed on the
//! embedded default with the fake Cinder and Nova, through every suite its spec file claims.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod conformance_common;

use conformance_common::{junit_cases, read, run, scratch, text, workspace};

const CINDER_SPEC: &str = "fixtures/driver-specs/cinder.yaml";

/// The Cinder driver through every suite its spec file claims: block volumes, fsGroup, node
/// expansion, volume limits, clones and topology run here (the Manila default skips them),
/// and the sanity cases run with mounted and raw block volumes.
#[test]
fn the_cinder_run_passes_every_suite_its_spec_file_claims() {
    let out_dir = scratch("conformance-cinder-");
    let output = out_dir.path().join("out");
    let out = run(&[
        "--driver-spec",
        workspace(CINDER_SPEC).to_str().unwrap(),
        "--output",
        output.to_str().unwrap(),
    ]);
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
        "volumeMode",
        "fsGroup",
        "topology",
        "volumeLimits",
        "teardown",
    ] {
        let passed = cases
            .iter()
            .filter(|(n, o)| n.starts_with(&format!("[{suite}] ")) && o == "passed")
            .count();
        assert!(passed > 0, "no passed test of suite {suite}: {cases:?}");
    }
    assert!(
        cases.iter().any(|(n, o)| n.starts_with("[sanity] ")
            && n.ends_with(" (raw block)")
            && o == "passed"),
        "no sanity case ran with raw block volumes: {cases:?}"
    );
    let outcomes: Vec<String> = cases.iter().map(|(n, o)| format!("{n}: {o}")).collect();
    insta::assert_snapshot!("cinder_run_outcomes", outcomes.join("\n"));
    let report = read(&output.join("report.md"));
    assert!(report.starts_with("# Conformance run: PASSED"), "{report}");
    assert!(
        report.contains("- driver: cinder.csi.openstack.org"),
        "{report}"
    );
    assert!(report.contains("- backend: embedded"), "{report}");
}
