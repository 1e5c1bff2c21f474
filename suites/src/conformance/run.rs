//! One conformance run from start to end: [`plan`] checks the input and picks the tests
//! before anything starts (bad input is exit status 2); [`execute`] sets up the target, runs
//! the sanity suite and the storage tests side by side, and returns the report with the
//! target; [`finish`] tears the target down, proving the run left nothing behind.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use driver_spec::DriverSpec;
use regex::Regex;

use super::catalog;
use super::cluster_target::embedded::{self, EmbeddedOptions};
use super::cluster_target::existing::{self, ExistingOptions};
use super::progress::Progress;
use super::report::{Outcome, RunReport, TestReport};
use super::runner::{self, RunnerOptions};
use super::sanity_suite;
use super::secret_scan::{self, EventLog, Scanner};
use super::setup::SetupError;
use crate::registry::{DriverConfig, RunEnvironment, SANITY_SUITE, SUITES, Target, TestCase};
use crate::sanity::case::Case;

/// What the run runs against.
#[derive(Debug, Clone)]
pub enum TargetChoice {
    /// The embedded default, started for the run.
    Embedded(EmbeddedOptions),
    /// A cluster with the driver installed.
    Existing(ExistingOptions),
}

/// A run's configuration, as the command line gives it.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The driver spec file.
    pub spec: PathBuf,
    /// Suites to run (all but the opt-in ones when empty: see
    /// [`OPT_IN_SUITES`](catalog::OPT_IN_SUITES)).
    pub suites: Vec<String>,
    /// Suites not to run.
    pub skip_suites: Vec<String>,
    /// Only tests whose full name (`[suite] name`) matches.
    pub focus: Option<Regex>,
    /// No test whose full name matches.
    pub skip: Option<Regex>,
    /// The target.
    pub target: TargetChoice,
    /// How tests run.
    pub runner: RunnerOptions,
    /// Scratch space on this host (the sanity suite's sockets and mounts).
    pub scratch: PathBuf,
}

/// What a run will do, decided before anything starts.
#[derive(Debug)]
pub struct Plan {
    /// The parsed spec file.
    pub spec: DriverSpec,
    /// The storage tests to run, in order.
    pub cases: Vec<TestCase>,
    /// The sanity cases to run (none when the suite is not selected).
    pub sanity: Vec<Case>,
}

impl Plan {
    /// The driver configurations the tests need.
    pub fn configs(&self) -> BTreeSet<DriverConfig> {
        self.cases.iter().map(|c| c.needs.driver).collect()
    }

    /// How many tests the report will hold (the sanity cases, and the suite's own checks,
    /// once per volume access type the spec file allows).
    pub fn len(&self) -> usize {
        let per_access = if self.sanity.is_empty() {
            0
        } else {
            self.sanity.len() + sanity_suite::extra_tests(&self.spec)
        };
        self.cases.len() + per_access * sanity_suite::access_types(&self.spec).len()
    }

