//! Command-line flags (named like upstream csi-driver-nfs where they overlap).

use std::path::PathBuf;

use clap::{Parser, ValueEnum};
use csi_proto::Endpoint;

/// The default driver name, as upstream's NFS plugin.
pub const DEFAULT_DRIVER_NAME: &str = "nfs.csi.k8s.io";

/// NFS CSI node plugin.
#[derive(Debug, Clone, Parser)]
#[command(name = "nfs-csi-plugin", version, about)]
pub struct Config {
    /// CSI endpoint: unix:///path, unix:/path, a socket path, or tcp://host:port.
    #[arg(long, env = "CSI_ENDPOINT", default_value = "unix:///tmp/csi.sock")]
    pub endpoint: Endpoint,

    /// This node's id, returned by NodeGetInfo.
    #[arg(long, env = "NODE_ID")]
    pub nodeid: String,

    /// Driver name returned by GetPluginInfo.
    #[arg(long, env = "DRIVER_NAME", default_value = DEFAULT_DRIVER_NAME)]
    pub drivername: String,

    /// How volumes are mounted: `kernel` runs `mount -t nfs`; `local` bind-mounts the
    /// export directory when the NFS server is this host (for machines without an NFS
    /// client).
    #[arg(long, env = "NFS_MOUNTER", value_enum, default_value_t = MounterKind::Kernel)]
    pub mounter: MounterKind,

    /// Local mounter only: the directory export paths are resolved under (`share`
    /// `/exports/a` is bind-mounted from `<root>/exports/a`).
    #[arg(long, env = "LOCAL_EXPORT_ROOT", default_value = "/")]
    pub local_export_root: PathBuf,
}

/// The available mounters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MounterKind {
    /// `mount -t nfs server:share target`.
    Kernel,
    /// Bind mount of the export directory of a local server.
    Local,
}

impl Config {
    /// Checks what clap cannot.
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(!self.nodeid.trim().is_empty(), "--nodeid must not be empty");
        anyhow::ensure!(
            !self.drivername.trim().is_empty(),
            "--drivername must not be empty"
        );
        Ok(())
    }
}
