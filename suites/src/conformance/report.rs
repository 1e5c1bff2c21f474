//! The result of `conformance run`: one [`TestReport`] per test, grouped by suite, as a
//! summary table for the terminal, Markdown for the report file and JUnit XML for CI.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use quick_junit::{NonSuccessKind, TestCaseStatus, TestSuite};

pub use crate::sanity::Outcome;

/// How one test ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestReport {
    /// Its suite.
    pub suite: String,
    /// Its name.
    pub name: String,
    /// Passed, failed (why) or skipped (why).
    pub outcome: Outcome,
    /// How long it took, its clean-up included.
    pub duration: Duration,
    /// Where its evidence is (failed tests).
    pub evidence: Option<PathBuf>,
}

/// One step of setting the run up, and how long it took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetupStep {
    /// What it was.
    pub name: String,
    /// How long it took.
    pub duration: Duration,
}

impl SetupStep {
    /// The step `name` that took `duration`.
    pub fn new(name: &str, duration: Duration) -> Self {
        SetupStep {
            name: name.into(),
            duration,
        }
    }
}

/// Counts and time of one suite.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SuiteSummary {
    /// The suite.
    pub name: String,
    /// Tests passed.
    pub passed: usize,
    /// Tests failed.
    pub failed: usize,
    /// Tests skipped.
    pub skipped: usize,
    /// The sum of its tests' durations (tests of a suite may run side by side).
    pub duration: Duration,
}

/// The result of a run.
#[derive(Debug, Clone, Default)]
pub struct RunReport {
    /// What ran against: the cluster.
    pub target: String,
    /// The driver under test.
    pub driver: String,
    /// The driver spec file.
    pub spec: Option<PathBuf>,
    /// Where the cluster runs (`embedded`, `containers`, `an existing cluster`).
    pub backend: String,
    /// The OpenStack release the fake cloud emulates (none against a real cloud).
    pub openstack_release: Option<String>,
    /// The set-up steps.
    pub setup: Vec<SetupStep>,
    /// Every test, in run order.
    pub tests: Vec<TestReport>,
    /// Things the user should know (what was not checked, and why).
    pub notes: Vec<String>,
    /// The whole run, set-up and teardown included.
    pub duration: Duration,
}

impl RunReport {
    /// Whether no test failed.
    pub fn success(&self) -> bool {
        self.failed() == 0
    }

    /// How many tests failed.
    pub fn failed(&self) -> usize {
        self.tests
            .iter()
            .filter(|t| matches!(t.outcome, Outcome::Failed(_)))
            .count()
    }

    /// One summary per suite, in order of first appearance.
    pub fn suites(&self) -> Vec<SuiteSummary> {
        let mut suites: Vec<SuiteSummary> = Vec::new();
        for test in &self.tests {
            let index = match suites.iter().position(|s| s.name == test.suite) {
                Some(index) => index,
                None => {
                    suites.push(SuiteSummary {
                        name: test.suite.clone(),
                        ..Default::default()
                    });
                    suites.len() - 1
                }
            };
            let suite = &mut suites[index];
            match test.outcome {
                Outcome::Passed => suite.passed += 1,
                Outcome::Failed(_) => suite.failed += 1,
                Outcome::Skipped(_) => suite.skipped += 1,
            }
            suite.duration += test.duration;
        }
        suites
    }

