//! CephFS shares: `cephx` access rules (waiting for the key) and the ceph-csi volume context.

use std::collections::HashMap;

use ipnet::IpNet;

use super::{AdapterFuture, PartnerVolume, ShareAdapter, is_failed};
use crate::config::ShareProtocol;
use crate::error::{Error, Result};
use crate::export_location::RuntimeConfig;
use crate::options::{CephfsMounter, CephfsOptions, VolumeOptions};
use crate::wait::{Progress, WaitPolicy};
use openstack_client::ManilaClient;
use openstack_client::manila::{AccessRule, ExportLocation, Microversion, Share};

/// What Manila accepts as the target of a `cephx` rule: 1 to 255 printable ASCII characters
/// without spaces or periods (Manila refuses periods so that nobody writes the `client.`
/// prefix), and not `admin` (the CephFS driver refuses it).
fn check_cephx_user(user: &str) -> std::result::Result<(), &'static str> {
    if user.is_empty() || user.len() > 255 {
        Err("must be 1 to 255 characters long")
    } else if !user.bytes().all(|b| b.is_ascii_graphic()) {
        Err("must be printable ASCII without spaces")
    } else if user.contains('.') {
        Err("may not contain periods (give the cephx user without the \"client.\" prefix)")
    } else if user == "admin" {
        Err("is reserved: Manila does not grant access to the Ceph admin user")
    } else {
        Ok(())
    }
}

/// The share metadata key in which Manila's CephFS driver gives the mount options clients
/// need, e.g. `fs=<name>` for a share on another CephFS file system than the default one.
pub const MOUNT_OPTIONS_KEY: &str = "__mount_options";

/// The CephFS file system of `share`: the `fs=` option of its `__mount_options` metadata
/// (a comma list of options), as upstream reads it. None when the share does not name one.
fn fs_name(share: &Share) -> Option<&str> {
    share
        .metadata
        .get(MOUNT_OPTIONS_KEY)?
        .split(',')
        .filter_map(|option| option.trim().strip_prefix("fs="))
        .map(str::trim)
        .find(|name| !name.is_empty())
}

/// The CephFS adapter.
#[derive(Debug, Default)]
pub struct CephfsAdapter;

impl ShareAdapter for CephfsAdapter {
    fn protocol(&self) -> ShareProtocol {
        ShareProtocol::Cephfs
    }

    fn check_access(
        &self,
        options: &VolumeOptions,
        share_name: &str,
        _max_version: Microversion,
    ) -> Result<()> {
        let users = options.cephfs.client_ids();
        if users.is_empty() {
            return check_cephx_user(share_name).map_err(|why| {
                Error::InvalidArgument(format!(
                    "volume name (the default cephfs-clientID): {share_name:?} {why}"
                ))
            });
        }
        for user in users {
            check_cephx_user(user).map_err(|why| {
                Error::InvalidArgument(format!("parameter cephfs-clientID: {user:?} {why}"))
            })?;
        }
        Ok(())
    }

