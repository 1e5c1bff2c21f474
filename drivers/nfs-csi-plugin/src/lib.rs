//! NFS CSI node plugin: the partner the Manila CSI driver forwards NFS node calls to.
//!
//! Identity and Node services (no staging, like upstream csi-driver-nfs):
//! NodePublishVolume mounts `server:share` (volume context `server`, `share`) at the
//! target path, honouring `readonly` and the capability's mount flags; NodeUnpublishVolume
//! unmounts and removes the target; both are idempotent. NodeGetVolumeStats reports bytes
//! and inodes from statvfs. Two [mounters](mounter): `kernel` (`mount -t nfs`) and `local`
//! (a bind mount of the export directory when the server is this host, for machines
//! without an NFS client).
//!
//! ```no_run
//! use nfs_csi_plugin::{Config, run};
//! use clap::Parser;
//!
//! # async fn main_() -> anyhow::Result<()> {
//! let config = Config::parse_from(["nfs-csi-plugin", "--nodeid=n1", "--mounter=local"]);
//! run(config, async { tokio::signal::ctrl_c().await.ok(); }).await
//! # }
//! ```

mod call_log;
mod config;
mod error;
mod identity;
mod mount_table;
pub mod mounter;
mod node;

use anyhow::Context as _;
use csi_proto::{
    Listener,
    v1::{identity_server::IdentityServer, node_server::NodeServer},
};
use tonic::transport::Server;

pub use call_log::{CallLog, CallLogLayer};
pub use config::{Config, DEFAULT_DRIVER_NAME, MounterKind};
pub use error::{NodeError, Result};
pub use identity::IdentityService;
pub use mount_table::is_mount_point;
pub use node::{NodeService, context_keys};

use mounter::{KernelMounter, LocalMounter, Mounter};

/// Checks the chosen mounter, binds the endpoint and serves Identity + Node until
/// `shutdown` resolves.
pub async fn run(config: Config, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
    config.validate()?;
    match config.mounter {
        MounterKind::Kernel => serve_with(config, KernelMounter, shutdown).await,
        MounterKind::Local => {
            let mounter = LocalMounter::new(&config.local_export_root);
            serve_with(config, mounter, shutdown).await
        }
    }
}

async fn serve_with<M: Mounter>(
    config: Config,
    mounter: M,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    mounter.check_usable()?;
    let listener = Listener::bind(&config.endpoint).await?;
    tracing::info!(
        endpoint = %listener.local_endpoint(),
        driver = %config.drivername,
        node = %config.nodeid,
        mounter = mounter.name(),
        "serving CSI Identity and Node"
    );
    let router = Server::builder()
        .layer(CallLogLayer)
        .add_service(IdentityServer::new(IdentityService::new(
            config.drivername.clone(),
        )))
        .add_service(NodeServer::new(NodeService::new(
            config.nodeid.clone(),
            mounter,
        )));
    csi_proto::serve(router, listener, shutdown)
        .await
        .context("the gRPC server stopped")
}
