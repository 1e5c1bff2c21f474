//! The local mounter: bind-mounts the export directory when the NFS server is this host.
//!
//! For machines without an NFS client (CI, sandboxes): a share `server:/exports/a` whose
//! server is a loopback or local interface address is served by bind-mounting
//! `<export root>/exports/a`, which is the directory the local NFS server (or the fake
//! cloud) exports. NFS-specific mount options do not apply to a bind mount and are ignored,
//! except `ro`.

use std::{
    collections::HashSet,
    net::IpAddr,
    path::{Component, Path, PathBuf},
};

use nix::mount::{MntFlags, MsFlags, mount, umount2};

use super::{MountRequest, Mounter};
use crate::error::{NodeError, Result};

const NAME: &str = "local";

/// Bind-mounts local export directories.
#[derive(Debug, Clone)]
pub struct LocalMounter {
    export_root: PathBuf,
}

impl LocalMounter {
    /// Export paths are resolved under `export_root` (`/` for the real paths).
    pub fn new(export_root: impl Into<PathBuf>) -> Self {
        Self {
            export_root: export_root.into(),
        }
    }

    /// The directory serving `share`. A share path with a `..` component is refused
    /// (InvalidArgument): it could name a directory outside the export root.
    pub fn export_dir(&self, share: &str) -> Result<PathBuf> {
        let relative = Path::new(share.trim_start_matches('/'));
        if relative
            .components()
            .any(|c| matches!(c, Component::ParentDir))
        {
            return Err(NodeError::InvalidArgument(format!(
                "volume_context.share {share:?} contains \"..\": the local mounter only mounts \
                 directories below its export root {}",
                self.export_root.display()
            )));
        }
        Ok(self.export_root.join(relative))
    }

    /// `dir` with symbolic links resolved, refused (InvalidArgument) when that leaves the
    /// export root: the bind mount uses the resolved path.
    fn resolve_below_root(&self, share: &str, dir: &Path) -> Result<PathBuf> {
        let root = self
            .export_root
            .canonicalize()
            .map_err(|e| NodeError::io("resolve the export root", &self.export_root, e))?;
        let resolved = dir
            .canonicalize()
            .map_err(|e| NodeError::io("resolve the export directory", dir, e))?;
        if resolved.starts_with(&root) {
            Ok(resolved)
        } else {
            Err(NodeError::InvalidArgument(format!(
                "volume_context.share {share:?} resolves to {}, outside the export root {} \
                 (a symbolic link)",
                resolved.display(),
                root.display()
            )))
        }
    }
}

impl Mounter for LocalMounter {
    fn name(&self) -> &'static str {
        NAME
    }

    fn check_usable(&self) -> Result<()> {
        let unusable = |reason: String| NodeError::MounterUnusable {
            mounter: NAME,
            reason,
        };
        if !nix::unistd::geteuid().is_root() {
            return Err(unusable(
                "bind mounts need root (CAP_SYS_ADMIN) and this process is not root".to_owned(),
            ));
        }
        if !self.export_root.is_dir() {
            return Err(unusable(format!(
                "the export root {} is not a directory",
                self.export_root.display()
            )));
        }
        Ok(())
    }

    async fn mount(&self, request: &MountRequest<'_>) -> Result<()> {
        ensure_local_server(request.server).await?;
        let export = request.export();
        let dir = self.export_dir(request.share)?;
        if !dir.is_dir() {
            return Err(NodeError::ExportNotFound { export, dir });
        }
        let dir = self.resolve_below_root(request.share, &dir)?;
        let failed = |detail: String| NodeError::MountFailed {
            export: export.clone(),
            target: request.target.to_owned(),
            detail,
        };
        mount(
            Some(&dir),
            request.target,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
        .map_err(|errno| failed(format!("bind mount of {}: {errno}", dir.display())))?;

        let readonly = request.readonly || request.options.iter().any(|o| o == "ro");
        if readonly {
            // A bind mount takes the read-only flag only on a remount.
            let flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
            if let Err(errno) = mount(
                None::<&str>,
                request.target,
                None::<&str>,
                flags,
                None::<&str>,
            ) {
                let _ = umount2(request.target, MntFlags::MNT_DETACH);
                return Err(failed(format!("read-only remount: {errno}")));
            }
        }
        Ok(())
    }

    async fn unmount(&self, target: &Path) -> Result<()> {
        umount2(target, MntFlags::empty()).map_err(|errno| NodeError::UnmountFailed {
            target: target.to_owned(),
            detail: errno.to_string(),
        })
    }
}

