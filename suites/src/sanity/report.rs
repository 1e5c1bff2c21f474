//! The result of a run: one outcome per case, as JUnit XML (for CI) and a human summary.

use std::fmt::Write as _;
use std::time::Duration;

use quick_junit::{NonSuccessKind, TestCase, TestCaseStatus, TestSuite};
use serde::Serialize;

use super::error::{Error, Result};

/// How a case ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Every check held and cleanup succeeded.
    Passed,
    /// A check failed, the case timed out, or its cleanup failed: why.
    Failed(String),
    /// Not applicable to this plugin, or filtered out: why.
    Skipped(String),
}

impl Outcome {
    /// `passed`, `failed` or `skipped`.
    pub fn kind(&self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Failed(_) => "failed",
            Outcome::Skipped(_) => "skipped",
        }
    }
}

/// One case's result.
#[derive(Debug, Clone, Serialize)]
pub struct CaseReport {
    /// The case's group (`Identity Service`, `Node Service`, …).
    pub group: String,
    /// The full case name.
    pub name: String,
    /// How it ended.
    pub outcome: Outcome,
    /// How long it took, cleanup included.
    #[serde(skip)]
    pub duration: Duration,
}

/// A run stopped by a signal (Ctrl-C): the case it cut short and what its cleanup left.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Interruption {
    /// `SIGINT` or `SIGTERM`.
    pub signal: String,
    /// The case running when it came, if any (it is reported as failed).
    pub case: Option<String>,
    /// What could not be cleaned up (empty: everything the run created is gone).
    pub left: Vec<String>,
}

impl Interruption {
    /// One sentence for the user.
    pub fn describe(&self) -> String {
        let during = match &self.case {
            Some(case) => format!(" during {case:?}"),
            None => String::new(),
        };
        if self.left.is_empty() {
            format!(
                "interrupted by {}{during}: the volumes, snapshots, stages, publications and directories the run created were removed; the remaining cases were not run",
                self.signal
            )
        } else {
            format!(
                "interrupted by {}{during}: the remaining cases were not run, and cleanup left: {}",
                self.signal,
                self.left.join("; ")
            )
        }
    }
}

/// The results of a run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// The endpoint tested.
    pub endpoint: String,
    /// Every case, in the order run.
    pub cases: Vec<CaseReport>,
    /// Notes about the configuration (e.g. unknown secrets sections).
    pub warnings: Vec<String>,
    /// Wall-clock time of the run.
    #[serde(skip)]
    pub duration: Duration,
    /// Set when a signal stopped the run before every case ran.
    pub interrupted: Option<Interruption>,
}

impl Report {
    fn count(&self, kind: &str) -> usize {
        self.cases
            .iter()
            .filter(|c| c.outcome.kind() == kind)
            .count()
    }
    /// Cases that passed.
    pub fn passed(&self) -> usize {
        self.count("passed")
    }
    /// Cases that failed.
    pub fn failed(&self) -> usize {
        self.count("failed")
    }
    /// Cases skipped.
    pub fn skipped(&self) -> usize {
        self.count("skipped")
    }
    /// True when no case failed and the run was not interrupted.
    pub fn success(&self) -> bool {
        self.failed() == 0 && self.interrupted.is_none()
    }

    /// The failed cases.
    pub fn failures(&self) -> impl Iterator<Item = &CaseReport> {
        self.cases
            .iter()
            .filter(|c| matches!(c.outcome, Outcome::Failed(_)))
    }

