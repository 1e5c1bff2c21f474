//! `livenessprobe`: `/healthz` answering the CSI driver's Probe.

use anyhow::Context as _;
use clap::Parser;
use kube_support::{shutdown, telemetry};
use livenessprobe::Config;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    telemetry::init(config.verbosity);
    let (_, task) = livenessprobe::serve(&config, shutdown::signal_received())
        .await
        .context("starting the liveness probe")?;
    task.await.context("the HTTP endpoint task")?;
    Ok(())
}
