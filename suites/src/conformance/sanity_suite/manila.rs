//! The Manila driver for the sanity cases: `manila-csi-plugin` forwarding node calls to
//! `nfs-csi-plugin`, which runs in a private mount namespace (binding the fake's share
//! directories, or mounting with the kernel NFS client for a real cloud).

use std::path::Path;

use tokio::process::Command;

use super::{Plugin, Started, spawn};
use crate::e2e::binaries::Binaries;
use crate::e2e::{CloudSource, ExternalCloud, ManilaCsiEnvironment, NfsAccess};
use crate::sanity::CsiSecrets;

/// Starts both plugins with their sockets and logs in `dir`.
pub(super) async fn start(env: &ManilaCsiEnvironment, dir: &Path) -> Result<Started, String> {
    let binaries = Binaries::locate_or_build(None)
        .await
        .map_err(|e| e.to_string())?;
    let kernel = matches!(
        &env.options().cloud_source,
        CloudSource::External(ExternalCloud {
            nfs: NfsAccess::Kernel,
            ..
        })
    );
    let nfs = start_nfs_plugin(binaries.dir(), dir, kernel).await?;
    let manila = start_manila_plugin(binaries.dir(), dir, &nfs.socket).await?;
    let logs = format!(
        "manila-csi-plugin log: {}; nfs-csi-plugin log: {}",
        manila.log.display(),
        nfs.log.display()
    );
    let secrets = CsiSecrets::everywhere(&env.driver_secret().into_iter().collect());
    Ok(Started {
        socket: manila.socket.clone(),
        logs,
        configure: Box::new(move |config| config.secrets = secrets.clone()),
        not_runnable: Vec::new(),
        // The Manila plugin first: it stops before its partner.
        _plugins: vec![manila, nfs],
        cloud: None,
    })
}

async fn start_nfs_plugin(bin: &Path, dir: &Path, kernel: bool) -> Result<Plugin, String> {
    let socket = dir.join("nfs.sock");
    let mut command = Command::new("unshare");
    command
        .args(["--mount", "--propagation", "private", "--"])
        .arg(bin.join("nfs-csi-plugin"))
        .arg(format!("--endpoint=unix://{}", socket.display()))
        .arg("--nodeid=sanity-node")
        .arg(if kernel {
            "--mounter=kernel"
        } else {
            "--mounter=local"
        });
    spawn("nfs-csi-plugin", command, dir, socket).await
}

async fn start_manila_plugin(bin: &Path, dir: &Path, partner: &Path) -> Result<Plugin, String> {
    let socket = dir.join("manila.sock");
    let mut command = Command::new(bin.join("manila-csi-plugin"));
    command
        .arg(format!("--endpoint=unix://{}", socket.display()))
        .arg("--share-protocol-selector=NFS")
        .arg(format!("--fwdendpoint=unix://{}", partner.display()))
        .arg("--nodeid=sanity-node");
    spawn("manila-csi-plugin", command, dir, socket).await
}
