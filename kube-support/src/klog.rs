//! klog's command-line flags, as upstream's Go plugins register them: shared by the
//! drivers so they all accept the same logging flags.

use std::path::PathBuf;
use std::time::Duration;

use clap::ArgAction;

use crate::go_duration::parse_duration;

/// The klog flags upstream's binaries register (flatten it into a `clap::Parser`). `-v`
/// sets the log level when `RUST_LOG` is not set (see [`LogFlags::default_filter`]); the
/// others are accepted and have no effect: logs always go to stderr (klog's default
/// `--logtostderr=true`).
#[derive(Clone, Debug, Default, clap::Args)]
pub struct LogFlags {
    /// klog verbosity: 0-3 `info`, 4-5 `debug`, 6 and more `trace`.
    #[arg(short = 'v', long = "v", default_value_t = 0)]
    pub verbosity: u16,
    /// Per-file verbosity (`pattern=N,...`; accepted, no effect).
    #[arg(long)]
    pub vmodule: Option<String>,
    /// Log to stderr (accepted; logs always go to stderr).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", action = ArgAction::Set)]
    pub logtostderr: Option<bool>,
    /// Log to stderr as well as files (accepted; logs always go to stderr).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", action = ArgAction::Set)]
    pub alsologtostderr: Option<bool>,
    /// Log file (accepted, no effect).
    #[arg(long = "log_file")]
    pub log_file: Option<PathBuf>,
    /// Log directory (accepted, no effect).
    #[arg(long = "log_dir")]
    pub log_dir: Option<PathBuf>,
    /// Maximum log file size in MB (accepted, no effect).
    #[arg(long = "log_file_max_size")]
    pub log_file_max_size: Option<u64>,
    /// Logs at or above this severity go to stderr (accepted, no effect).
    #[arg(long)]
    pub stderrthreshold: Option<String>,
    /// Emit a stack trace at `file:line` (accepted, no effect).
    #[arg(long = "log_backtrace_at")]
    pub log_backtrace_at: Option<String>,
    /// Add the file directory to log headers (accepted, no effect).
    #[arg(long = "add_dir_header", num_args = 0..=1, default_missing_value = "true", action = ArgAction::Set)]
    pub add_dir_header: Option<bool>,
    /// No header prefixes in log lines (accepted, no effect).
    #[arg(long = "skip_headers", num_args = 0..=1, default_missing_value = "true", action = ArgAction::Set)]
    pub skip_headers: Option<bool>,
    /// No headers in log files (accepted, no effect).
    #[arg(long = "skip_log_headers", num_args = 0..=1, default_missing_value = "true", action = ArgAction::Set)]
    pub skip_log_headers: Option<bool>,
    /// Log each severity only to its own file (accepted, no effect).
    #[arg(long = "one_output", num_args = 0..=1, default_missing_value = "true", action = ArgAction::Set)]
    pub one_output: Option<bool>,
    /// Maximum seconds between log flushes (accepted, no effect).
    #[arg(long = "log-flush-frequency", value_parser = parse_duration)]
    pub log_flush_frequency: Option<Duration>,
}

impl LogFlags {
    /// The tracing filter `-v` stands for, used when `RUST_LOG` is not set.
    pub fn default_filter(&self) -> &'static str {
        match self.verbosity {
            0..=3 => "info",
            4..=5 => "debug",
            _ => "trace",
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Command {
        #[command(flatten)]
        logging: LogFlags,
    }

    fn parse(args: &[&str]) -> Result<LogFlags, clap::Error> {
        Command::try_parse_from(std::iter::once("plugin").chain(args.iter().copied()))
            .map(|c| c.logging)
    }

    /// Every klog flag, in the spellings upstream's manifests and charts use.
    #[test]
    fn every_klog_flag_is_accepted() {
        let flags = parse(&[
            "-v=5",
            "--logtostderr",
            "--alsologtostderr=false",
            "--log_file=/var/log/plugin.log",
            "--log_dir=/var/log",
            "--log_file_max_size=1800",
            "--vmodule=controller*=4",
            "--stderrthreshold=2",
            "--add_dir_header",
            "--skip_headers=false",
            "--skip_log_headers",
            "--one_output=true",
            "--log_backtrace_at=:0",
            "--log-flush-frequency=5s",
        ])
        .unwrap();
        assert_eq!(flags.verbosity, 5);
        assert_eq!(flags.logtostderr, Some(true));
        assert_eq!(flags.alsologtostderr, Some(false));
        assert_eq!(flags.skip_headers, Some(false));
        assert_eq!(flags.log_flush_frequency, Some(Duration::from_secs(5)));
        assert!(parse(&["--log_file_max_size=big"]).is_err());
        assert!(parse(&["--no-such-klog-flag"]).is_err());
    }

    #[test]
    fn verbosity_picks_the_filter() {
        for args in [&["-v=2"][..], &["--v=2"], &["-v", "2"], &["--v", "2"]] {
            assert_eq!(parse(args).unwrap().verbosity, 2, "{args:?}");
        }
        assert_eq!(parse(&[]).unwrap().default_filter(), "info");
        assert_eq!(parse(&["--v=3"]).unwrap().default_filter(), "info");
        assert_eq!(parse(&["--v=4"]).unwrap().default_filter(), "debug");
        assert_eq!(parse(&["--v=6"]).unwrap().default_filter(), "trace");
    }
}
