//! Progress of a run on stderr: on a terminal a progress bar (what is running, how many are
//! done, elapsed time) with a line per finished test above it; otherwise (CI logs, files)
//! plain lines with the elapsed time.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use super::report::{Outcome, TestReport};

/// Where the runner reports what it does.
pub trait Progress: Send + Sync {
    /// A set-up or teardown step begins.
    fn step(&self, message: &str);
    /// The tests begin: `total` of them.
    fn tests_begin(&self, total: usize);
    /// A test starts.
    fn test_started(&self, name: &str);
    /// A test ended.
    fn test_finished(&self, report: &TestReport);
    /// The tests are done.
    fn tests_end(&self);
}

/// Progress on stderr: a bar on a terminal, lines otherwise.
pub struct Console {
    started: Instant,
    bar: Option<ProgressBar>,
    running: Mutex<Vec<String>>,
}

impl Console {
    /// A bar when stderr is a terminal (and `plain` is false), lines otherwise.
    pub fn new(plain: bool) -> Self {
        Console {
            started: Instant::now(),
            bar: (!plain && std::io::stderr().is_terminal()).then(ProgressBar::hidden),
            running: Mutex::new(Vec::new()),
        }
    }

    fn elapsed(&self) -> String {
        format!("[{:>6.1}s]", self.started.elapsed().as_secs_f64())
    }

    fn line(&self, text: &str) {
        match &self.bar {
            Some(bar) if !bar.is_hidden() => bar.println(text),
            _ => eprintln!("{text}"),
        }
    }

    fn show_running(&self) {
        let Some(bar) = &self.bar else { return };
        let running = self.running.lock().map(|r| r.clone()).unwrap_or_default();
        let message = match running.as_slice() {
            [] => String::new(),
            [one] => one.clone(),
            [first, rest @ ..] => format!("{first} (+{} more)", rest.len()),
        };
        bar.set_message(message);
    }
}

impl Progress for Console {
    fn step(&self, message: &str) {
        self.line(&format!("{} {message}", self.elapsed()));
    }

    fn tests_begin(&self, total: usize) {
        if let Some(bar) = &self.bar {
            bar.set_length(total as u64);
            bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {pos}/{len} tests {wide_msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
            bar.enable_steady_tick(Duration::from_millis(200));
        }
        self.line(&format!("{} running {total} tests", self.elapsed()));
    }

    fn test_started(&self, name: &str) {
        if let Ok(mut running) = self.running.lock() {
            running.push(name.to_string());
        }
        if self.bar.is_none() {
            self.line(&format!("{} START {name}", self.elapsed()));
        }
        self.show_running();
    }

    fn test_finished(&self, report: &TestReport) {
        let name = format!("[{}] {}", report.suite, report.name);
        if let Ok(mut running) = self.running.lock() {
            running.retain(|r| r != &name);
        }
        let (word, detail) = match &report.outcome {
            Outcome::Passed => ("PASS", String::new()),
            Outcome::Failed(message) => (
                "FAIL",
                format!(
                    "\n           {}",
                    message.lines().next().unwrap_or_default()
                ),
            ),
            Outcome::Skipped(reason) => ("SKIP", format!(" ({reason})")),
        };
        self.line(&format!(
            "{} {word} {name} ({:.1}s){detail}",
            self.elapsed(),
            report.duration.as_secs_f64()
        ));
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
        self.show_running();
    }

    fn tests_end(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Progress nowhere (library callers and tests).
#[derive(Debug, Default)]
pub struct Silent;

impl Progress for Silent {
    fn step(&self, _: &str) {}
    fn tests_begin(&self, _: usize) {}
    fn test_started(&self, _: &str) {}
    fn test_finished(&self, _: &TestReport) {}
    fn tests_end(&self) {}
}
