//! NFS shares: `ip` access rules and `{server, share}` for the partner.

use std::collections::HashMap;

use ipnet::IpNet;

use super::{AdapterFuture, PartnerVolume, ShareAdapter, is_active, is_failed};
use crate::config::ShareProtocol;
use crate::error::{Error, Result};
use crate::export_location::RuntimeConfig;
use crate::options::{CephfsOptions, VolumeOptions, is_ipv6_client};
use crate::wait::{Progress, WaitPolicy};
use openstack_client::ManilaClient;
use openstack_client::manila::{
    AccessRule, ExportLocation, IPV6_ACCESS_MICROVERSION, Microversion, Share,
};

/// The NFS adapter.
#[derive(Debug, Default)]
pub struct NfsAdapter;

impl ShareAdapter for NfsAdapter {
    fn protocol(&self) -> ShareProtocol {
        ShareProtocol::Nfs
    }

    fn check_access(
        &self,
        options: &VolumeOptions,
        _share_name: &str,
        max_version: Microversion,
    ) -> Result<()> {
        // The addresses themselves were checked when the parameters were parsed.
        match options.nfs_share_clients.iter().find(|c| is_ipv6_client(c)) {
            Some(client) if max_version < IPV6_ACCESS_MICROVERSION => {
                Err(Error::InvalidArgument(format!(
                    "parameter nfs-shareClient: {client:?} is IPv6, which Manila accepts from microversion {IPV6_ACCESS_MICROVERSION}; this cloud supports up to {max_version}"
                )))
            }
            _ => Ok(()),
        }
    }

    fn grant_access<'a>(
        &'a self,
        client: &'a ManilaClient,
        share: &'a Share,
        options: &'a VolumeOptions,
        policy: WaitPolicy,
    ) -> AdapterFuture<'a, Vec<AccessRule>> {
        Box::pin(async move {
            let wanted = &options.nfs_share_clients;
            let existing = client.access_rules(&share.id).await?;
            for address in wanted {
                let present = existing
                    .iter()
                    .any(|r| r.access_type == "ip" && &r.access_to == address);
                if !present {
                    tracing::debug!(share_id = %share.id, %address, "granting NFS access");
                    client.grant_access(&share.id, "ip", address, "rw").await?;
                }
            }
            let what = format!(
                "NFS access rules {wanted:?} on share {} to become active",
                share.id
            );
            policy
                .wait(&what, || async {
                    let rules: Vec<AccessRule> = client
                        .access_rules(&share.id)
                        .await?
                        .into_iter()
                        .filter(|r| r.access_type == "ip" && wanted.contains(&r.access_to))
                        .collect();
                    if let Some(failed) = rules.iter().find(|r| is_failed(r)) {
                        return Err(Error::ResourceFailed {
                            message: format!(
                                "access rule {} (ip {}) on share {} is in state error",
                                failed.id, failed.access_to, share.id
                            ),
                            detail_id: None,
                        });
                    }
                    let pending: Vec<String> = rules
                        .iter()
                        .filter(|r| !is_active(r))
                        .map(|r| format!("{}={}", r.access_to, r.state.as_deref().unwrap_or("?")))
                        .collect();
                    Ok(if pending.is_empty() && !rules.is_empty() {
                        Progress::Done(rules)
                    } else {
                        Progress::Pending(format!("rule states {pending:?}"))
                    })
                })
                .await
        })
    }

    fn export_filter(&self, runtime: &RuntimeConfig) -> Result<Option<IpNet>> {
        runtime.address_filter()
    }

    fn partner_volume(
        &self,
        share: &Share,
        export: &ExportLocation,
        _rules: &[AccessRule],
        _cephfs: &CephfsOptions,
    ) -> Result<PartnerVolume> {
        // `server:/path`; IPv6 servers are bracketed, so split at the last colon.
        let (server, path) = export.path.rsplit_once(':').ok_or_else(|| {
            Error::FailedPrecondition(format!(
                "share {}: export location {:?} is not of the form server:/path",
                share.id, export.path
            ))
        })?;
        let server = server.trim_start_matches('[').trim_end_matches(']');
        Ok(PartnerVolume {
            context: HashMap::from([
                ("server".to_string(), server.to_string()),
                ("share".to_string(), path.to_string()),
            ]),
            secrets: HashMap::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn share() -> Share {
        serde_json::from_value(serde_json::json!({"id": "s1", "status": "available", "size": 1}))
            .unwrap()
    }

    #[test]
    fn nfs_context_splits_at_the_last_colon() {
        let export = ExportLocation {
            path: "[fd00::1]:/exports/a".into(),
            is_admin_only: false,
            preferred: true,
        };
        let volume = NfsAdapter
            .partner_volume(&share(), &export, &[], &CephfsOptions::default())
            .unwrap();
        assert_eq!(volume.context["server"], "fd00::1");
        assert_eq!(volume.context["share"], "/exports/a");
        assert!(volume.secrets.is_empty());
    }
}
