//! Running test cases on a [`Target`]: each applicable test in a namespace of its own, up to
//! `parallel` at a time, with a timeout; a panic or a timeout is a failure like any other;
//! a failed test's evidence is collected before its namespace goes; and every test, passed or
//! not, must leave nothing behind (see [`leftovers`](super::leftovers)).

use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use tokio::sync::Semaphore;

use super::evidence;
use super::leftovers::{self, Footprint};
use super::progress::Progress;
use super::report::{Outcome, TestReport};
use crate::e2e::timeline::Timeline;
use crate::e2e::workload::{Workload, WorkloadTimeouts};
use crate::registry::{Target, TestCase, TestContext, TestError};

/// How tests run.
#[derive(Debug, Clone)]
pub struct RunnerOptions {
    /// How many tests run at the same time.
    pub parallel: usize,
    /// How long one test body may take.
    pub test_timeout: Duration,
    /// How long a test's clean-up may wait for each kind of object to go.
    pub cleanup_timeout: Duration,
    /// Where failed tests' evidence goes (`<dir>/<suite>/<test>/`); none when `None`.
    pub evidence_dir: Option<PathBuf>,
    /// Where tests' timelines go (`<dir>/<suite>/<test>.txt`); none when `None`.
    pub timeline_dir: Option<PathBuf>,
}

impl Default for RunnerOptions {
    fn default() -> Self {
        RunnerOptions {
            parallel: 4,
            test_timeout: Duration::from_secs(600),
            cleanup_timeout: Duration::from_secs(180),
            evidence_dir: None,
            timeline_dir: None,
        }
    }
}

/// Runs `cases` on `target` (see the module docs); their reports, in the order of `cases`.
pub async fn run_cases(
    target: Arc<Target>,
    cases: &[TestCase],
    options: &RunnerOptions,
    progress: Arc<dyn Progress>,
) -> Vec<TestReport> {
    let parallel = options.parallel.max(1);
    let slots = Arc::new(Semaphore::new(parallel));
    let mut tasks = Vec::new();
    for (index, case) in cases.iter().enumerate() {
        let case = *case;
        if let Some(reason) = skip_reason(&target, &case) {
            let report = TestReport {
                suite: case.suite.into(),
                name: case.name.into(),
                outcome: Outcome::Skipped(reason),
                duration: Duration::ZERO,
                evidence: None,
            };
            progress.test_finished(&report);
            tasks.push(tokio::spawn(async move { report }));
            continue;
        }
        let target = target.clone();
        let options = options.clone();
        let progress = progress.clone();
        let slots = slots.clone();
        tasks.push(tokio::spawn(async move {
            // An exclusive test takes every slot: it starts once the tests before it are done
            // and the tests after it wait for it (the semaphore is first come, first served).
            let wanted = if case.needs.exclusive { parallel } else { 1 };
            let _slots = slots.acquire_many_owned(wanted as u32).await;
            progress.test_started(&case.full_name());
            let report = run_one(&target, &case, index, &options).await;
            progress.test_finished(&report);
            report
        }));
    }
    let mut reports = Vec::new();
    for (task, case) in tasks.into_iter().zip(cases) {
        reports.push(match task.await {
            Ok(report) => report,
            Err(e) => TestReport {
                suite: case.suite.into(),
                name: case.name.into(),
                outcome: Outcome::Failed(format!("the test's task ended abnormally: {e}")),
                duration: Duration::ZERO,
                evidence: None,
            },
        });
    }
    reports
}

