//! `snapshot-controller`: runs the snapshot controller against the cluster of the kubeconfig
//! (`--kubeconfig`, else `$KUBECONFIG`/`~/.kube/config`, else the in-cluster service account)
//! until SIGTERM/SIGINT.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use snapshot_controller::controller::{self, Context};

/// Flags (upstream's names where they exist).
#[derive(Debug, Parser)]
#[command(
    version,
    about = "Binds VolumeSnapshots to VolumeSnapshotContents (snapshot.storage.k8s.io/v1)"
)]
struct Flags {
    /// Kubeconfig to use; in-cluster configuration when unset.
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Log verbosity (klog-style: 0 info, 4 debug, 5+ trace); RUST_LOG overrides it.
    #[arg(short = 'v', long = "v", default_value_t = 0)]
    verbosity: u8,
    /// Install the snapshot CRDs (and wait for them to be Established) before starting.
    #[arg(long)]
    install_crds: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let flags = Flags::parse();
    kube_support::telemetry::init(flags.verbosity);
    let client = kube_support::kube_client::client(flags.kubeconfig.as_deref())
        .await
        .context("connecting to the cluster")?;
    if flags.install_crds {
        snapshot_controller::crds::install(
            &client,
            controller::CONTROLLER_NAME,
            Duration::from_secs(60),
        )
        .await
        .context("installing the snapshot CRDs")?;
    }
    let host = kube_support::instance::name(controller::CONTROLLER_NAME);
    tracing::info!("snapshot controller running");
    controller::run_with(
        Arc::new(Context::new(client, &host)),
        kube_support::shutdown::signal_received(),
    )
    .await;
    tracing::info!("snapshot controller stopped");
    Ok(())
}
