//! `node-driver-registrar`: see the library docs.

use clap::Parser;
use kube_support::{shutdown, telemetry};
use node_driver_registrar::config::Config;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    telemetry::init(config.verbosity);
    node_driver_registrar::run(config, shutdown::signal_received()).await
}
