//! Turning a volume's Manila attributes into what the partner needs: look the share and its
//! access rules up, choose the export location, and let the protocol adapter build the
//! partner's context and secrets.

use std::collections::HashMap;
use std::path::Path;

use crate::config::ShareProtocol;
use crate::error::{Error, Result};
use crate::export_location::{self, RuntimeConfig};
use crate::options::{NodeVolumeOptions, ShareRef};
use crate::protocol::{PartnerVolume, ShareAdapter};
use openstack_client::Connector;
use openstack_client::manila::Share;

/// Resolves `attributes` (volume context / PV volume attributes) with the cloud named by
/// `secrets`.
pub async fn partner_volume(
    connector: &Connector,
    adapter: &dyn ShareAdapter,
    runtime_config_file: Option<&Path>,
    volume_id: &str,
    attributes: &HashMap<String, String>,
    secrets: &HashMap<String, String>,
) -> Result<PartnerVolume> {
    let options = NodeVolumeOptions::try_from(attributes)?;
    let client = connector.connect(secrets).await?;
    let share: Share = match &options.share {
        ShareRef::Id(id) => client.share(id).await?,
        ShareRef::Name(name) => {
            let mut shares = client.shares_named(name).await?;
            match shares.len() {
                1 => shares.remove(0),
                0 => {
                    return Err(Error::NotFound(format!(
                        "volume {volume_id}: no share named {name:?}"
                    )));
                }
                n => {
                    return Err(Error::FailedPrecondition(format!(
                        "volume {volume_id}: {n} shares are named {name:?}; use shareID"
                    )));
                }
            }
        }
    };
    if share.status != "available" {
        return Err(Error::FailedPrecondition(format!(
            "volume {volume_id}: share {} is in status {}, not available",
            share.id, share.status
        )));
    }
    let protocol = adapter.protocol();
    if let Some(proto) = &share.share_proto
        && !proto.eq_ignore_ascii_case(protocol.manila_name())
    {
        return Err(Error::InvalidArgument(format!(
            "volume {volume_id}: share {} uses protocol {proto}, this driver serves {}",
            share.id,
            protocol.manila_name()
        )));
    }
    let all_rules = client.access_rules(&share.id).await?;
    let mut rules = Vec::new();
    for id in &options.access_ids {
        let rule = all_rules.iter().find(|r| &r.id == id).ok_or_else(|| {
            Error::NotFound(format!(
                "volume {volume_id}: access rule {id} (shareAccessIDs) does not exist on share {}",
                share.id
            ))
        })?;
        rules.push(rule.clone());
    }
    if protocol == ShareProtocol::Cephfs && rules.iter().all(|r| r.access_key.is_none()) {
        return Err(Error::FailedPrecondition(format!(
            "volume {volume_id}: none of the access rules {:?} carries a cephx key yet",
            options.access_ids
        )));
    }
    let runtime = RuntimeConfig::load(runtime_config_file)?;
    let filter = adapter.export_filter(&runtime)?;
    let locations = client.export_locations(&share.id).await?;
    let export = export_location::choose(&share.id, &locations, filter.as_ref())?;
    adapter.partner_volume(&share, export, &rules, &options.cephfs)
}