/// Why `case` does not apply to `target`, if it does not.
pub fn skip_reason(target: &Target, case: &TestCase) -> Option<String> {
    let needs = &case.needs;
    let driver = match target.driver(needs.driver) {
        Ok(driver) => driver,
        Err(reason) => return Some(reason),
    };
    for capability in needs.capabilities {
        if !driver.spec.has(*capability) {
            return Some(format!(
                "Driver {} does not support {} - skipping (capability {capability} is not claimed in its spec file)",
                driver.name,
                unsupported(*capability)
            ));
        }
    }
    if target.nodes.len() < needs.nodes {
        return Some(format!(
            "needs {} schedulable nodes, the cluster has {}",
            needs.nodes,
            target.nodes.len()
        ));
    }
    if needs.cloud && target.cloud.is_none() {
        return Some(
            "needs the cloud's API, which this run cannot reach (give --clouds-yaml)".into(),
        );
    }
    if needs.manila && !driver.name.ends_with(crate::e2e::DRIVER_NAME) {
        return Some(format!(
            "a test of the Manila driver's own behaviour; the driver is {}",
            driver.name
        ));
    }
    if needs.cinder && driver.name != crate::e2e::cinder::CINDER_DRIVER_NAME {
        return Some(format!(
            "a test of the Cinder driver's own behaviour; the driver is {}",
            driver.name
        ));
    }
    if needs.fake_cloud && target.environment().and_then(|e| e.fake_cloud()).is_none() {
        return Some(
            "injects faults into the cloud: needs the run's own fake cloud (the embedded default without --clouds-yaml)".into(),
        );
    }
    if needs.own_cluster && target.environment().is_none() {
        return Some(
            "starts an embedded cluster of its own with another release of the driver: runs on the embedded default only (without --kubeconfig)".into(),
        );
    }
    if needs.snapshot_class && driver.snapshot_class.is_none() {
        return Some(format!(
            "driver {} names no SnapshotClass in its spec file",
            driver.name
        ));
    }
    None
}

async fn run_one(
    target: &Target,
    case: &TestCase,
    index: usize,
    options: &RunnerOptions,
) -> TestReport {
    let started = Instant::now();
    let report = |outcome, evidence| TestReport {
        suite: case.suite.into(),
        name: case.name.into(),
        outcome,
        duration: started.elapsed(),
        evidence,
    };
    let driver = match target.driver(case.needs.driver) {
        Ok(driver) => driver,
        Err(reason) => return report(Outcome::Skipped(reason), None),
    };
    let prefix = format!("{}-{}", slug(case.suite, 20), index + 1);
    let namespace = match target.cluster.namespace(&prefix).await {
        Ok(namespace) => namespace,
        Err(e) => {
            return report(
                Outcome::Failed(format!("creating the test's namespace: {e}")),
                None,
            );
        }
    };
    let workload =
        Workload::in_namespace(driver, namespace).with_timeouts(workload_timeouts(&driver.spec));
    let timeline = Timeline::new();
    let context = TestContext::new(case.full_name(), workload, driver, target, timeline.clone());
    let body = AssertUnwindSafe((case.run)(&context)).catch_unwind();
    let result = match tokio::time::timeout(options.test_timeout, body).await {
        Ok(Ok(result)) => result,
        Ok(Err(panic)) => Err(TestError::failed(format!(
            "panicked: {}",
            panic_message(panic.as_ref())
        ))),
        Err(_) => Err(TestError::failed(format!(
            "did not finish within {:?}",
            options.test_timeout
        ))),
    };
    let workload = context.into_workload();
    let footprint = match Footprint::of(&workload).await {
        Ok(footprint) => footprint,
        Err(e) => {
            tracing::warn!(
                namespace = workload.namespace(),
                "reading the test's volumes: {e}"
            );
            Footprint::default()
        }
    };
    let mut outcome = match result {
        Ok(()) => Outcome::Passed,
        Err(TestError::Skipped(reason)) => Outcome::Skipped(reason),
        Err(TestError::Failed(message)) => Outcome::Failed(message),
    };
    let mut evidence = None;
    if matches!(outcome, Outcome::Failed(_))
        && let Some(dir) = &options.evidence_dir
    {
        let dir = dir.join(slug(case.suite, 40)).join(slug(case.name, 80));
        match evidence::collect(&dir, &workload, &footprint, driver).await {
            Ok(dir) => evidence = Some(dir),
            Err(e) => tracing::warn!("writing the evidence to {}: {e}", dir.display()),
        }
        if !timeline.is_empty() {
            write_file(&dir.join("timeline.txt"), &timeline.render());
        }
    }
    if !timeline.is_empty()
        && let Some(dir) = &options.timeline_dir
    {
        let path = dir
            .join(slug(case.suite, 40))
            .join(format!("{}.txt", slug(case.name, 80)));
        write_file(&path, &timeline.render());
    }
    let cleaned = leftovers::clean_up(
        workload,
        &footprint,
        target.cloud.as_ref(),
        target.mounts_root.as_deref(),
        options.cleanup_timeout,
    )
    .await;
    if let Err(leftover) = cleaned {
        outcome = match outcome {
            Outcome::Failed(message) => Outcome::Failed(format!("{message}\nand {leftover}")),
            _ => Outcome::Failed(leftover),
        };
    }
    report(outcome, evidence)
}

