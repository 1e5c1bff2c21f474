//! Runs the cases one after the other, each in its own [`CaseContext`], with a timeout,
//! its mount and staging directories, and cleanup of whatever it created, even when it
//! failed or timed out.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::case::{Case, Verdict};
use super::cases;
use super::config::SanityConfig;
use super::context::{CaseContext, Session};
use super::error::Result;
use super::report::{CaseReport, Outcome, Report};

/// Longest the cleanup of one case may take.
const CLEANUP_TIMEOUT: Duration = Duration::from_secs(300);

/// Runs every case of the suite against the configured endpoint.
pub async fn run(config: SanityConfig) -> Result<Report> {
    run_with_progress(config, |_| {}).await
}

/// Like [`run`], calling `progress` after each case.
pub async fn run_with_progress(
    config: SanityConfig,
    progress: impl FnMut(&CaseReport),
) -> Result<Report> {
    run_cases(config, &cases::all(), progress).await
}

/// Runs `cases` (a subset or an extension of [`cases::all`]).
pub async fn run_cases(
    config: SanityConfig,
    cases: &[Case],
    mut progress: impl FnMut(&CaseReport),
) -> Result<Report> {
    let started = Instant::now();
    let mut warnings: Vec<String> = config
        .secrets
        .unknown_sections
        .iter()
        .map(|s| format!("secrets file section {s:?} is not used by any case"))
        .collect();
    let session = Arc::new(Session::connect(config).await?);
    if let Some(reason) = match &session.controller {
        super::context::Service::Broken(reason) => Some(reason),
        _ => None,
    } {
        warnings.push(format!("controller service: {reason}"));
    }
    let mut report = Report {
        endpoint: session.config().endpoint.to_string(),
        warnings,
        ..Report::default()
    };
    for case in cases {
        let case_report = run_case(&session, case).await;
        tracing::info!(case = %case_report.name, outcome = case_report.outcome.kind(), "case done");
        progress(&case_report);
        report.cases.push(case_report);
    }
    report.duration = started.elapsed();
    Ok(report)
}

async fn run_case(session: &Arc<Session>, case: &Case) -> CaseReport {
    let name = case.name();
    let started = Instant::now();
    let outcome = match session.config().filter.excludes(&name) {
        Some(reason) => Outcome::Skipped(reason),
        None => {
            let mut cx = CaseContext::new(Arc::clone(session));
            let mut outcome = match prepare_dirs(&mut cx) {
                Err(problem) => Outcome::Failed(problem),
                Ok(()) => {
                    let timeout = session.config().case_timeout;
                    match tokio::time::timeout(timeout, (case.run)(&mut cx)).await {
                        Ok(Ok(())) => Outcome::Passed,
                        Ok(Err(Verdict::Fail(reason))) => Outcome::Failed(reason),
                        Ok(Err(Verdict::Skip(reason))) => Outcome::Skipped(reason),
                        Err(_) => Outcome::Failed(format!("timed out after {timeout:?}")),
                    }
                }
            };
            let mut problems = match tokio::time::timeout(CLEANUP_TIMEOUT, cx.cleanup()).await {
                Ok(problems) => problems,
                Err(_) => vec![format!("cleanup timed out after {CLEANUP_TIMEOUT:?}")],
            };
            problems.extend(remove_dirs(&cx.created_dirs));
            if !problems.is_empty() {
                let cleanup = format!("cleanup failed: {}", problems.join("; "));
                outcome = match outcome {
                    Outcome::Failed(reason) => Outcome::Failed(format!("{reason}; {cleanup}")),
                    _ => Outcome::Failed(cleanup),
                };
            }
            outcome
        }
    };
    CaseReport {
        group: case.group.to_owned(),
        name,
        outcome,
        duration: started.elapsed(),
    }
}

/// Creates the mount and staging directories that do not exist yet (remembering them).
fn prepare_dirs(cx: &mut CaseContext) -> std::result::Result<(), String> {
    let dirs = [
        cx.config().mount_dir.clone(),
        cx.config().staging_dir.clone(),
    ];
    for dir in dirs {
        if dir.is_dir() {
            continue;
        }
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create directory {}: {e}", dir.display()))?;
        cx.created_dirs.push(dir);
    }
    Ok(())
}

/// Removes the directories a case created; one left non-empty means the plugin left
/// something behind (e.g. a target path NodeUnpublishVolume should have removed).
fn remove_dirs(dirs: &[PathBuf]) -> Vec<String> {
    dirs.iter()
        .filter_map(|dir| {
            std::fs::remove_dir(dir)
                .err()
                .map(|e| format!("cannot remove {}: {e}{}", dir.display(), entries(dir)))
        })
        .collect()
}

fn entries(dir: &Path) -> String {
    match std::fs::read_dir(dir) {
        Ok(read) => {
            let names: Vec<String> = read
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            if names.is_empty() {
                String::new()
            } else {
                format!(" (left inside: {})", names.join(", "))
            }
        }
        Err(_) => String::new(),
    }
}