    /// The summary table for the terminal: a line per suite, then the failures with their
    /// evidence, then totals.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        let suites = self.suites();
        let width = suites
            .iter()
            .map(|s| s.name.len())
            .max()
            .unwrap_or(5)
            .max(5);
        let _ = writeln!(
            out,
            "{:<width$}  {:>6}  {:>6}  {:>7}  {:>9}",
            "suite", "passed", "failed", "skipped", "time"
        );
        for suite in &suites {
            let _ = writeln!(
                out,
                "{:<width$}  {:>6}  {:>6}  {:>7}  {:>8.1}s",
                suite.name,
                suite.passed,
                suite.failed,
                suite.skipped,
                suite.duration.as_secs_f64()
            );
        }
        let failures: Vec<&TestReport> = self
            .tests
            .iter()
            .filter(|t| matches!(t.outcome, Outcome::Failed(_)))
            .collect();
        if !failures.is_empty() {
            let _ = writeln!(out, "\nFailed:");
            for test in failures {
                if let Outcome::Failed(message) = &test.outcome {
                    let _ = writeln!(out, "  [{}] {}", test.suite, test.name);
                    let _ = writeln!(out, "      {}", first_line(message));
                    if let Some(evidence) = &test.evidence {
                        let _ = writeln!(out, "      evidence: {}", evidence.display());
                    }
                }
            }
        }
        for note in &self.notes {
            let _ = writeln!(out, "note: {note}");
        }
        let (passed, failed, skipped) = self.totals();
        let _ = writeln!(
            out,
            "\n{passed} passed, {failed} failed, {skipped} skipped in {:.1}s",
            self.duration.as_secs_f64()
        );
        out
    }

    fn totals(&self) -> (usize, usize, usize) {
        self.suites().iter().fold((0, 0, 0), |(p, f, s), suite| {
            (p + suite.passed, f + suite.failed, s + suite.skipped)
        })
    }

    /// The report as Markdown: what ran where, set-up times, the table per suite, every
    /// failure with its message and evidence, every skip with its reason. Paths of evidence
    /// are written relative to `base` (the report file's directory) when below it.
    pub fn markdown(&self, base: &Path) -> String {
        let mut out = String::new();
        let (passed, failed, skipped) = self.totals();
        let verdict = if self.success() { "PASSED" } else { "FAILED" };
        let _ = writeln!(out, "# Conformance run: {verdict}\n");
        let _ = writeln!(out, "- cluster: {}", self.target);
        let _ = writeln!(out, "- driver: {}", self.driver);
        if let Some(spec) = &self.spec {
            let _ = writeln!(out, "- driver spec: `{}`", spec.display());
        }
        let _ = writeln!(out, "- backend: {}", self.backend);
        if let Some(release) = &self.openstack_release {
            let _ = writeln!(
                out,
                "- OpenStack release emulated by the fake cloud: {release}"
            );
        }
        let _ = writeln!(
            out,
            "- {passed} passed, {failed} failed, {skipped} skipped in {:.1} s",
            self.duration.as_secs_f64()
        );
        if !self.setup.is_empty() {
            let _ = writeln!(out, "\n## Set-up\n\n| step | time |\n|---|---:|");
            for step in &self.setup {
                let _ = writeln!(
                    out,
                    "| {} | {:.1} s |",
                    step.name,
                    step.duration.as_secs_f64()
                );
            }
        }
        let _ = writeln!(
            out,
            "\n## Suites\n\n| suite | passed | failed | skipped | time |\n|---|---:|---:|---:|---:|"
        );
        for suite in self.suites() {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {:.1} s |",
                suite.name,
                suite.passed,
                suite.failed,
                suite.skipped,
                suite.duration.as_secs_f64()
            );
        }
        let failures: Vec<&TestReport> = self
            .tests
            .iter()
            .filter(|t| matches!(t.outcome, Outcome::Failed(_)))
            .collect();
        if !failures.is_empty() {
            let _ = writeln!(out, "\n## Failures");
            for test in failures {
                if let Outcome::Failed(message) = &test.outcome {
                    let _ = writeln!(out, "\n### [{}] {}\n", test.suite, test.name);
                    if let Some(evidence) = &test.evidence {
                        let shown = evidence.strip_prefix(base).unwrap_or(evidence);
                        let _ = writeln!(
                            out,
                            "Evidence (objects, events, logs): [`{}`]({})\n",
                            shown.display(),
                            shown.display()
                        );
                    }
                    let _ = writeln!(out, "```text\n{}\n```", message.trim_end());
                }
            }
        }
        let _ = writeln!(
            out,
            "\n## Tests\n\n| suite | test | result | time |\n|---|---|---|---:|"
        );
        for test in &self.tests {
            let result = match &test.outcome {
                Outcome::Passed => "passed".to_string(),
                Outcome::Failed(_) => "**FAILED**".to_string(),
                Outcome::Skipped(reason) => format!("skipped: {}", escape(reason)),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.1} s |",
                test.suite,
                escape(&test.name),
                result,
                test.duration.as_secs_f64()
            );
        }
        if !self.notes.is_empty() {
            let _ = writeln!(out, "\n## Notes\n");
            for note in &self.notes {
                let _ = writeln!(out, "- {note}");
            }
        }
        out
    }

    /// The report as JUnit XML: one test suite per suite.
    pub fn junit(&self) -> Result<String, String> {
        let mut report = quick_junit::Report::new("conformance");
        report.set_time(self.duration);
        for summary in self.suites() {
            let mut suite = TestSuite::new(summary.name.as_str());
            for test in self.tests.iter().filter(|t| t.suite == summary.name) {
                let status = match &test.outcome {
                    Outcome::Passed => TestCaseStatus::success(),
                    Outcome::Failed(message) => {
                        let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
                        status.set_message(first_line(message));
                        status.set_description(message.as_str());
                        status
                    }
                    Outcome::Skipped(reason) => {
                        let mut status = TestCaseStatus::skipped();
                        status.set_message(reason.as_str());
                        status
                    }
                };
                let mut case = quick_junit::TestCase::new(test.name.as_str(), status);
                case.set_classname(summary.name.as_str())
                    .set_time(test.duration);
                suite.add_test_case(case);
            }
            report.add_test_suite(suite);
        }
        report.to_string().map_err(|e| e.to_string())
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

/// Markdown table cells: no line breaks, no bare pipes.
fn escape(text: &str) -> String {
    first_line(text).replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn report() -> RunReport {
        let test = |suite: &str, name: &str, outcome| TestReport {
            suite: suite.into(),
            name: name.into(),
            outcome,
            duration: Duration::from_millis(1500),
            evidence: None,
        };
        RunReport {
            target: "embedded cluster (3 nodes)".into(),
            driver: "manila.csi.openstack.org".into(),
            spec: Some("fixtures/driver-specs/manila-nfs.yaml".into()),
            backend: "embedded".into(),
            openstack_release: Some("2026.1".into()),
            setup: vec![SetupStep {
                name: "cluster".into(),
                duration: Duration::from_secs(7),
            }],
            tests: vec![
                test("provisioning", "should provision", Outcome::Passed),
                TestReport {
                    evidence: Some("/out/evidence/provisioning/x".into()),
                    ..test(
                        "provisioning",
                        "should | fail",
                        Outcome::Failed("claim not Bound\nlast seen: Pending".into()),
                    )
                },
                test(
                    "topology",
                    "should honour zones",
                    Outcome::Skipped("driver does not claim topology".into()),
                ),
            ],
            notes: vec!["no host mounts checked".into()],
            duration: Duration::from_secs(60),
        }
    }

    #[test]
    fn suites_are_counted_in_order() {
        let suites = report().suites();
        assert_eq!(
            suites
                .iter()
                .map(|s| (s.name.as_str(), s.passed, s.failed, s.skipped))
                .collect::<Vec<_>>(),
            [("provisioning", 1, 1, 0), ("topology", 0, 0, 1)]
        );
        assert!(!report().success());
    }

    #[test]
    fn the_summary_table_names_failures_and_evidence() {
        insta::assert_snapshot!(report().summary());
    }

    #[test]
    fn markdown_has_tables_failures_and_skip_reasons() {
        insta::assert_snapshot!(report().markdown(Path::new("/out")));
    }

    #[test]
    fn junit_has_a_suite_per_suite() {
        let xml = report().junit().unwrap();
        assert!(
            xml.contains(r#"<testsuite name="provisioning" tests="2""#),
            "{xml}"
        );
        assert!(
            xml.contains(r#"<skipped message="driver does not claim topology"/>"#),
            "{xml}"
        );
        assert!(
            xml.contains(r#"<failure message="claim not Bound""#),
            "{xml}"
        );
    }
}
