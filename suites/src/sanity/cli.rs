//! The command line of the sanity suite, shared by the `csi-sanity` binary and
//! `conformance sanity`: csi-sanity's flags (Go-style single-dash spellings such as
//! `-csi.endpoint` are accepted too, see [`go_style_args`]), the configuration they make, and
//! a run printing each case and the summary.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::ArgAction;
use regex::Regex;

use super::{AccessType, CaseFilter, CsiSecrets, Outcome, PathCommands, SanityConfig};

/// Prints every case name.
pub fn list() {
    for case in super::cases::all() {
        println!("{}", case.name());
    }
}

/// csi-sanity's flags.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// CSI endpoint: unix:///path, a path, or tcp://host:port.
    #[arg(
        long = "csi.endpoint",
        visible_alias = "endpoint",
        env = "CSI_ENDPOINT",
        required_unless_present = "list"
    )]
    endpoint: Option<String>,
    /// A separate Controller endpoint (default: the same as --csi.endpoint).
    #[arg(long = "csi.controllerendpoint")]
    controller_endpoint: Option<String>,
    /// Parent directory of NodePublishVolume's target path (`<dir>/target`).
    #[arg(long = "csi.mountdir", default_value_os_t = std::env::temp_dir().join("csi-mount"))]
    mount_dir: PathBuf,
    /// NodeStageVolume's staging target path.
    #[arg(long = "csi.stagingdir", default_value_os_t = std::env::temp_dir().join("csi-staging"))]
    staging_dir: PathBuf,
    /// YAML file of secrets per RPC (CreateVolumeSecret, NodeStageVolumeSecret, …).
    #[arg(long = "csi.secrets")]
    secrets: Option<PathBuf>,
    /// YAML file of CreateVolume parameters.
    #[arg(long = "csi.testvolumeparameters")]
    volume_parameters: Option<PathBuf>,
    /// YAML file of mutable parameters (volume attribute class) for ControllerModifyVolume.
    #[arg(long = "csi.testvolumemutableparameters")]
    mutable_parameters: Option<PathBuf>,
    /// YAML file of CreateSnapshot parameters.
    #[arg(long = "csi.testsnapshotparameters")]
    snapshot_parameters: Option<PathBuf>,
    /// Size of test volumes in bytes.
    #[arg(long = "csi.testvolumesize", default_value_t = 10 * super::GIB)]
    volume_size: i64,
    /// Target size of expansions in bytes (default: test volume size + 1 GiB).
    #[arg(long = "csi.testvolumeexpandsize")]
    volume_expand_size: Option<i64>,
    /// Access type of test volumes: mount or block.
    #[arg(long = "csi.testvolumeaccesstype", default_value = "mount")]
    access_type: String,
    /// Run the case that publishes more volumes than the node's limit.
    #[arg(long = "csi.testnodevolumeattachlimit", action = ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true", default_value = "false")]
    attach_limit: bool,
    /// How many times the idempotency cases repeat each call.
    #[arg(long = "csi.idempotentcount", default_value_t = 10)]
    idempotent_count: u32,
    /// Command creating the mount directory: run as `<cmd> <mountdir>`, it prints the
    /// directory to use (instead of creating it here).
    #[arg(long = "csi.createmountpathcmd")]
    create_mount_path_cmd: Option<PathBuf>,
    /// Command creating the staging directory: run as `<cmd> <stagingdir>`, it prints the
    /// path to use.
    #[arg(long = "csi.createstagingpathcmd")]
    create_staging_path_cmd: Option<PathBuf>,
    /// Timeout of the create commands (Go duration such as 10s, or seconds).
    #[arg(long = "csi.createpathcmdtimeout", default_value = "10s", value_parser = go_duration)]
    create_path_cmd_timeout: Duration,
    /// Command removing the mount directory: run as `<cmd> <path>`.
    #[arg(long = "csi.removemountpathcmd")]
    remove_mount_path_cmd: Option<PathBuf>,
    /// Command removing the staging directory: run as `<cmd> <path>`.
    #[arg(long = "csi.removestagingpathcmd")]
    remove_staging_path_cmd: Option<PathBuf>,
    /// Timeout of the remove commands (Go duration such as 10s, or seconds).
    #[arg(long = "csi.removepathcmdtimeout", default_value = "10s", value_parser = go_duration)]
    remove_path_cmd_timeout: Duration,
    /// Command checking a path: run as `<cmd> <path>`, it prints file, directory,
    /// not_found or other.
    #[arg(long = "csi.checkpathcmd")]
    check_path_cmd: Option<PathBuf>,
    /// Timeout of the check command (Go duration such as 10s, or seconds).
    #[arg(long = "csi.checkpathcmdtimeout", default_value = "10s", value_parser = go_duration)]
    check_path_cmd_timeout: Duration,
    /// Write a JUnit XML report here (one test suite per group).
    #[arg(long = "junit")]
    junit: Option<PathBuf>,
    /// Write JUnit XML here as csi-sanity (Ginkgo) writes it: one suite "CSI Driver Test
    /// Suite", cases named `[It] <full name>`.
    #[arg(long = "ginkgo.junit-report", visible_alias = "csi.junitfile")]
    ginkgo_junit: Option<PathBuf>,
    /// Run only the cases whose full name matches this regular expression; repeatable (a
    /// case runs if any matches).
    #[arg(long = "focus", visible_alias = "ginkgo.focus", action = ArgAction::Append)]
    focus: Vec<String>,
    /// Skip the cases whose full name matches this regular expression; repeatable.
    #[arg(long = "skip", visible_alias = "ginkgo.skip", action = ArgAction::Append)]
    skip: Vec<String>,
    /// Longest one case may take, in seconds.
    #[arg(long = "case-timeout", default_value_t = 300)]
    case_timeout: u64,
    /// Print every case name and exit.
    #[arg(long = "list")]
    pub list: bool,
}