    /// A human summary: each failure and skip with its reason, then the totals.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "CSI sanity against {}", self.endpoint);
        for warning in &self.warnings {
            let _ = writeln!(out, "warning: {warning}");
        }
        for case in &self.cases {
            match &case.outcome {
                Outcome::Passed => {
                    let _ = writeln!(out, "  PASS  {} ({:.2?})", case.name, case.duration);
                }
                Outcome::Skipped(reason) => {
                    let _ = writeln!(out, "  SKIP  {}\n        {reason}", case.name);
                }
                Outcome::Failed(reason) => {
                    let _ = writeln!(out, "  FAIL  {}\n        {reason}", case.name);
                }
            }
        }
        let _ = writeln!(
            out,
            "Ran {} of {} cases in {:.1?}",
            self.cases.len() - self.skipped(),
            self.cases.len(),
            self.duration
        );
        let _ = writeln!(
            out,
            "{} passed, {} failed, {} skipped",
            self.passed(),
            self.failed(),
            self.skipped()
        );
        if let Some(interruption) = &self.interrupted {
            let _ = writeln!(out, "{}", interruption.describe());
        }
        out
    }

    /// JUnit XML: one test suite per group, one test case per case (skips with their reason).
    pub fn to_junit(&self) -> Result<String> {
        let mut report = quick_junit::Report::new("CSI sanity");
        report.set_time(self.duration);
        let mut groups: Vec<&str> = Vec::new();
        for case in &self.cases {
            if !groups.contains(&case.group.as_str()) {
                groups.push(&case.group);
            }
        }
        for group in groups {
            let mut suite = TestSuite::new(group);
            for case in self.cases.iter().filter(|c| c.group == group) {
                let status = match &case.outcome {
                    Outcome::Passed => TestCaseStatus::success(),
                    Outcome::Failed(reason) => {
                        let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
                        status.set_message(reason.as_str());
                        status
                    }
                    Outcome::Skipped(reason) => {
                        let mut status = TestCaseStatus::skipped();
                        status.set_message(reason.as_str());
                        status
                    }
                };
                let mut test_case = TestCase::new(case.name.as_str(), status);
                test_case.set_classname(group).set_time(case.duration);
                suite.add_test_case(test_case);
            }
            report.add_test_suite(suite);
        }
        report.to_string().map_err(|e| Error::Junit(e.to_string()))
    }

    /// JUnit XML as Ginkgo writes it for csi-sanity (`--ginkgo.junit-report`): one
    /// `<testsuite name="CSI Driver Test Suite">` holding every case as
    /// `<testcase name="[It] <full name>" classname="CSI Driver Test Suite" status=…>`,
    /// a skip as `<skipped message="skipped - <reason>">`, a failure as
    /// `<failure message=… type="failed">`, so tools reading csi-sanity's report read
    /// this one. `timestamp` is when the run started (UTC).
    pub fn to_ginkgo_junit(&self, timestamp: chrono::DateTime<chrono::Utc>) -> String {
        const SUITE: &str = "CSI Driver Test Suite";
        let secs = |d: Duration| format!("{:.6}", d.as_secs_f64());
        let (tests, failures, skipped) = (self.cases.len(), self.failed(), self.skipped());
        let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let _ = writeln!(
            out,
            "  <testsuites tests=\"{tests}\" disabled=\"0\" errors=\"0\" failures=\"{failures}\" time=\"{}\">",
            secs(self.duration)
        );
        let _ = writeln!(
            out,
            "      <testsuite name=\"{SUITE}\" package=\"{}\" tests=\"{tests}\" disabled=\"0\" skipped=\"{skipped}\" errors=\"0\" failures=\"{failures}\" time=\"{}\" timestamp=\"{}\">",
            xml_escape(&self.endpoint),
            secs(self.duration),
            timestamp.format("%Y-%m-%dT%H:%M:%S")
        );
        let _ = writeln!(out, "          <properties>");
        let _ = writeln!(
            out,
            "              <property name=\"SuiteSucceeded\" value=\"{}\"></property>",
            self.success()
        );
        let _ = writeln!(out, "          </properties>");
        for case in &self.cases {
            let _ = write!(
                out,
                "          <testcase name=\"[It] {}\" classname=\"{SUITE}\" status=\"{}\" time=\"{}\">",
                xml_escape(&case.name),
                case.outcome.kind(),
                secs(case.duration)
            );
            match &case.outcome {
                Outcome::Passed => {}
                Outcome::Skipped(reason) => {
                    let _ = write!(
                        out,
                        "\n              <skipped message=\"skipped - {}\"></skipped>\n          ",
                        xml_escape(reason)
                    );
                }
                Outcome::Failed(reason) => {
                    let _ = write!(
                        out,
                        "\n              <failure message=\"{0}\" type=\"failed\">[FAILED] {0}</failure>\n          ",
                        xml_escape(reason)
                    );
                }
            }
            let _ = writeln!(out, "</testcase>");
        }
        let _ = writeln!(out, "      </testsuite>");
        let _ = writeln!(out, "  </testsuites>");
        out
    }
}

