//! `conformance run`: the suites on the embedded default or an existing cluster.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use regex::Regex;
use suites::conformance::catalog;
use suites::conformance::cluster_target::embedded::EmbeddedOptions;
use suites::conformance::cluster_target::existing::ExistingOptions;
use suites::conformance::progress::{Console, Progress};
use suites::conformance::run::{self, RunConfig, TargetChoice};
use suites::conformance::{RunReport, RunnerOptions, SetupError};

/// The spec file of the Manila driver the embedded default deploys.
const DEFAULT_SPEC: &str = "fixtures/driver-specs/manila-nfs.yaml";

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Run only these suites (repeatable or comma-separated; `--list` shows them). The
    /// disruption, faults and upgrade suites run only when named here.
    #[arg(long = "suite", value_delimiter = ',')]
    suites: Vec<String>,
    /// Do not run these suites.
    #[arg(long = "skip-suite", value_delimiter = ',')]
    skip_suites: Vec<String>,
    /// Run only the tests whose full name (`[suite] name`) matches this regular expression.
    #[arg(long)]
    focus: Option<String>,
    /// Skip the tests whose full name matches this regular expression.
    #[arg(long)]
    skip: Option<String>,
    /// The driver spec file (the Kubernetes external-storage format, YAML or JSON); default
    /// the Manila driver's spec file of this repository for the embedded default. Its
    /// DriverInfo.Name picks the driver the embedded default deploys: the Cinder driver's
    /// (fixtures/driver-specs/cinder.yaml) deploys the Cinder driver with the fake Cinder and
    /// Nova instead of the Manila driver.
    #[arg(long = "driver-spec", value_name = "FILE")]
    driver_spec: Option<PathBuf>,
    /// Run against the cluster of this kubeconfig, where the driver is installed, instead of
    /// the embedded default.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// With --kubeconfig: the namespace of the driver's pods (their logs go into the
    /// evidence of failures).
    #[arg(long = "driver-namespace", requires = "kubeconfig")]
    driver_namespace: Option<String>,
    /// A clouds.yaml for a real cloud: on the embedded default the driver uses it instead of
    /// the fake cloud; with --kubeconfig the runner reads the cloud's shares and snapshots with
    /// it (the leftover checks and the tests' cloud-side checks).
    #[arg(long = "clouds-yaml", value_name = "FILE")]
    clouds_yaml: Option<PathBuf>,
    /// The cloud of --clouds-yaml.
    #[arg(long = "os-cloud", env = "OS_CLOUD", default_value = "openstack")]
    os_cloud: String,
    /// How many tests run at the same time.
    #[arg(long, default_value_t = 4)]
    parallel: usize,
    /// Longest one test may take, in seconds.
    #[arg(long = "test-timeout", default_value_t = 600)]
    test_timeout: u64,
    /// Where the report, JUnit XML, evidence of failures and the log go; default
    /// `target/conformance/<UTC time>` of this workspace.
    #[arg(long, value_name = "DIR")]
    output: Option<PathBuf>,
    /// Write JUnit XML here (default `<output>/junit.xml`).
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Write the Markdown report here (default `<output>/report.md`).
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Embedded default: leave the cluster, the fake cloud and the driver up after the tests
    /// (this process keeps serving them until Ctrl-C or SIGTERM, then cleans up).
    #[arg(long)]
    keep: bool,
    /// Embedded default: where its cluster runs: `embedded` (control plane and node agents as
    /// processes of this host) or `containers` (each in a container of its own on a private
    /// docker network, from an image built locally; needs a Docker engine).
    #[arg(long, default_value = "embedded", conflicts_with = "kubeconfig")]
    backend: cluster::ClusterBackend,
    /// Embedded default: how the driver gets installed: `fixtures` (the plain manifests of
    /// fixtures/manila-csi or fixtures/cinder-csi) or `operator` (the driver's operator of
    /// fixtures/manila-operator or fixtures/cinder-operator installs it; the Manila
    /// operator's classes are one per share type, the Cinder operator's `standard-csi`: use
    /// fixtures/driver-specs/cinder-operator.yaml; needs the run's own fake cloud).
    #[arg(
        long,
        default_value = "fixtures",
        value_parser = ["fixtures", "operator"],
        conflicts_with_all = ["kubeconfig", "clouds_yaml"]
    )]
    install: String,
    /// Embedded default: how many nodes.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// Embedded default: the nodes' zones, in turn (with --clouds-yaml: the cloud's Manila
    /// availability zones).
    #[arg(long, value_delimiter = ',', default_value = "zone-a,zone-b")]
    zones: Vec<String>,
    /// Embedded default with --clouds-yaml: the directory on this host below which the
    /// cloud's NFS export paths are (e.g. a fake-openstack process's --backend-root); the
    /// NFS plugin then binds them instead of mounting with the kernel NFS client.
    #[arg(
        long = "nfs-export-root",
        value_name = "DIR",
        requires = "clouds_yaml",
        conflicts_with = "kubeconfig"
    )]
    nfs_export_root: Option<PathBuf>,
    /// Plain progress lines even on a terminal.
    #[arg(long)]
    plain: bool,
    /// Print the suites and their tests and exit.
    #[arg(long)]
    list: bool,
}