/// Succeeds when `server` is this host: `localhost`, a loopback address, an address of a
/// local interface, or a name resolving to one of those.
async fn ensure_local_server(server: &str) -> Result<()> {
    let host = server.trim_start_matches('[').trim_end_matches(']');
    let addresses: Vec<IpAddr> = match host.parse::<IpAddr>() {
        Ok(address) => vec![address],
        Err(_) => tokio::net::lookup_host((host, 0))
            .await
            .map_err(|e| NodeError::ServerNotLocal {
                server: server.to_owned(),
                detail: format!("cannot resolve it: {e}"),
            })?
            .map(|socket| socket.ip())
            .collect(),
    };
    let local = local_addresses();
    if addresses
        .iter()
        .any(|a| a.is_loopback() || local.contains(a))
    {
        return Ok(());
    }
    let shown: Vec<String> = addresses.iter().map(IpAddr::to_string).collect();
    Err(NodeError::ServerNotLocal {
        server: server.to_owned(),
        detail: format!("it is {}", shown.join(", ")),
    })
}

fn local_addresses() -> HashSet<IpAddr> {
    let Ok(interfaces) = nix::ifaddrs::getifaddrs() else {
        return HashSet::new();
    };
    interfaces
        .filter_map(|interface| interface.address)
        .filter_map(|address| {
            if let Some(v4) = address.as_sockaddr_in() {
                Some(IpAddr::V4(v4.ip()))
            } else {
                address.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip()))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[tokio::test]
    async fn loopback_and_localhost_are_local() {
        for server in ["127.0.0.1", "127.0.0.53", "::1", "[::1]", "localhost"] {
            ensure_local_server(server).await.unwrap();
        }
    }

    #[tokio::test]
    async fn a_local_interface_address_is_local() {
        if let Some(address) = local_addresses().into_iter().find(|a| !a.is_loopback()) {
            ensure_local_server(&address.to_string()).await.unwrap();
        }
    }

    #[tokio::test]
    async fn a_remote_address_is_refused_with_its_name() {
        let error = ensure_local_server("203.0.113.7").await.unwrap_err();
        assert_eq!(error.code(), tonic::Code::FailedPrecondition);
        let message = error.to_string();
        assert!(
            message.contains("\"203.0.113.7\" is not a local address"),
            "{message}"
        );
    }

    #[test]
    fn export_dirs_resolve_under_the_root() {
        let mounter = LocalMounter::new("/srv/root");
        assert_eq!(
            mounter.export_dir("/exports/a").unwrap(),
            PathBuf::from("/srv/root/exports/a")
        );
        assert_eq!(
            LocalMounter::new("/").export_dir("/e/b").unwrap(),
            PathBuf::from("/e/b")
        );
        assert_eq!(
            mounter.export_dir("/exports/a..b/./c").unwrap(),
            PathBuf::from("/srv/root/exports/a..b/c")
        );
    }

    #[test]
    fn parent_components_in_share_paths_are_refused() {
        let mounter = LocalMounter::new("/srv/root");
        for share in ["/exports/../../etc", "..", "/a/..", "exports/a/../b"] {
            let error = mounter.export_dir(share).unwrap_err();
            assert_eq!(error.code(), tonic::Code::InvalidArgument, "{share}");
            assert!(
                error
                    .to_string()
                    .starts_with(&format!("volume_context.share {share:?} contains \"..\"")),
                "{error}"
            );
        }
    }
}
