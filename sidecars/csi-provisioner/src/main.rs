//! `csi-provisioner`: the external provisioner sidecar.

use anyhow::Context as _;
use clap::Parser;
use csi_provisioner::{Config, Provisioner};
use sidecar_common::{kube_client, shutdown, telemetry};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    telemetry::init(config.common.verbosity);
    let client = kube_client::client(config.common.kubeconfig.as_deref())
        .await
        .context("Kubernetes client")?;
    let provisioner = Provisioner::new(config, client)
        .await
        .context("starting the provisioner")?;
    provisioner
        .run(shutdown::signal_received())
        .await
        .context("provisioner")?;
    Ok(())
}
