//! Share protocol adapters: what differs between NFS and CephFS shares — granting access
//! and turning an export location into what the partner node plugin understands.

mod cephfs;
mod nfs;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use ipnet::IpNet;

pub use cephfs::CephfsAdapter;
pub use nfs::NfsAdapter;

use crate::config::ShareProtocol;
use crate::error::Result;
use crate::export_location::RuntimeConfig;
use crate::options::{CephfsOptions, VolumeOptions};
use crate::wait::WaitPolicy;
use openstack_client::ManilaClient;
use openstack_client::manila::{AccessRule, ExportLocation, Microversion, Share};

/// A boxed future returned by adapter methods (keeps the trait object-safe).
pub type AdapterFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

/// What the partner node plugin gets instead of the Manila volume context and secrets.
#[derive(Clone, Default, PartialEq)]
pub struct PartnerVolume {
    /// Volume context for the partner (NFS: `server`, `share`; CephFS: `monitors`, …).
    pub context: HashMap<String, String>,
    /// Secrets for the partner (CephFS: `userID`, `userKey`; NFS: none).
    pub secrets: HashMap<String, String>,
}

impl std::fmt::Debug for PartnerVolume {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secret_keys: Vec<&String> = self.secrets.keys().collect();
        f.debug_struct("PartnerVolume")
            .field("context", &self.context)
            .field(
                "secrets",
                &format_args!("{secret_keys:?} (values redacted)"),
            )
            .finish()
    }
}

/// One share protocol. Contract: `grant_access` is idempotent (rules that already exist are
/// reused, never duplicated) and returns only once the rules are usable; `partner_volume`
/// does no I/O.
pub trait ShareAdapter: Send + Sync + std::fmt::Debug {
    /// The protocol this adapter handles.
    fn protocol(&self) -> ShareProtocol;

    /// Checks, before anything is created, that Manila (answering up to `max_version`) will
    /// accept the access rules `options` asks for on a share named `share_name`: a rule
    /// refused after the share exists would strand it. Errors name the parameter.
    fn check_access(
        &self,
        options: &VolumeOptions,
        share_name: &str,
        max_version: Microversion,
    ) -> Result<()>;

    /// Ensures the access rules `options` asks for exist on `share` and are active; returns
    /// them (their ids become `shareAccessIDs`).
    fn grant_access<'a>(
        &'a self,
        client: &'a ManilaClient,
        share: &'a Share,
        options: &'a VolumeOptions,
        policy: WaitPolicy,
    ) -> AdapterFuture<'a, Vec<AccessRule>>;

    /// The export-location address filter from the runtime configuration, if this protocol
    /// honours one.
    fn export_filter(&self, runtime: &RuntimeConfig) -> Result<Option<IpNet>>;

    /// Builds the partner's volume context and secrets from the chosen export location and
    /// the volume's access rules.
    fn partner_volume(
        &self,
        share: &Share,
        export: &ExportLocation,
        rules: &[AccessRule],
        cephfs: &CephfsOptions,
    ) -> Result<PartnerVolume>;
}

/// The adapter for `protocol`.
pub fn adapter_for(protocol: ShareProtocol) -> Arc<dyn ShareAdapter> {
    match protocol {
        ShareProtocol::Nfs => Arc::new(NfsAdapter),
        ShareProtocol::Cephfs => Arc::new(CephfsAdapter),
    }
}

/// Whether an access rule is applied.
fn is_active(rule: &AccessRule) -> bool {
    rule.state.as_deref().is_none_or(|s| s == "active")
}

/// Whether an access rule failed.
fn is_failed(rule: &AccessRule) -> bool {
    rule.state.as_deref() == Some("error")
}
