//! `conformance`: the harness's command line.
//!
//! - `conformance cluster up|serve|down|status`: an embedded cluster (real control plane,
//!   simulated nodes) in the background or the foreground, shared by the tests of a run
//!   (see `harness::cluster`).

mod cluster;

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
    /// Start, stop and inspect embedded clusters.
    #[command(subcommand)]
    Cluster(cluster::ClusterCommand),
}

/// Progress without the control plane's readiness probing noise.
const DEFAULT_LOG: &str = "info,kube_client::client::builder=off";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG)),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Cluster(command) => cluster::run(command).await,
    }
}
