//! The command line of the sanity suite, shared by the `csi-sanity` binary and
//! `conformance sanity`: csi-sanity's flags (Go-style single-dash spellings such as
//! `-csi.endpoint` are accepted too, see [`go_style_args`]), the configuration they make, and
//! a run printing each case and the summary.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::ArgAction;
use regex::Regex;

use super::{AccessType, CaseFilter, CsiSecrets, Outcome, SanityConfig};

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
    /// Write a JUnit XML report here.
    #[arg(long = "junit", visible_alias = "csi.junitfile")]
    junit: Option<PathBuf>,
    /// Run only the cases whose full name matches this regular expression.
    #[arg(long = "focus", visible_alias = "ginkgo.focus")]
    focus: Option<String>,
    /// Skip the cases whose full name matches this regular expression.
    #[arg(long = "skip", visible_alias = "ginkgo.skip")]
    skip: Option<String>,
    /// Longest one case may take, in seconds.
    #[arg(long = "case-timeout", default_value_t = 300)]
    case_timeout: u64,
    /// Print every case name and exit.
    #[arg(long = "list")]
    pub list: bool,
}

fn regex(flag: &str, text: Option<String>) -> anyhow::Result<Option<Regex>> {
    text.map(|t| {
        Regex::new(&t).with_context(|| format!("--{flag} {t:?} is not a valid regular expression"))
    })
    .transpose()
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
        focus: regex("focus", args.focus)?,
        skip: regex("skip", args.skip)?,
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
