//! The `cinder-csi-plugin` binary: parses flags, sets up logging, serves the CSI services
//! until SIGINT/SIGTERM.

use anyhow::Context;
use cinder_csi_plugin::config::Config;
use cinder_csi_plugin::driver::Driver;
use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    kube_support::telemetry::init_with_default(config.logging.default_filter());
    let listener = Driver::bind(&config.endpoint).await?;
    let driver = Driver::new(&config)
        .await
        .context("cinder-csi-plugin cannot start")?;
    driver
        .serve(listener, kube_support::shutdown::signal_received())
        .await?;
    Ok(())
}
