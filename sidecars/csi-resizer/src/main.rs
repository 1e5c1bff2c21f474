//! `csi-resizer`: the external resizer sidecar.

use anyhow::Context as _;
use clap::Parser;
use csi_resizer::{Config, Resizer};
use sidecar_common::{kube_client, shutdown, telemetry};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    telemetry::init(config.common.verbosity);
    let client = kube_client::client(config.common.kubeconfig.as_deref())
        .await
        .context("Kubernetes client")?;
    let resizer = Resizer::new(config, client)
        .await
        .context("starting the resizer")?;
    resizer
        .run(shutdown::signal_received())
        .await
        .context("resizer")?;
    Ok(())
}