fn regexes(flag: &str, texts: Vec<String>) -> anyhow::Result<Vec<Regex>> {
    texts
        .into_iter()
        .map(|t| {
            Regex::new(&t)
                .with_context(|| format!("--{flag} {t:?} is not a valid regular expression"))
        })
        .collect()
}

/// A Go duration (`10s`, `1m30s`, `500ms`, `1.5h`) as csi-sanity's timeout flags take,
/// or a plain number of seconds ([`kube_support::go_duration::parse_duration`]).
fn go_duration(text: &str) -> Result<Duration, String> {
    kube_support::go_duration::parse_duration(text)
}

/// The run's configuration from the flags.
pub fn config(args: Args) -> anyhow::Result<SanityConfig> {
    let endpoint = args.endpoint.context("--csi.endpoint is required")?;
    let mut config = SanityConfig::new(
        endpoint
            .parse()
            .with_context(|| format!("--csi.endpoint {endpoint:?}"))?,
    );
    config.controller_endpoint = args
        .controller_endpoint
        .map(|e| {
            e.parse()
                .with_context(|| format!("--csi.controllerendpoint {e:?}"))
        })
        .transpose()?;
    config.mount_dir = std::path::absolute(&args.mount_dir).context("--csi.mountdir")?;
    config.staging_dir = std::path::absolute(&args.staging_dir).context("--csi.stagingdir")?;
    if let Some(path) = &args.secrets {
        config.secrets = CsiSecrets::from_yaml_file(path)?;
    }
    if let Some(path) = &args.volume_parameters {
        config.test_volume_parameters = super::load_parameters(path)?;
    }
    if let Some(path) = &args.mutable_parameters {
        config.test_volume_mutable_parameters = super::load_parameters(path)?;
    }
    if let Some(path) = &args.snapshot_parameters {
        config.test_snapshot_parameters = super::load_parameters(path)?;
    }
    config.test_volume_size = args.volume_size;
    config.test_volume_expand_size = args.volume_expand_size;
    config.test_volume_access_type = args.access_type.parse::<AccessType>()?;
    config.test_node_volume_attach_limit = args.attach_limit;
    config.idempotent_count = args.idempotent_count;
    config.case_timeout = Duration::from_secs(args.case_timeout);
    config.filter = CaseFilter {
        focus: regexes("focus", args.focus)?,
        skip: regexes("skip", args.skip)?,
    };
    config.path_commands = PathCommands {
        create_mount: args.create_mount_path_cmd,
        create_staging: args.create_staging_path_cmd,
        create_timeout: args.create_path_cmd_timeout,
        remove_mount: args.remove_mount_path_cmd,
        remove_staging: args.remove_staging_path_cmd,
        remove_timeout: args.remove_path_cmd_timeout,
        check: args.check_path_cmd,
        check_timeout: args.check_path_cmd_timeout,
    };
    config.validate()?;
    Ok(config)
}