    fn grant_access<'a>(
        &'a self,
        client: &'a ManilaClient,
        share: &'a Share,
        options: &'a VolumeOptions,
        policy: WaitPolicy,
    ) -> AdapterFuture<'a, Vec<AccessRule>> {
        Box::pin(async move {
            // Every user of the cephfs-clientID list gets its rule (the share name when the
            // list is empty); the rules come back in the list's order, the first being the
            // one the node mounts with.
            let listed = options.cephfs.client_ids();
            let users: Vec<String> = if listed.is_empty() {
                vec![share.name.clone().unwrap_or_else(|| share.id.clone())]
            } else {
                listed.into_iter().map(String::from).collect()
            };
            let existing = client.access_rules(&share.id).await?;
            for user in &users {
                if !existing
                    .iter()
                    .any(|r| r.access_type == "cephx" && &r.access_to == user)
                {
                    tracing::debug!(share_id = %share.id, %user, "granting cephx access");
                    client.grant_access(&share.id, "cephx", user, "rw").await?;
                }
            }
            let what = format!(
                "cephx access rules for {users:?} on share {} to get their keys",
                share.id
            );
            policy
                .wait(&what, || async {
                    let all = client.access_rules(&share.id).await?;
                    let mut ready = Vec::with_capacity(users.len());
                    for user in &users {
                        let rule = all
                            .iter()
                            .find(|r| r.access_type == "cephx" && &r.access_to == user);
                        match rule {
                            Some(rule) if is_failed(rule) => {
                                return Err(Error::ResourceFailed {
                                    message: format!(
                                        "access rule {} (cephx {user}) on share {} is in state error",
                                        rule.id, share.id
                                    ),
                                    detail_id: None,
                                });
                            }
                            Some(rule)
                                if rule.access_key.as_deref().is_some_and(|k| !k.is_empty()) =>
                            {
                                ready.push(rule.clone());
                            }
                            Some(rule) => {
                                return Ok(Progress::Pending(format!(
                                    "rule {} ({user}) in state {} without access_key",
                                    rule.id,
                                    rule.state.as_deref().unwrap_or("?")
                                )));
                            }
                            None => {
                                return Ok(Progress::Pending(format!("no rule for {user} yet")));
                            }
                        }
                    }
                    Ok(Progress::Done(ready))
                })
                .await
        })
    }

    fn export_filter(&self, _runtime: &RuntimeConfig) -> Result<Option<IpNet>> {
        Ok(None)
    }

    fn partner_volume(
        &self,
        share: &Share,
        export: &ExportLocation,
        rules: &[AccessRule],
        cephfs: &CephfsOptions,
    ) -> Result<PartnerVolume> {
        // `mon1:6789,mon2:6789:/volumes/_nogroup/<id>`
        let (monitors, root) = export.path.split_once(":/").ok_or_else(|| {
            Error::FailedPrecondition(format!(
                "share {}: export location {:?} is not of the form monitors:/path",
                share.id, export.path
            ))
        })?;
        let rule = rules
            .iter()
            .find(|r| {
                r.access_type == "cephx" && r.access_key.as_deref().is_some_and(|k| !k.is_empty())
            })
            .ok_or_else(|| {
                Error::FailedPrecondition(format!(
                    "share {}: none of the access rules {:?} is a cephx rule with a key",
                    share.id,
                    rules.iter().map(|r| r.id.as_str()).collect::<Vec<_>>()
                ))
            })?;
        let mut context = HashMap::from([
            ("monitors".to_string(), monitors.to_string()),
            ("rootPath".to_string(), format!("/{root}")),
            (
                "mounter".to_string(),
                cephfs
                    .mounter
                    .unwrap_or(CephfsMounter::Fuse)
                    .as_str()
                    .to_string(),
            ),
            ("provisionVolume".to_string(), "false".to_string()),
        ]);
        if let Some(fs_name) = fs_name(share) {
            context.insert("fsName".into(), fs_name.to_string());
        }
        if let Some(options) = &cephfs.kernel_mount_options {
            context.insert("kernelMountOptions".into(), options.clone());
        }
        if let Some(options) = &cephfs.fuse_mount_options {
            context.insert("fuseMountOptions".into(), options.clone());
        }
        let secrets = HashMap::from([
            ("userID".to_string(), rule.access_to.clone()),
            (
                "userKey".to_string(),
                rule.access_key.clone().unwrap_or_default(),
            ),
        ]);
        Ok(PartnerVolume { context, secrets })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use openstack_client::manila::MIN_MICROVERSION;

    #[rstest::rstest]
    #[case(
        Some("client.alice"),
        "parameter cephfs-clientID: \"client.alice\" may not contain periods"
    )]
    #[case(Some("admin"), "parameter cephfs-clientID: \"admin\" is reserved")]
    #[case(
        Some("al ice"),
        "parameter cephfs-clientID: \"al ice\" must be printable ASCII"
    )]
    #[case(
        None,
        "volume name (the default cephfs-clientID): \"pvc.1\" may not contain periods"
    )]
    fn cephx_users_manila_refuses_are_caught_before_creating(
        #[case] client_id: Option<&str>,
        #[case] expected: &str,
    ) {
        let mut options = VolumeOptions::default();
        options.cephfs.client_id = client_id.map(String::from);
        let error = CephfsAdapter
            .check_access(&options, "pvc.1", MIN_MICROVERSION)
            .unwrap_err();
        assert!(matches!(error, Error::InvalidArgument(_)), "{error:?}");
        assert!(error.to_string().starts_with(expected), "{error}");
        options.cephfs.client_id = Some("alice".into());
        CephfsAdapter
            .check_access(&options, "pvc.1", MIN_MICROVERSION)
            .unwrap();
        options.cephfs.client_id = Some(" alice, bob ,,alice".into());
        assert_eq!(options.cephfs.client_ids(), ["alice", "bob"]);
        CephfsAdapter
            .check_access(&options, "pvc.1", MIN_MICROVERSION)
            .unwrap();
        // Each entry is checked, and the error names the one Manila would refuse.
        options.cephfs.client_id = Some("alice,client.bob".into());
        let error = CephfsAdapter
            .check_access(&options, "pvc.1", MIN_MICROVERSION)
            .unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("parameter cephfs-clientID: \"client.bob\" may not contain periods"),
            "{error}"
        );
    }

    #[rstest::rstest]
    #[case(serde_json::json!({}), None)]
    #[case(serde_json::json!({"__mount_options": "fs=myfs"}), Some("myfs"))]
    #[case(serde_json::json!({"__mount_options": "noatime, fs=other ,x=y"}), Some("other"))]
    #[case(serde_json::json!({"__mount_options": "fs="}), None)]
    #[case(serde_json::json!({"mount_options": "fs=nope"}), None)]
    fn the_file_system_comes_from_the_mount_options_metadata(
        #[case] metadata: serde_json::Value,
        #[case] expected: Option<&str>,
    ) {
        let share: Share = serde_json::from_value(serde_json::json!({
            "id": "s1", "status": "available", "size": 1, "metadata": metadata
        }))
        .unwrap();
        assert_eq!(fs_name(&share), expected);
    }

    #[test]
    fn cephfs_context_has_monitors_root_and_key() {
        let share: Share = serde_json::from_value(
            serde_json::json!({"id": "s1", "status": "available", "size": 1}),
        )
        .unwrap();
        let export = ExportLocation {
            path: "10.0.0.1:6789,10.0.0.2:6789:/volumes/_nogroup/abc".into(),
            is_admin_only: false,
            preferred: false,
        };
        let rule: AccessRule = serde_json::from_value(serde_json::json!({
            "id": "r1", "access_type": "cephx", "access_to": "alice",
            "access_key": "AQB==", "access_level": "rw", "state": "active"
        }))
        .unwrap();
        let options = CephfsOptions {
            mounter: Some(CephfsMounter::Kernel),
            ..Default::default()
        };
        let volume = CephfsAdapter
            .partner_volume(&share, &export, &[rule], &options)
            .unwrap();
        assert_eq!(volume.context["monitors"], "10.0.0.1:6789,10.0.0.2:6789");
        assert_eq!(volume.context["rootPath"], "/volumes/_nogroup/abc");
        assert_eq!(volume.context["mounter"], "kernel");
        assert_eq!(volume.secrets["userID"], "alice");
        assert!(!volume.context.contains_key("fsName"), "{volume:?}");
    }
}
