//! `csi-attacher`: the external attacher sidecar.

use anyhow::Context as _;
use clap::Parser;
use csi_attacher::{Attacher, Config};
use sidecar_common::{kube_client, shutdown, telemetry};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    telemetry::init(config.common.verbosity);
    let client = kube_client::client(config.common.kubeconfig.as_deref())
        .await
        .context("Kubernetes client")?;
    let attacher = Attacher::new(config, client)
        .await
        .context("starting the attacher")?;
    attacher
        .run(shutdown::signal_received())
        .await
        .context("attacher")?;
    Ok(())
}
