//! The `manila-csi-plugin` binary: parses flags, sets up logging, serves the CSI services
//! until SIGINT/SIGTERM, then lets calls in flight finish for at most [`DRAIN`].

use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use manila_csi_plugin::config::Config;
use manila_csi_plugin::driver::{self, Driver};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    // RUST_LOG wins; otherwise upstream's `-v=N` picks the level.
    kube_support::telemetry::init_with_default(config.logging.default_filter());
    let listener = Driver::bind(&config.endpoint).await?;
    let services = driver::build(&config)
        .await
        .context("manila-csi-plugin cannot start")?;
    let signal = kube_support::shutdown::signal_received();
    Ok(services.serve_draining(listener, signal, DRAIN).await?)
}

/// How long calls in flight may take to finish after SIGTERM (see
/// [`csi_proto::plugin_server::PluginServices::serve_draining`]).
const DRAIN: Duration = Duration::from_secs(5);
