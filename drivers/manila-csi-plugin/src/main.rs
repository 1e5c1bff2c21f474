//! The `manila-csi-plugin` binary: parses flags, sets up logging, serves the CSI services
//! until SIGINT/SIGTERM, then lets calls in flight finish for at most [`DRAIN`].

use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use manila_csi_plugin::config::Config;
use manila_csi_plugin::driver::Driver;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    // RUST_LOG wins; otherwise upstream's `-v=N` picks the level.
    kube_support::telemetry::init_with_default(config.logging.default_filter());
    let listener = Driver::bind(&config.endpoint).await?;
    let driver = Driver::new(&config)
        .await
        .context("manila-csi-plugin cannot start")?;
    let signalled = std::sync::Arc::new(tokio::sync::Notify::new());
    let notify = signalled.clone();
    let serve = driver.serve(listener, async move {
        kube_support::shutdown::signal_received().await;
        notify.notify_one();
    });
    tokio::select! {
        served = serve => served?,
        () = async {
            signalled.notified().await;
            tokio::time::sleep(DRAIN).await;
        } => tracing::warn!(
            "calls still in flight {DRAIN:?} after the signal (a cloud call hanging?): exiting \
             without them; their callers retry, and CSI calls are idempotent"
        ),
    }
    Ok(())
}

/// How long calls in flight may take to finish after SIGTERM. A CreateVolume waiting on a
/// hung cloud call would otherwise keep the pod until kubelet kills it at the end of its
/// grace period (30 s), holding up the replacement controller's leader election.
const DRAIN: Duration = Duration::from_secs(5);