/// Exit status 2: the input is wrong.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadInput(pub String);

/// Runs the command; `Ok(true)` when every test passed or was skipped.
pub async fn run(args: RunArgs) -> anyhow::Result<bool> {
    if args.list {
        list();
        return Ok(true);
    }
    let config = config(&args)?;
    let plan = run::plan(&config).map_err(bad_input)?;
    let output = output_dir(&args);
    std::fs::create_dir_all(&output)
        .with_context(|| format!("creating the output directory {}", output.display()))?;
    let progress: Arc<dyn Progress> = Arc::new(Console::new(args.plain));
    progress.step(&format!(
        "{} tests of driver {} (spec {}); output in {}",
        plan.len(),
        plan.spec.driver_info.name,
        config.spec.display(),
        output.display()
    ));
    let config = RunConfig {
        runner: RunnerOptions {
            evidence_dir: Some(output.join("evidence")),
            timeline_dir: Some(output.join("timelines")),
            ..config.runner
        },
        ..config
    };
    let executed = run::execute(&config, plan, progress.clone()).await;
    let result = async {
        let (mut report, target) = match executed {
            Ok(done) => done,
            Err(e) if e.is_bad_input() => return Err(bad_input(e).into()),
            Err(e) => return Err(anyhow::Error::from(e)),
        };
        if args.keep && target.environment().is_some() {
            keep_until_signal(&target).await?;
        }
        run::finish(&mut report, target, Some(&output), progress.as_ref()).await;
        write_outputs(&args, &output, &report)?;
        Ok(report.success())
    }
    .await;
    if let Err(e) = std::fs::remove_dir_all(&config.scratch)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(
            "removing the scratch directory {}: {e}",
            config.scratch.display()
        );
    }
    result
}

fn bad_input(error: SetupError) -> BadInput {
    BadInput(error.to_string())
}

