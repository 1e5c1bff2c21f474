//! The logging set-up every binary of the workspace shares: `tracing` to stderr, the level
//! from klog's `-v` ([`level_for`]) or the binary's default filter unless `RUST_LOG` says
//! otherwise, and ANSI colours only on a terminal.
//!
//! Colours are for people: when stderr is a pipe or a file (`kubectl logs`, a log file the
//! harness keeps, CI output) the lines are plain text, so they read and grep the same
//! everywhere. `NO_COLOR` (non-empty) turns colours off on a terminal too, as
//! tracing-subscriber does by default.

use std::ffi::OsStr;
use std::io::{IsTerminal, Stderr};

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::Layer;
use tracing_subscriber::fmt::format::{DefaultFields, Format};

/// The tracing level klog's `-v` corresponds to for the sidecars and the operator (the
/// drivers map it as [`crate::klog::LogFlags::default_filter`] says).
pub fn level_for(verbosity: u8) -> &'static str {
    match verbosity {
        0 | 1 => "warn",
        2 | 3 => "info",
        4 => "debug",
        _ => "trace",
    }
}

/// Whether log lines get ANSI colours: only on a terminal, and not when `NO_COLOR` is set
/// to a non-empty value (`no_color` is its value).
pub fn use_ansi(is_terminal: bool, no_color: Option<&OsStr>) -> bool {
    is_terminal && no_color.is_none_or(OsStr::is_empty)
}

/// [`use_ansi`] for this process's stderr and environment.
pub fn stderr_ansi() -> bool {
    use_ansi(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    )
}

/// `RUST_LOG` when it is set (and valid), else `default_filter` (e.g. `"info"`,
/// `"warn,kube_client=off"`).
pub fn filter(default_filter: &str) -> EnvFilter {
    EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter))
}

/// The formatting layer of [`init`]: stderr, colours as [`stderr_ansi`] decides. For a
/// binary that builds its own subscriber (e.g. with a reloadable filter).
pub fn stderr_layer<S>() -> Layer<S, DefaultFields, Format, fn() -> Stderr> {
    tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr as fn() -> Stderr)
        .with_ansi(stderr_ansi())
}

/// Installs the global subscriber with the level klog's `-v` stands for ([`level_for`]),
/// unless `RUST_LOG` is set. Once per process; later calls are ignored.
pub fn init(verbosity: u8) {
    init_with_default(level_for(verbosity));
}

/// Installs the global subscriber with [`filter`]`(default_filter)`. Once per process;
/// later calls are ignored.
pub fn init_with_default(default_filter: &str) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter(default_filter))
        .with_writer(std::io::stderr)
        .with_ansi(stderr_ansi())
        .try_init();
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn output_that_is_not_a_terminal_is_plain() {
        assert!(!use_ansi(false, None));
        assert!(!use_ansi(false, Some(OsStr::new(""))));
        // A file (as `kubectl logs` and the harness's log files see it) is no terminal.
        let file = tempfile::tempfile().unwrap();
        assert!(!use_ansi(file.is_terminal(), None));
    }

    #[test]
    fn a_terminal_gets_colours_unless_no_color_is_set() {
        assert!(use_ansi(true, None));
        assert!(use_ansi(true, Some(OsStr::new(""))));
        assert!(!use_ansi(true, Some(OsStr::new("1"))));
    }

    #[test]
    fn klog_verbosity_maps_to_levels() {
        let levels: Vec<&str> = (0..=6).map(level_for).collect();
        assert_eq!(
            levels,
            ["warn", "warn", "info", "info", "debug", "trace", "trace"]
        );
    }
}
