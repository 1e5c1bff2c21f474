//! `csi-snapshotter`: the external snapshotter sidecar.

use anyhow::Context as _;
use clap::Parser;
use csi_snapshotter::{Config, Snapshotter};
use sidecar_common::{kube_client, shutdown, telemetry};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    telemetry::init(config.common.verbosity);
    let client = kube_client::client(config.common.kubeconfig.as_deref())
        .await
        .context("Kubernetes client")?;
    let snapshotter = Snapshotter::new(config, client)
        .await
        .context("starting the snapshotter")?;
    snapshotter
        .run(shutdown::signal_received())
        .await
        .context("snapshotter")?;
    Ok(())
}