/// Text safe inside an XML attribute or element.
fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&#34;"),
            '\'' => out.push_str("&#39;"),
            '\n' => out.push_str("&#xA;"),
            '\t' => out.push_str("&#x9;"),
            c if (c as u32) < 0x20 && c != '\r' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn report() -> Report {
        let case = |name: &str, outcome| CaseReport {
            group: "Identity Service".into(),
            name: name.into(),
            outcome,
            duration: Duration::from_millis(5),
        };
        Report {
            endpoint: "unix:///csi.sock".into(),
            cases: vec![
                case("Identity Service Probe works", Outcome::Passed),
                case(
                    "Identity Service GetPluginInfo <name>",
                    Outcome::Failed("name \"\" is empty & invalid".into()),
                ),
                case(
                    "Identity Service other",
                    Outcome::Skipped("not supported".into()),
                ),
            ],
            warnings: vec!["unknown section X".into()],
            duration: Duration::from_secs(1),
            interrupted: None,
        }
    }

    #[test]
    fn an_interruption_is_not_a_success_and_says_what_is_left() {
        let mut report = report();
        report.cases.retain(|c| c.outcome == Outcome::Passed);
        assert!(report.success());
        report.interrupted = Some(Interruption {
            signal: "SIGINT".into(),
            case: Some("Node Service should work".into()),
            left: Vec::new(),
        });
        assert!(!report.success());
        assert!(
            report.summary().ends_with(
                "interrupted by SIGINT during \"Node Service should work\": the volumes, snapshots, stages, publications and directories the run created were removed; the remaining cases were not run\n"
            ),
            "{}",
            report.summary()
        );
        report.interrupted = Some(Interruption {
            signal: "SIGTERM".into(),
            case: None,
            left: vec!["volume v1".into(), "snapshot s1".into()],
        });
        assert!(
            report
                .summary()
                .contains("interrupted by SIGTERM: the remaining cases were not run, and cleanup left: volume v1; snapshot s1"),
            "{}",
            report.summary()
        );
    }

    #[test]
    fn totals_and_summary() {
        let report = report();
        assert_eq!(
            (report.passed(), report.failed(), report.skipped()),
            (1, 1, 1)
        );
        assert!(!report.success());
        let summary = report.summary();
        assert!(
            summary.ends_with("1 passed, 1 failed, 1 skipped\n"),
            "{summary}"
        );
        assert!(summary.contains("FAIL  Identity Service GetPluginInfo <name>"));
        assert!(summary.contains("not supported"));
        assert!(summary.contains("warning: unknown section X"));
    }

    #[test]
    fn ginkgo_junit_as_csi_sanity_writes_it() {
        let at = chrono::DateTime::parse_from_rfc3339("2026-11-25T10:00:00Z")
            .unwrap()
            .to_utc();
        let xml = report().to_ginkgo_junit(at);
        assert!(
            xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"),
            "{xml}"
        );
        assert!(
            xml.contains(
                r#"<testsuites tests="3" disabled="0" errors="0" failures="1" time="1.000000">"#
            ),
            "{xml}"
        );
        assert!(
            xml.contains(r#"<testsuite name="CSI Driver Test Suite" package="unix:///csi.sock" tests="3" disabled="0" skipped="1" errors="0" failures="1" time="1.000000" timestamp="2026-11-25T10:00:00">"#),
            "{xml}"
        );
        assert!(
            xml.contains(r#"<testcase name="[It] Identity Service Probe works" classname="CSI Driver Test Suite" status="passed" time="0.005000"></testcase>"#),
            "{xml}"
        );
        assert!(
            xml.contains(r#"<skipped message="skipped - not supported"></skipped>"#),
            "{xml}"
        );
        assert!(
            xml.contains(r#"name="[It] Identity Service GetPluginInfo &lt;name&gt;" classname="CSI Driver Test Suite" status="failed""#),
            "{xml}"
        );
        assert!(
            xml.contains(
                r#"<failure message="name &#34;&#34; is empty &amp; invalid" type="failed">"#
            ),
            "{xml}"
        );
        assert_eq!(xml.matches("<testcase ").count(), 3, "{xml}");
    }

    #[test]
    fn junit_escapes_and_counts() {
        let xml = report().to_junit().unwrap();
        assert!(xml.contains(r#"tests="3""#), "{xml}");
        assert!(xml.contains(r#"failures="1""#), "{xml}");
        assert!(xml.contains(r#"skipped="1""#), "{xml}");
        assert!(xml.contains("&lt;name&gt;"), "{xml}");
        assert!(xml.contains("is empty &amp; invalid"), "{xml}");
    }
}