fn config(args: &RunArgs) -> anyhow::Result<RunConfig> {
    let regex = |flag: &str, text: &Option<String>| {
        text.as_ref()
            .map(|t| {
                Regex::new(t).map_err(|e| {
                    BadInput(format!("--{flag} {t:?} is not a regular expression: {e}"))
                })
            })
            .transpose()
    };
    if args.parallel == 0 {
        return Err(BadInput("--parallel must be at least 1".into()).into());
    }
    let spec = match (&args.driver_spec, &args.kubeconfig) {
        (Some(spec), _) => spec.clone(),
        (None, None) => workspace_binaries::root().join(DEFAULT_SPEC),
        (None, Some(_)) => {
            return Err(BadInput(
                "--kubeconfig needs --driver-spec: the spec file of the driver installed there"
                    .into(),
            )
            .into());
        }
    };
    let target = match &args.kubeconfig {
        Some(kubeconfig) => TargetChoice::Existing(ExistingOptions {
            kubeconfig: kubeconfig.clone(),
            driver_namespace: args.driver_namespace.clone(),
            clouds_yaml: args
                .clouds_yaml
                .clone()
                .map(|path| (path, args.os_cloud.clone())),
        }),
        None => {
            if args.keep && args.nodes == 0 {
                return Err(BadInput("--nodes must be at least 1".into()).into());
            }
            if let Some(path) = &args.clouds_yaml
                && !path.is_file()
            {
                return Err(
                    BadInput(format!("--clouds-yaml {}: no such file", path.display())).into(),
                );
            }
            if let Some(root) = &args.nfs_export_root
                && !root.is_dir()
            {
                return Err(BadInput(format!(
                    "--nfs-export-root {}: no such directory",
                    root.display()
                ))
                .into());
            }
            TargetChoice::Embedded(EmbeddedOptions {
                nodes: args.nodes,
                zones: args.zones.clone(),
                clouds_yaml: args
                    .clouds_yaml
                    .clone()
                    .map(|path| (path, args.os_cloud.clone())),
                nfs_export_root: args.nfs_export_root.clone(),
                backend: args.backend,
                by_operator: args.install == "operator",
                ..EmbeddedOptions::default()
            })
        }
    };
    if args.keep && args.kubeconfig.is_some() {
        return Err(
            BadInput("--keep applies to the embedded default, not to --kubeconfig".into()).into(),
        );
    }
    Ok(RunConfig {
        spec,
        suites: args.suites.clone(),
        skip_suites: args.skip_suites.clone(),
        focus: regex("focus", &args.focus)?,
        skip: regex("skip", &args.skip)?,
        target,
        runner: RunnerOptions {
            parallel: args.parallel,
            test_timeout: Duration::from_secs(args.test_timeout),
            ..RunnerOptions::default()
        },
        scratch: scratch_dir(),
    })
}

/// A short scratch directory for sockets (unix socket paths are limited to 107 bytes).
fn scratch_dir() -> PathBuf {
    std::env::temp_dir().join(format!("occ-run-{}", std::process::id()))
}

fn output_dir(args: &RunArgs) -> PathBuf {
    args.output.clone().unwrap_or_else(|| {
        let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string();
        workspace_binaries::root()
            .join("target/conformance")
            .join(stamp)
    })
}

fn list() {
    let tests = catalog::storage_tests();
    for (suite, about) in catalog::SUITES {
        if catalog::OPT_IN_SUITES.contains(suite) {
            println!("{suite} (only when named with --suite): {about}");
        } else {
            println!("{suite}: {about}");
        }
        if *suite == catalog::SANITY_SUITE {
            println!(
                "  ({} CSI sanity cases: `conformance sanity --list`)",
                suites::sanity::cases::all().len()
            );
        }
        for test in tests.iter().filter(|t| t.suite == *suite) {
            println!("  {}", test.name);
        }
    }
}

fn write_outputs(args: &RunArgs, output: &Path, report: &RunReport) -> anyhow::Result<()> {
    let report_path = args
        .report
        .clone()
        .unwrap_or_else(|| output.join("report.md"));
    let base = report_path.parent().unwrap_or(Path::new("."));
    std::fs::write(&report_path, report.markdown(base))
        .with_context(|| format!("writing {}", report_path.display()))?;
    let junit_path = args
        .junit
        .clone()
        .unwrap_or_else(|| output.join("junit.xml"));
    let junit = report.junit().map_err(anyhow::Error::msg)?;
    std::fs::write(&junit_path, junit)
        .with_context(|| format!("writing {}", junit_path.display()))?;
    let mut out = std::io::stdout().lock();
    let printed = write!(out, "\n{}", report.summary())
        .and_then(|()| writeln!(out, "report: {}", report_path.display()))
        .and_then(|()| writeln!(out, "junit:  {}", junit_path.display()));
    match printed {
        // Whoever read stdout went away (`| head`): the files hold everything.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

async fn keep_until_signal(target: &suites::conformance::Target) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("handling SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("handling SIGINT")?;
    let kubeconfig = target.cluster.kubeconfig().display().to_string();
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "\nThe cluster is kept (run directory {}).",
        target.cluster.run_dir().display()
    )?;
    writeln!(out, "  export KUBECONFIG={kubeconfig}")?;
    writeln!(
        out,
        "It lives as long as this process (pid {}), which also serves the fake cloud: press Ctrl-C or `kill {}` to stop it and clean up.",
        std::process::id(),
        std::process::id()
    )?;
    writeln!(out, "KUBECONFIG={kubeconfig}")?;
    out.flush()?;
    drop(out);
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    eprintln!("stopping the kept cluster");
    Ok(())
}