    /// Whether nothing is selected.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Checks the configuration (suite names, the spec file) and selects the tests.
pub fn plan(config: &RunConfig) -> Result<Plan, SetupError> {
    let known: Vec<&str> = SUITES.iter().map(|(name, _)| *name).collect();
    for name in config.suites.iter().chain(&config.skip_suites) {
        if !known.contains(&name.as_str()) {
            return Err(SetupError::Usage(format!(
                "unknown suite {name:?}; the suites are: {}",
                known.join(", ")
            )));
        }
    }
    let spec = DriverSpec::from_file(&config.spec).map_err(|e| SetupError::Spec(e.to_string()))?;
    let named = |suite: &str| config.suites.iter().any(|s| s == suite);
    let selected = |suite: &str| {
        (named(suite) || (config.suites.is_empty() && !catalog::OPT_IN_SUITES.contains(&suite)))
            && !config.skip_suites.iter().any(|s| s == suite)
    };
    let matches = |full_name: &str| {
        config.focus.as_ref().is_none_or(|f| f.is_match(full_name))
            && !config.skip.as_ref().is_some_and(|s| s.is_match(full_name))
    };
    let cases: Vec<TestCase> = catalog::storage_tests()
        .into_iter()
        .filter(|c| selected(c.suite) && matches(&c.full_name()))
        .collect();
    let sanity = if selected(SANITY_SUITE) {
        crate::sanity::cases::all()
            .into_iter()
            .filter(|c| matches(&format!("[{SANITY_SUITE}] {}", c.name())))
            .collect()
    } else {
        Vec::new()
    };
    let plan = Plan {
        spec,
        cases,
        sanity,
    };
    if plan.is_empty() {
        return Err(SetupError::Usage(
            "no test is selected: check --suite, --skip-suite, --focus and --skip".into(),
        ));
    }
    Ok(plan)
}

/// Sets up the target, runs the plan on it and returns the report (without teardown: see
/// [`finish`]) and the target. Set-up failures are errors; test failures are in the report.
pub async fn execute(
    config: &RunConfig,
    plan: Plan,
    progress: Arc<dyn Progress>,
) -> Result<(RunReport, Arc<Target>), SetupError> {
    let started = Instant::now();
    let mut report = RunReport {
        spec: Some(config.spec.clone()),
        driver: plan.spec.driver_info.name.clone(),
        backend: match &config.target {
            TargetChoice::Embedded(options) => options.backend.to_string(),
            TargetChoice::Existing(_) => "an existing cluster (--kubeconfig)".into(),
        },
        openstack_release: match &config.target {
            TargetChoice::Embedded(options) if options.clouds_yaml.is_none() => {
                Some(options.openstack_release.to_string())
            }
            _ => None,
        },
        ..RunReport::default()
    };
    let mut target = match &config.target {
        TargetChoice::Embedded(options) => {
            let options = EmbeddedOptions {
                configs: plan.configs(),
                ..options.clone()
            };
            let (target, steps) = embedded::start(&plan.spec, &options, progress.as_ref()).await?;
            report.setup = steps;
            target
        }
        TargetChoice::Existing(options) => {
            progress.step(&format!(
                "connecting to the cluster of {}",
                options.kubeconfig.display()
            ));
            existing::connect(&plan.spec, options).await?
        }
    };
    report.target = target.description.clone();
    if target.cloud.is_none() {
        report.notes.push(
            "no access to the cloud: shares and snapshots left behind were not checked (give --clouds-yaml)"
                .into(),
        );
    }
    if target.mounts_root.is_none() {
        report
            .notes
            .push("the nodes are other machines: mounts left behind were not checked".into());
    }
    if target.environment.is_some() {
        // Before any test: their Events go with their namespaces (see `finish`).
        target.events = Some(EventLog::start(target.cluster.client()));
    }
    let target = Arc::new(target);

    progress.tests_begin(plan.len());
    // Side by side in this task: the sanity cases' futures are not Send.
    let scratch = config.scratch.join("sanity");
    let sanity = async {
        if plan.sanity.is_empty() {
            return Vec::new();
        }
        sanity_suite::run(&target, plan.sanity, &scratch, progress.as_ref()).await
    };
    let storage = runner::run_cases(
        target.clone(),
        &plan.cases,
        &config.runner,
        progress.clone(),
    );
    let (sanity, storage) = tokio::join!(sanity, storage);
    progress.tests_end();
    report.tests = sanity;
    report.tests.extend(storage);
    report.duration = started.elapsed();
    Ok((report, target))
}

/// Tears the target down: on the embedded default first the look for the run's secrets in
/// every log, Event and the run's output so far (`output`; see [`secret_scan`]), added to
/// the report as the test `[teardown] no secret of the run in any log, Event or output`;
/// then the environment's teardown, which fails if any PV, VolumeSnapshotContent, share or
/// snapshot is left, added as `[teardown] the run leaves nothing behind`.
pub async fn finish(
    report: &mut RunReport,
    target: Arc<Target>,
    output: Option<&Path>,
    progress: &dyn Progress,
) {
    let started = Instant::now();
    let Ok(mut target) = Arc::try_unwrap(target) else {
        report
            .notes
            .push("the target is still in use: not torn down".into());
        return;
    };
    let Some(environment) = target.environment.take() else {
        return;
    };
    progress.step("looking for the run's secrets in every log, Event and output file");
    let scanned = Instant::now();
    let events = target.events.take();
    let (findings, looked_at) = secrets_found(&environment, events.as_ref(), report, output);
    drop(events);
    let outcome = if findings.is_empty() {
        progress.step(&format!("no secret found: {looked_at}"));
        Outcome::Passed
    } else {
        Outcome::Failed(format!(
            "{} place(s) hold a secret of the run ({looked_at}): {}",
            findings.len(),
            secret_scan::summarize(&findings, 12)
        ))
    };
    let test = TestReport {
        suite: "teardown".into(),
        name: "no secret of the run in any log, Event or output".into(),
        outcome,
        duration: scanned.elapsed(),
        evidence: None,
    };
    progress.test_finished(&test);
    report.tests.push(test);

    progress.step("tearing down the cluster");
    let torn_down = Instant::now();
    let outcome = match environment.teardown().await {
        Ok(()) => Outcome::Passed,
        Err(e) => Outcome::Failed(kube_support::error::error_chain(&e)),
    };
    let test = TestReport {
        suite: "teardown".into(),
        name: "the run leaves nothing behind".into(),
        outcome,
        duration: torn_down.elapsed(),
        evidence: None,
    };
    progress.test_finished(&test);
    report.tests.push(test);
    report.duration += started.elapsed();
}

/// The run's secrets (the driver Secret's, every token of the fake cloud) found in the logs
/// below the cluster's run directory, the files of `output`, the cluster's Events and the
/// tests' outcomes; with what was looked at.
fn secrets_found(
    environment: &RunEnvironment,
    events: Option<&EventLog>,
    report: &RunReport,
    output: Option<&Path>,
) -> (Vec<secret_scan::Finding>, String) {
    let tokens = environment
        .fake_cloud()
        .map(|cloud| cloud.issued_tokens())
        .unwrap_or_default();
    let scanner = Scanner::new(secret_scan::secret_values(
        &environment.driver_secret(),
        tokens,
    ));
    let (mut findings, logs) = scanner.scan_tree(environment.run_dir(), secret_scan::is_log);
    let mut outputs = 0;
    if let Some(output) = output {
        let (found, read) = scanner.scan_tree(output, |_| true);
        findings.extend(found);
        outputs = read;
    }
    for test in &report.tests {
        if let Outcome::Failed(message) | Outcome::Skipped(message) = &test.outcome {
            let place = format!("the outcome of [{}] {}", test.suite, test.name);
            findings.extend(scanner.scan_bytes(&place, message.as_bytes()));
        }
    }
    let (found, events) = events
        .map(|log| secret_scan::scan_events(log, &scanner))
        .unwrap_or_default();
    findings.extend(found);
    let looked_at = format!(
        "{} secret values looked for in {logs} logs, {outputs} output files, {events} Events and {} outcomes",
        scanner.len(),
        report.tests.len()
    );
    (findings, looked_at)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn config(suites: &[&str]) -> RunConfig {
        RunConfig {
            spec: workspace_binaries::root().join("fixtures/driver-specs/manila-nfs.yaml"),
            suites: suites.iter().map(|s| s.to_string()).collect(),
            skip_suites: Vec::new(),
            focus: None,
            skip: None,
            target: TargetChoice::Embedded(EmbeddedOptions::default()),
            runner: RunnerOptions::default(),
            scratch: std::env::temp_dir(),
        }
    }

    fn suites_of(plan: &Plan) -> BTreeSet<&'static str> {
        plan.cases.iter().map(|c| c.suite).collect()
    }

    #[test]
    fn the_opt_in_suites_run_only_when_named() {
        let default = plan(&config(&[])).unwrap();
        let suites = suites_of(&default);
        assert!(suites.contains("provisioning"), "{suites:?}");
        for opt_in in catalog::OPT_IN_SUITES {
            assert!(!suites.contains(opt_in), "{opt_in} in {suites:?}");
        }
        assert!(!default.sanity.is_empty());

        let named = plan(&config(&["provisioning", "faults"])).unwrap();
        let suites = suites_of(&named);
        assert_eq!(
            suites,
            BTreeSet::from(["provisioning", "faults"]),
            "{suites:?}"
        );
        assert!(named.sanity.is_empty());
    }

    #[test]
    fn an_unknown_suite_is_refused_with_the_list() {
        let error = plan(&config(&["nope"])).unwrap_err().to_string();
        assert!(error.contains("unknown suite \"nope\""), "{error}");
        assert!(error.contains("disruption"), "{error}");
    }
}
