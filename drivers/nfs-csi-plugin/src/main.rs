//! `nfs-csi-plugin`: flags → [`nfs_csi_plugin::run`], logs to stderr, stops on SIGINT or
//! SIGTERM.

use clap::Parser;
use nfs_csi_plugin::Config;
use tokio::signal::unix::{SignalKind, signal};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    kube_support::telemetry::init_with_default("info");
    let config = Config::parse();
    let mut terminate = signal(SignalKind::terminate())?;
    let shutdown = async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
        tracing::info!("shutting down");
    };
    nfs_csi_plugin::run(config, shutdown).await
}
