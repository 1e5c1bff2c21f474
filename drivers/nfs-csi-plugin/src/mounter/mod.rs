//! Mounters: how an NFS export ends up mounted at a target path.

mod kernel;
mod local;

use std::path::Path;

pub use kernel::KernelMounter;
pub use local::LocalMounter;

use crate::error::Result;

/// What to mount where.
#[derive(Debug, Clone)]
pub struct MountRequest<'a> {
    /// NFS server (host name or address; IPv6 without brackets).
    pub server: &'a str,
    /// Exported path on the server.
    pub share: &'a str,
    /// Mount point (an existing directory).
    pub target: &'a Path,
    /// Mount options; may hold sensitive data, so never logged.
    pub options: &'a [String],
    /// Mount read-only.
    pub readonly: bool,
}

impl MountRequest<'_> {
    /// `server:share`, with an IPv6 server in brackets.
    pub fn export(&self) -> String {
        if self.server.contains(':') {
            format!("[{}]:{}", self.server, self.share)
        } else {
            format!("{}:{}", self.server, self.share)
        }
    }
}

/// Contract of a mounter:
/// - `check_usable` tells at start-up, with a reason, whether it can work on this machine;
/// - `mount` mounts exactly once (the caller has checked the target is not a mount point
///   yet) and leaves nothing mounted when it fails;
/// - `unmount` removes the top mount at `target` (the caller loops while it is one).
///
/// Errors carry gRPC codes through [`NodeError`](crate::NodeError).
pub trait Mounter: Send + Sync + 'static {
    /// The name used in flags and messages (`kernel`, `local`).
    fn name(&self) -> &'static str;

    /// Whether this mounter can work here.
    fn check_usable(&self) -> Result<()>;

    /// Mounts `request.export()` at `request.target`.
    fn mount(&self, request: &MountRequest<'_>) -> impl Future<Output = Result<()>> + Send;

    /// Unmounts the top mount at `target`.
    fn unmount(&self, target: &Path) -> impl Future<Output = Result<()>> + Send;
}
