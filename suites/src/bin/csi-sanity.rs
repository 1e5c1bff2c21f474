//! `csi-sanity`: runs the CSI sanity suite against a CSI endpoint, with csi-sanity's flags
//! (Go-style single-dash spellings such as `-csi.endpoint` are accepted too).
//!
//! Exit status: 0 when no case failed, 1 when some did, 2 when the run could not start.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{ArgAction, Parser};
use regex::Regex;
use suites::sanity::{self, AccessType, CaseFilter, CsiSecrets, Outcome, SanityConfig};
use tracing_subscriber::EnvFilter;

/// CSI conformance tests of a CSI plugin (parity with kubernetes-csi's csi-sanity).
#[derive(Debug, Parser)]
#[command(name = "csi-sanity", version)]
struct Args {
    /// CSI endpoint: unix:///path, a path, or tcp://host:port.
    #[arg(
        long = "csi.endpoint",
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
    #[arg(long = "csi.testvolumesize", default_value_t = 10 * sanity::GIB)]
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
    list: bool,
}

fn regex(flag: &str, text: Option<String>) -> anyhow::Result<Option<Regex>> {
    text.map(|t| {
        Regex::new(&t).with_context(|| format!("--{flag} {t:?} is not a valid regular expression"))
    })
    .transpose()
}

fn config(args: Args) -> anyhow::Result<SanityConfig> {
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
        config.test_volume_parameters = sanity::load_parameters(path)?;
    }
    if let Some(path) = &args.mutable_parameters {
        config.test_volume_mutable_parameters = sanity::load_parameters(path)?;
    }
    if let Some(path) = &args.snapshot_parameters {
        config.test_snapshot_parameters = sanity::load_parameters(path)?;
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

/// Go's flag package accepts `-name`; clap wants `--name` for long options.
fn go_style_args() -> Vec<String> {
    std::env::args()
        .map(|arg| {
            if arg.starts_with("-csi.") || arg.starts_with("-ginkgo.") {
                format!("-{arg}")
            } else {
                arg
            }
        })
        .collect()
}

async fn run(args: Args) -> anyhow::Result<bool> {
    let junit = args.junit.clone();
    let config = config(args)?;
    let report = sanity::run_with_progress(config, |case| {
        let mark = match case.outcome {
            Outcome::Passed => "PASS",
            Outcome::Failed(_) => "FAIL",
            Outcome::Skipped(_) => "SKIP",
        };
        eprintln!("[{mark}] {} ({:.2?})", case.name, case.duration);
    })
    .await?;
    if let Some(path) = junit {
        std::fs::write(&path, report.to_junit()?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    print!("{}", report.summary());
    Ok(report.success())
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse_from(go_style_args());
    if args.list {
        for case in sanity::cases::all() {
            println!("{}", case.name());
        }
        return ExitCode::SUCCESS;
    }
    match run(args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("csi-sanity: {e:#}");
            ExitCode::from(2)
        }
    }
}