/// `args` with Go's single-dash spellings (`-csi.endpoint`, `-ginkgo.focus`), which Go's
/// flag package accepts, turned into the `--` clap wants.
pub fn go_style_args(args: impl IntoIterator<Item = String>) -> Vec<String> {
    args.into_iter()
        .map(|arg| {
            if arg.starts_with("-csi.") || arg.starts_with("-ginkgo.") {
                format!("-{arg}")
            } else {
                arg
            }
        })
        .collect()
}

/// Runs the suite as `args` say; whether no case failed. Errors are bad input or an
/// unreachable endpoint.
///
/// SIGINT (Ctrl-C) or SIGTERM stops the run: the running case is cut short, the volumes,
/// snapshots, stages, publications and directories it created are removed, the report so
/// far is printed (and written as JUnit) with a line saying what was cleaned up or is left,
/// and the result is a failure. A second signal abandons the cleanup.
pub async fn run(args: Args) -> anyhow::Result<bool> {
    let junit = args.junit.clone();
    let ginkgo_junit = args.ginkgo_junit.clone();
    let started = chrono::Utc::now();
    let config = config(args)?;
    let mut interrupts = forward_signals().context("cannot watch SIGINT and SIGTERM")?;
    let report = super::run_interruptible(
        config,
        &super::cases::all(),
        |case| {
            let mark = match case.outcome {
                Outcome::Passed => "PASS",
                Outcome::Failed(_) => "FAIL",
                Outcome::Skipped(_) => "SKIP",
            };
            eprintln!("[{mark}] {} ({:.2?})", case.name, case.duration);
        },
        &mut interrupts,
    )
    .await?;
    if let Some(interruption) = &report.interrupted {
        eprintln!("{}", interruption.describe());
    }
    if let Some(path) = junit {
        std::fs::write(&path, report.to_junit()?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(path) = ginkgo_junit {
        std::fs::write(&path, report.to_ginkgo_junit(started))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    print!("{}", report.summary());
    Ok(report.success())
}

/// Forwards every SIGINT and SIGTERM (by name) to the returned receiver, saying on stderr
/// what happens next. While this runs the signals no longer end the process: the run ends
/// itself, after cleaning up.
pub fn forward_signals() -> std::io::Result<tokio::sync::mpsc::Receiver<String>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let (sender, receiver) = tokio::sync::mpsc::channel(4);
    tokio::spawn(async move {
        let mut received = 0;
        loop {
            let name = tokio::select! {
                Some(()) = interrupt.recv() => "SIGINT",
                Some(()) = terminate.recv() => "SIGTERM",
                else => break,
            };
            received += 1;
            if received == 1 {
                eprintln!(
                    "{name}: stopping; cleaning up what the run created (send it again to abandon the cleanup)"
                );
            } else {
                eprintln!("{name}: abandoning the cleanup");
            }
            if sender.send(name.to_owned()).await.is_err() {
                break;
            }
        }
    });
    Ok(receiver)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use clap::Parser;
    use std::path::Path;

    #[derive(Debug, Parser)]
    struct Command {
        #[command(flatten)]
        args: Args,
    }

    fn parse(args: &[&str]) -> SanityConfig {
        let argv =
            std::iter::once("csi-sanity".to_owned()).chain(args.iter().map(|a| (*a).to_owned()));
        config(Command::try_parse_from(go_style_args(argv)).unwrap().args).unwrap()
    }

    #[test]
    fn go_durations() {
        assert_eq!(go_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(go_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(go_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(go_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(go_duration("7"), Ok(Duration::from_secs(7)));
        for bad in ["", "s", "10x", "-1s", "1.2.3s"] {
            assert!(go_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn repeated_focus_and_skip_all_count() {
        let config = parse(&[
            "-csi.endpoint=/tmp/x.sock",
            "-ginkgo.focus=Identity",
            "--ginkgo.focus",
            "NodeGetInfo",
            "--focus=Probe",
            "-ginkgo.skip=GetPluginInfo",
            "--skip",
            "idempotent",
        ]);
        let texts = |r: &[Regex]| r.iter().map(|r| r.to_string()).collect::<Vec<_>>();
        assert_eq!(
            texts(&config.filter.focus),
            ["Identity", "NodeGetInfo", "Probe"]
        );
        assert_eq!(texts(&config.filter.skip), ["GetPluginInfo", "idempotent"]);
    }

    #[test]
    fn path_command_flags_and_their_timeouts() {
        let config = parse(&["--csi.endpoint", "/tmp/x.sock"]);
        assert!(config.path_commands.create_mount.is_none());
        assert_eq!(config.path_commands.create_timeout, Duration::from_secs(10));
        assert_eq!(config.path_commands.remove_timeout, Duration::from_secs(10));
        assert_eq!(config.path_commands.check_timeout, Duration::from_secs(10));
        let config = parse(&[
            "-csi.endpoint=/tmp/x.sock",
            "-csi.createmountpathcmd=/bin/mk-mount",
            "-csi.createstagingpathcmd=/bin/mk-staging",
            "-csi.createpathcmdtimeout=2s",
            "-csi.removemountpathcmd=/bin/rm-mount",
            "-csi.removestagingpathcmd=/bin/rm-staging",
            "-csi.removepathcmdtimeout=1m",
            "-csi.checkpathcmd=/bin/check",
            "-csi.checkpathcmdtimeout=250ms",
        ]);
        let c = &config.path_commands;
        assert_eq!(c.create_mount.as_deref(), Some(Path::new("/bin/mk-mount")));
        assert_eq!(
            c.create_staging.as_deref(),
            Some(Path::new("/bin/mk-staging"))
        );
        assert_eq!(c.create_timeout, Duration::from_secs(2));
        assert_eq!(c.remove_mount.as_deref(), Some(Path::new("/bin/rm-mount")));
        assert_eq!(
            c.remove_staging.as_deref(),
            Some(Path::new("/bin/rm-staging"))
        );
        assert_eq!(c.remove_timeout, Duration::from_secs(60));
        assert_eq!(c.check.as_deref(), Some(Path::new("/bin/check")));
        assert_eq!(c.check_timeout, Duration::from_millis(250));
        let err = Command::try_parse_from([
            "csi-sanity",
            "--csi.endpoint=/tmp/x.sock",
            "--csi.checkpathcmdtimeout=soon",
        ])
        .unwrap_err()
        .to_string();
        assert!(err.contains("csi.checkpathcmdtimeout"), "{err}");
    }

    #[test]
    fn ginkgo_junit_report_flag_and_its_deprecated_spelling() {
        for flag in [
            "--ginkgo.junit-report",
            "-ginkgo.junit-report",
            "-csi.junitfile",
        ] {
            let argv = go_style_args(
                [
                    "csi-sanity",
                    "--csi.endpoint=/tmp/x.sock",
                    flag,
                    "/tmp/r.xml",
                ]
                .map(str::to_owned),
            );
            let args = Command::try_parse_from(argv).unwrap().args;
            assert_eq!(
                args.ginkgo_junit.as_deref(),
                Some(Path::new("/tmp/r.xml")),
                "{flag}"
            );
            assert!(args.junit.is_none());
        }
    }
}
