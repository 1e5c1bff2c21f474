//! `conformance`: the harness's command line.
//!
//! - `conformance run`: the suites (CSI sanity, storage) on the embedded default or an
//!   existing cluster, driven by the driver spec file; a summary, a Markdown report, JUnit
//!   XML and the evidence of each failure (see `suites::conformance`).
//! - `conformance sanity`: the CSI sanity suite against any CSI endpoint (csi-sanity's
//!   flags).
//! - `conformance cluster up|serve|down|status`: an embedded cluster (real control plane,
//!   simulated nodes) in the background or the foreground (see the `cluster` crate).
//!
//! Exit status: 0 when every test passed or was skipped, 1 when one failed (or the
//! embedded default could not be set up), 2 on bad input (flags, suite names, the spec file,
//! an unreachable kubeconfig, a driver missing on the cluster), before anything starts;
//! 130 when SIGINT or SIGTERM stopped a run (its cluster and fake cloud are removed first).

mod cluster;
mod run;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The conformance harness for the OpenStack Manila/Cinder CSI driver and operator pairs.
#[derive(Debug, Parser)]
#[command(name = "conformance", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the suites against the embedded default (or --kubeconfig) and report.
    Run(Box<run::RunArgs>),
    /// Run the CSI sanity suite against a CSI endpoint (csi-sanity's flags).
    Sanity(Box<suites::sanity::cli::Args>),
    /// Start, stop and inspect embedded clusters.
    #[command(subcommand)]
    Cluster(cluster::ClusterCommand),
}

/// Without RUST_LOG: warnings only for `run` (its progress has its own lines), progress for
/// the cluster commands, without the control plane's readiness probing noise.
/// The log filter when `RUST_LOG` is not set.
fn log_filter(command: &Command) -> &'static str {
    match command {
        Command::Run(_) | Command::Sanity(_) => "warn,kube_client::client::builder=off",
        Command::Cluster(_) => "info,kube_client::client::builder=off",
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse_from(suites::sanity::cli::go_style_args(std::env::args()));
    kube_support::telemetry::init_with_default(log_filter(&cli.command));
    let result = match cli.command {
        Command::Run(args) => run::run(*args).await,
        Command::Sanity(args) => {
            if args.list {
                suites::sanity::cli::list();
                Ok(true)
            } else {
                suites::sanity::cli::run(*args)
                    .await
                    .map_err(|e| anyhow::Error::new(run::BadInput(format!("{e:#}"))))
            }
        }
        Command::Cluster(command) => cluster::run(command).await.map(|()| true),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) if e.downcast_ref::<run::Interrupted>().is_some() => {
            eprintln!("conformance: {e:#}");
            ExitCode::from(130)
        }
        Err(e) if e.downcast_ref::<run::BadInput>().is_some() => {
            eprintln!("conformance: {e:#}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("conformance: {e:#}");
            ExitCode::FAILURE
        }
    }
}