/// Writes a report file, warning (not failing the test) when it cannot.
fn write_file(path: &std::path::Path, text: &str) {
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(path, text));
    if let Err(e) = written {
        tracing::warn!("writing {}: {e}", path.display());
    }
}

/// What a missing capability means, as upstream's skip messages say it.
fn unsupported(capability: driver_spec::Capability) -> &'static str {
    use driver_spec::Capability as C;
    match capability {
        C::Persistence => "persistence",
        C::Block => "BlockVolume",
        C::FsGroup => "FsGroup",
        C::VolumeMountGroup => "VolumeMountGroup",
        C::Exec => "exec",
        C::SnapshotDataSource => "snapshots",
        C::PvcDataSource => "cloning",
        C::OfflineSnapshotClone => "offline snapshots and clones",
        C::MultiPods => "multiple concurrent pods",
        C::Rwx | C::RwxFilesystemOnly | C::RwxBlockOnly => "ReadWriteMany",
        C::ControllerExpansion => "volume expansion",
        C::NodeExpansion => "node volume expansion",
        C::OfflineExpansion => "offline volume expansion",
        C::OnlineExpansion => "online volume expansion",
        C::VolumeLimits => "volume limits",
        C::SingleNodeVolume => "single node volumes",
        C::Topology => "topology",
        C::Capacity => "storage capacity",
        C::FsResizeFromSourceNotSupported => "resizing restored volumes",
        C::ReadWriteOncePod => "the ReadWriteOncePod access mode",
        C::MultiplePvsSameId => "multiple PVs with same volume ID",
        C::ReadOnlyMany => "ROX access mode",
        C::GroupSnapshot => "volume group snapshots",
    }
}

/// The spec file's timeouts for a test's waits.
fn workload_timeouts(spec: &driver_spec::DriverSpec) -> WorkloadTimeouts {
    use driver_spec::TimeoutName;
    let timeouts = &spec.timeouts;
    WorkloadTimeouts {
        claim_bound: timeouts.get(TimeoutName::ClaimProvision),
        pod_ready: timeouts.get(TimeoutName::PodStart),
        pod_deleted: timeouts.get(TimeoutName::PodDelete),
        snapshot_ready: timeouts.get(TimeoutName::SnapshotCreate),
        event: timeouts.get(TimeoutName::ClaimProvision),
    }
}

/// A panic's message.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "(no message)".into()
    }
}

/// `text` as a lowercase DNS-label-like name of at most `max` bytes.
pub fn slug(text: &str, max: usize) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    let mut out: String = out.chars().take(max).collect();
    while out.ends_with('-') {
        out.pop();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_lowercase_labels() {
        assert_eq!(slug("multiVolume", 20), "multivolume");
        assert_eq!(
            slug("should see each other's files (RWX)", 80),
            "should-see-each-other-s-files-rwx"
        );
        assert_eq!(slug("volume-expand", 7), "volume");
    }

    #[test]
    fn panic_messages_are_read_from_both_payload_kinds() {
        let panic = std::panic::catch_unwind(|| panic!("boom {}", 1)).unwrap_err();
        assert_eq!(panic_message(panic.as_ref()), "boom 1");
        let panic = std::panic::catch_unwind(|| panic!("static")).unwrap_err();
        assert_eq!(panic_message(panic.as_ref()), "static");
    }
}
