//! Choosing the export location a node mounts, and the runtime configuration that can
//! restrict it to an address or network.

use std::net::IpAddr;
use std::path::Path;

use ipnet::IpNet;
use serde::Deserialize;

use crate::error::{Error, Result};
use openstack_client::manila::ExportLocation;

/// The runtime configuration file: `{"nfs":{"matchExportLocationAddress":"<IP|CIDR>"}}`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct RuntimeConfig {
    /// NFS settings.
    #[serde(default)]
    pub nfs: NfsRuntimeConfig,
}

/// The `nfs` section of [`RuntimeConfig`].
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NfsRuntimeConfig {
    /// Only export locations whose address is this IP or inside this CIDR are used.
    pub match_export_location_address: Option<String>,
}

impl RuntimeConfig {
    /// Reads the file; a missing path (no flag) is the empty config. Re-read on every call so
    /// that edits take effect without a restart.
    pub fn load(path: Option<&Path>) -> Result<Self> {
        let Some(path) = path else {
            return Ok(RuntimeConfig::default());
        };
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::FailedPrecondition(format!(
                "runtime config file {}: cannot read: {e}",
                path.display()
            ))
        })?;
        if text.trim().is_empty() {
            return Ok(RuntimeConfig::default());
        }
        serde_json::from_str(&text).map_err(|e| {
            Error::FailedPrecondition(format!(
                "runtime config file {}: invalid JSON: {e}",
                path.display()
            ))
        })
    }

    /// The address filter, parsed.
    pub fn address_filter(&self) -> Result<Option<IpNet>> {
        let Some(text) = self.nfs.match_export_location_address.as_deref() else {
            return Ok(None);
        };
        let text = text.trim();
        if text.is_empty() {
            return Ok(None);
        }
        if let Ok(net) = text.parse::<IpNet>() {
            return Ok(Some(net));
        }
        text.parse::<IpAddr>().map(|ip| Some(IpNet::from(ip))).map_err(|_| {
            Error::FailedPrecondition(format!(
                "runtime config nfs.matchExportLocationAddress: {text:?} is neither an IP address nor a CIDR"
            ))
        })
    }
}

/// Picks the export location to mount: admin-only and empty paths are skipped, locations
/// outside `filter` are skipped, then a `preferred` one wins, else the first.
pub fn choose<'a>(
    share_id: &str,
    locations: &'a [ExportLocation],
    filter: Option<&IpNet>,
) -> Result<&'a ExportLocation> {
    let usable: Vec<&ExportLocation> = locations
        .iter()
        .filter(|l| !l.is_admin_only && !l.path.trim().is_empty())
        .filter(|l| {
            filter.is_none_or(|net| address_of(&l.path).is_some_and(|ip| net.contains(&ip)))
        })
        .collect();
    usable
        .iter()
        .find(|l| l.preferred)
        .or_else(|| usable.first())
        .copied()
        .ok_or_else(|| {
            let paths: Vec<&str> = locations.iter().map(|l| l.path.as_str()).collect();
            Error::FailedPrecondition(match filter {
                Some(net) => format!(
                    "share {share_id} has no usable export location matching {net} (has: {paths:?})"
                ),
                None => format!("share {share_id} has no usable export location (has: {paths:?})"),
            })
        })
}

/// The server address of `server:/path` (brackets around IPv6 removed). Host names give
/// `None`, so they never match an address filter.
fn address_of(path: &str) -> Option<IpAddr> {
    let (server, _) = path.rsplit_once(':')?;
    server
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn location(path: &str, admin: bool, preferred: bool) -> ExportLocation {
        ExportLocation {
            path: path.into(),
            is_admin_only: admin,
            preferred,
        }
    }

    #[test]
    fn admin_only_and_empty_are_skipped_and_preferred_wins() {
        let locations = vec![
            location("10.0.0.1:/admin", true, true),
            location("", false, true),
            location("10.0.0.2:/a", false, false),
            location("10.0.0.3:/a", false, true),
        ];
        assert_eq!(choose("s", &locations, None).unwrap().path, "10.0.0.3:/a");
        assert_eq!(
            choose("s", &locations[..3], None).unwrap().path,
            "10.0.0.2:/a"
        );
    }

    #[test]
    fn the_address_filter_selects_by_network() {
        let locations = vec![
            location("10.0.0.2:/a", false, true),
            location("192.168.5.7:/a", false, false),
        ];
        let config: RuntimeConfig =
            serde_json::from_str(r#"{"nfs":{"matchExportLocationAddress":"192.168.0.0/16"}}"#)
                .unwrap();
        let net = config.address_filter().unwrap().unwrap();
        assert_eq!(
            choose("s", &locations, Some(&net)).unwrap().path,
            "192.168.5.7:/a"
        );
        let none: IpNet = "172.16.0.0/12".parse().unwrap();
        let error = choose("s", &locations, Some(&none)).unwrap_err();
        assert!(error.to_string().contains("172.16.0.0/12"), "{error}");
    }

    #[test]
    fn a_single_ip_filter_is_a_host_network() {
        let config: RuntimeConfig =
            serde_json::from_str(r#"{"nfs":{"matchExportLocationAddress":"10.0.0.9"}}"#).unwrap();
        let net = config.address_filter().unwrap().unwrap();
        assert!(net.contains(&"10.0.0.9".parse::<IpAddr>().unwrap()));
        let bad: RuntimeConfig =
            serde_json::from_str(r#"{"nfs":{"matchExportLocationAddress":"nope"}}"#).unwrap();
        assert!(bad.address_filter().is_err());
    }
}
