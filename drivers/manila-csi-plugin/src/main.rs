//! The `manila-csi-plugin` binary: parses flags, sets up logging, serves the CSI services
//! until SIGINT/SIGTERM.

use anyhow::Context;
use clap::Parser;
use manila_csi_plugin::config::Config;
use manila_csi_plugin::driver::Driver;
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let config = Config::parse();
    let listener = Driver::bind(&config.endpoint).await?;
    let driver = Driver::new(&config)
        .await
        .context("manila-csi-plugin cannot start")?;
    driver.serve(listener, shutdown_signal()).await?;
    Ok(())
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
    tracing::info!("shutting down");
}
