//! Runs the cases one after the other, each in its own [`CaseContext`], with a timeout,
//! its mount and staging directories, and cleanup of whatever it created, even when it
//! failed, timed out or was interrupted.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::case::Case;
use super::cases;
use super::config::SanityConfig;
use super::context::CaseContext;
use super::error::Result;
use super::report::{CaseReport, Interruption, Outcome, Report};
use super::session::Session;
use super::verdict::Verdict;

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
    progress: impl FnMut(&CaseReport),
) -> Result<Report> {
    // Never interrupted: the sender stays alive and silent.
    let (_never, mut interrupts) = mpsc::channel(1);
    run_interruptible(config, cases, progress, &mut interrupts).await
}

/// Like [`run_cases`], stopped by what `interrupts` receives (a signal's name, e.g.
/// `SIGINT`): the running case is cut short, what it created is cleaned up (calls cut off
/// in flight included), no further case runs, and the report's
/// [`interrupted`](Report::interrupted) says so, with what cleanup could not remove. A
/// second message while cleaning up abandons the cleanup (and reports what is left).
pub async fn run_interruptible(
    config: SanityConfig,
    cases: &[Case],
    mut progress: impl FnMut(&CaseReport),
    interrupts: &mut mpsc::Receiver<String>,
) -> Result<Report> {
    let started = Instant::now();
    let mut warnings: Vec<String> = config
        .secrets
        .unknown_sections
        .iter()
        .map(|s| format!("secrets file section {s:?} is not used by any case"))
        .collect();
    let endpoint = config.endpoint.to_string();
    let session = tokio::select! {
        session = Session::connect(config) => Arc::new(session?),
        signal = next(interrupts) => {
            return Ok(Report {
                endpoint,
                warnings,
                duration: started.elapsed(),
                interrupted: Some(Interruption { signal, case: None, left: Vec::new() }),
                ..Report::default()
            });
        }
    };
    if let Some(reason) = match &session.controller {
        super::session::Service::Broken(reason) => Some(reason),
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
        let (case_report, interruption) = run_case(&session, case, interrupts).await;
        tracing::info!(case = %case_report.name, outcome = case_report.outcome.kind(), "case done");
        progress(&case_report);
        report.cases.push(case_report);
        if interruption.is_some() {
            report.interrupted = interruption;
            break;
        }
    }
    report.duration = started.elapsed();
    Ok(report)
}

/// The next interrupt; never, once every sender is gone.
async fn next(interrupts: &mut mpsc::Receiver<String>) -> String {
    match interrupts.recv().await {
        Some(signal) => signal,
        None => std::future::pending().await,
    }
}

async fn run_case(
    session: &Arc<Session>,
    case: &Case,
    interrupts: &mut mpsc::Receiver<String>,
) -> (CaseReport, Option<Interruption>) {
    let name = case.name();
    let started = Instant::now();
    let mut interruption = None;
    let outcome = match session.config().filter.excludes(&name) {
        Some(reason) => Outcome::Skipped(reason),
        None => {
            let mut cx = CaseContext::new(Arc::clone(session));
            let mut outcome = match prepare_dirs(&mut cx).await {
                Err(problem) => Outcome::Failed(problem),
                Ok(()) => {
                    let timeout = session.config().case_timeout;
                    tokio::select! {
                        finished = tokio::time::timeout(timeout, (case.run)(&mut cx)) => match finished {
                            Ok(Ok(())) => Outcome::Passed,
                            Ok(Err(Verdict::Fail(reason))) => Outcome::Failed(reason),
                            Ok(Err(Verdict::Skip(reason))) => Outcome::Skipped(reason),
                            Err(_) => Outcome::Failed(format!("timed out after {timeout:?}")),
                        },
                        signal = next(interrupts) => {
                            let outcome = Outcome::Failed(format!("interrupted by {signal}"));
                            interruption = Some(Interruption {
                                signal,
                                case: Some(name.clone()),
                                left: Vec::new(),
                            });
                            outcome
                        }
                    }
                }
            };
            let mut problems = tokio::select! {
                cleaned = tokio::time::timeout(CLEANUP_TIMEOUT, cx.cleanup()) => match cleaned {
                    Ok(problems) => problems,
                    Err(_) => vec![format!("cleanup timed out after {CLEANUP_TIMEOUT:?}")],
                },
                signal = next(interrupts) => {
                    let interruption = interruption.get_or_insert_with(|| Interruption {
                        signal: signal.clone(),
                        case: Some(name.clone()),
                        left: Vec::new(),
                    });
                    interruption.left = cx.leftovers();
                    vec![format!("cleanup abandoned on {signal}")]
                }
            };
            problems.extend(
                super::paths::remove_made(&cx.made_paths, &session.config().path_commands).await,
            );
            if let Some(interruption) = &mut interruption {
                // What cleanup could not undo is left; so is a directory it could not
                // remove (a mount still inside, for one).
                interruption.left.extend(
                    problems
                        .iter()
                        .filter(|p| !p.starts_with("cleanup abandoned"))
                        .cloned(),
                );
                interruption.left.sort();
                interruption.left.dedup();
            }
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
    let report = CaseReport {
        group: case.group.to_owned(),
        name,
        outcome,
        duration: started.elapsed(),
    };
    (report, interruption)
}

/// Makes the case's mount and staging directories: by the create commands when given,
/// else those that do not exist yet (remembering what to remove).
async fn prepare_dirs(cx: &mut CaseContext) -> std::result::Result<(), String> {
    let config = cx.config().clone();
    let commands = &config.path_commands;
    let (mount_dir, made) = super::paths::make_dir(
        "mount",
        &config.mount_dir,
        commands.create_mount.as_deref(),
        commands.remove_mount.as_deref(),
        commands,
    )
    .await?;
    cx.made_paths.extend(made);
    cx.mount_dir = mount_dir;
    let (staging_dir, made) = super::paths::make_dir(
        "staging",
        &config.staging_dir,
        commands.create_staging.as_deref(),
        commands.remove_staging.as_deref(),
        commands,
    )
    .await?;
    cx.made_paths.extend(made);
    cx.staging_dir = staging_dir;
    Ok(())
}
