//! `spec.driverConfig.manila`'s settings that reach the driver, read and checked before
//! anything is applied: topology (`--with-topology`, the classes' `autoTopology`), the
//! classes' `nfs-shareClient`, the runtime configuration file's
//! `nfs.matchExportLocationAddress`, and the share protocol.
//!
//! A value the driver would refuse (an address that is not one, CEPHFS without a CephFS
//! node plugin) is a [`SettingsError`] naming the field: the operator then applies nothing
//! and says so in a Degraded condition, rather than installing a driver that fails on every
//! volume.

use std::net::IpAddr;

use ipnet::IpNet;
use operator_kit::api::{ManilaDriverConfig, ShareProtocol, TopologyState};
use operator_kit::status::Health;

/// The reason of the static resources' Degraded condition while a setting is refused.
pub const INVALID_DRIVER_CONFIG: &str = "InvalidDriverConfig";

/// The ConfigMap holding the driver's runtime configuration file.
pub const RUNTIME_CONFIG_MAP: &str = "manila-csi-runtime-config";
/// The file's key in [`RUNTIME_CONFIG_MAP`] (and its name where it is mounted).
pub const RUNTIME_CONFIG_KEY: &str = "runtime-config.json";
/// Where the ConfigMap is mounted in the driver containers.
pub const RUNTIME_CONFIG_DIR: &str = "/etc/manila-csi";

/// The settings, checked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DriverSettings {
    /// `topology: Enabled`.
    pub topology: bool,
    /// `nfsShareClient`, its entries trimmed and joined with `,` (repeats dropped).
    pub nfs_share_client: Option<String>,
    /// `matchExportLocationAddress`, trimmed.
    pub match_export_location_address: Option<String>,
}

/// A setting the operator refuses to pass on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// An address setting that is not what the driver accepts.
    #[error(
        "spec.driverConfig.manila.{field}: {value:?} {why}; nothing is applied until it is corrected"
    )]
    Address {
        /// `nfsShareClient` or `matchExportLocationAddress`.
        field: &'static str,
        /// The offending value (one entry of a list).
        value: String,
        /// What is wrong with it.
        why: String,
    },
    /// `protocol: CEPHFS`, which this operator cannot serve.
    #[error(
        "spec.driverConfig.manila.protocol CEPHFS: the CephFS node plugin the Manila driver forwards to is not available (this operator installs only the NFS node plugin); nothing is applied until protocol is NFS or unset"
    )]
    CephfsUnavailable,
}

impl SettingsError {
    /// The static resources' health while the setting is refused: Degraded, naming the
    /// field, but Available (the installed driver, if any, is kept and keeps working).
    pub fn health(&self) -> Health {
        let message = self.to_string();
        Health {
            available: true,
            progressing: false,
            degraded: Some(message.clone()),
            reason: INVALID_DRIVER_CONFIG.into(),
            message,
        }
    }
}

impl DriverSettings {
    /// Reads `spec.driverConfig.manila` (absent: the defaults).
    pub fn from_spec(manila: Option<&ManilaDriverConfig>) -> Result<Self, SettingsError> {
        let Some(manila) = manila else {
            return Ok(DriverSettings::default());
        };
        if manila.protocol.unwrap_or_default() == ShareProtocol::Cephfs {
            return Err(SettingsError::CephfsUnavailable);
        }
        let nfs_share_client = manila
            .nfs_share_client
            .as_deref()
            .map(share_clients)
            .transpose()?;
        let match_export_location_address = manila
            .match_export_location_address
            .as_deref()
            .map(export_location_address)
            .transpose()?;
        Ok(DriverSettings {
            topology: manila.topology.unwrap_or_default() == TopologyState::Enabled,
            nfs_share_client,
            match_export_location_address,
        })
    }

    /// The runtime configuration file's text, when there is anything to configure.
    pub fn runtime_config(&self) -> Option<String> {
        self.match_export_location_address.as_ref().map(|address| {
            serde_json::json!({"nfs": {"matchExportLocationAddress": address}}).to_string()
        })
    }
}

/// `nfsShareClient`: what Manila takes as the target of an `ip` rule, as the driver checks
/// it: an address, or a network without host bits (Manila refuses `10.0.0.1/8`).
fn share_clients(value: &str) -> Result<String, SettingsError> {
    let invalid = |entry: &str, why: &str| SettingsError::Address {
        field: "nfsShareClient",
        value: entry.to_string(),
        why: why.to_string(),
    };
    let mut clients: Vec<&str> = Vec::new();
    for entry in value.split(',').map(str::trim) {
        if entry.is_empty() {
            return Err(invalid(value, "has an empty entry"));
        }
        if entry.parse::<IpAddr>().is_err() {
            match entry.parse::<IpNet>() {
                Ok(net) if net.trunc() == net => {}
                Ok(net) => {
                    return Err(invalid(
                        entry,
                        &format!(
                            "has host bits set, which Manila refuses (the network is {})",
                            net.trunc()
                        ),
                    ));
                }
                Err(_) => {
                    return Err(invalid(
                        entry,
                        "is neither an IP address nor a network in CIDR notation",
                    ));
                }
            }
        }
        if !clients.contains(&entry) {
            clients.push(entry);
        }
    }
    Ok(clients.join(","))
}

/// `matchExportLocationAddress`: an address or a CIDR, as the driver's runtime
/// configuration takes it.
fn export_location_address(value: &str) -> Result<String, SettingsError> {
    let text = value.trim();
    if text.parse::<IpAddr>().is_ok() || text.parse::<IpNet>().is_ok() {
        return Ok(text.to_string());
    }
    Err(SettingsError::Address {
        field: "matchExportLocationAddress",
        value: value.to_string(),
        why: "is neither an IP address nor a CIDR".into(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn manila(json: serde_json::Value) -> ManilaDriverConfig {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn unset_settings_are_the_defaults() {
        assert_eq!(
            DriverSettings::from_spec(None).unwrap(),
            DriverSettings::default()
        );
        let settings = DriverSettings::from_spec(Some(&manila(serde_json::json!({})))).unwrap();
        assert_eq!(settings, DriverSettings::default());
        assert!(!settings.topology);
        assert_eq!(settings.runtime_config(), None);
        let nfs = manila(serde_json::json!({"protocol": "NFS", "topology": "Disabled"}));
        assert_eq!(
            DriverSettings::from_spec(Some(&nfs)).unwrap(),
            DriverSettings::default()
        );
    }

    #[test]
    fn every_setting_is_read() {
        let settings = DriverSettings::from_spec(Some(&manila(serde_json::json!({
            "topology": "Enabled",
            "nfsShareClient": " 10.0.0.0/8, 192.168.1.5,10.0.0.0/8,fd00::/8 ",
            "matchExportLocationAddress": " 172.16.0.0/12 ",
        }))))
        .unwrap();
        assert_eq!(
            settings,
            DriverSettings {
                topology: true,
                nfs_share_client: Some("10.0.0.0/8,192.168.1.5,fd00::/8".into()),
                match_export_location_address: Some("172.16.0.0/12".into()),
            }
        );
        let file: serde_json::Value =
            serde_json::from_str(&settings.runtime_config().unwrap()).unwrap();
        assert_eq!(
            file,
            serde_json::json!({"nfs": {"matchExportLocationAddress": "172.16.0.0/12"}})
        );
    }

    #[test]
    fn an_address_is_an_ip_or_a_cidr_with_host_bits_allowed() {
        for good in ["10.0.0.5", "10.0.0.5/24", "fd00::1", "fd00::/64"] {
            let spec = manila(serde_json::json!({"matchExportLocationAddress": good}));
            let settings = DriverSettings::from_spec(Some(&spec)).unwrap();
            assert_eq!(
                settings.match_export_location_address.as_deref(),
                Some(good)
            );
        }
    }

    #[rstest::rstest]
    #[case::not_an_address(
        serde_json::json!({"matchExportLocationAddress": "nfs.example.com"}),
        "spec.driverConfig.manila.matchExportLocationAddress: \"nfs.example.com\" is neither an IP address nor a CIDR; nothing is applied until it is corrected"
    )]
    #[case::empty_address(
        serde_json::json!({"matchExportLocationAddress": ""}),
        "spec.driverConfig.manila.matchExportLocationAddress: \"\" is neither"
    )]
    #[case::bad_prefix(
        serde_json::json!({"matchExportLocationAddress": "10.0.0.0/33"}),
        "\"10.0.0.0/33\" is neither"
    )]
    #[case::client_not_an_address(
        serde_json::json!({"nfsShareClient": "10.0.0.0/8,everyone"}),
        "spec.driverConfig.manila.nfsShareClient: \"everyone\" is neither an IP address nor a network in CIDR notation"
    )]
    #[case::client_host_bits(
        serde_json::json!({"nfsShareClient": "10.0.0.1/8"}),
        "\"10.0.0.1/8\" has host bits set, which Manila refuses (the network is 10.0.0.0/8)"
    )]
    #[case::client_empty_entry(
        serde_json::json!({"nfsShareClient": "10.0.0.0/8,,10.1.0.0/16"}),
        "\"10.0.0.0/8,,10.1.0.0/16\" has an empty entry"
    )]
    #[case::client_empty(serde_json::json!({"nfsShareClient": ""}), "\"\" has an empty entry")]
    #[case::cephfs(
        serde_json::json!({"protocol": "CEPHFS"}),
        "spec.driverConfig.manila.protocol CEPHFS: the CephFS node plugin the Manila driver forwards to is not available"
    )]
    fn a_value_the_driver_would_refuse_names_the_field(
        #[case] spec: serde_json::Value,
        #[case] message: &str,
    ) {
        let error = DriverSettings::from_spec(Some(&manila(spec))).unwrap_err();
        let text = error.to_string();
        assert!(text.contains(message), "{text}");
        assert!(text.contains("nothing is applied"), "{text}");
        let health = error.health();
        assert!(health.available && !health.progressing);
        assert_eq!(health.degraded.as_deref(), Some(text.as_str()));
        assert_eq!(health.reason, INVALID_DRIVER_CONFIG);
        let conditions = health.conditions("ManilaStaticResourcesController");
        let degraded = conditions
            .iter()
            .find(|c| c.type_ == "ManilaStaticResourcesControllerDegraded")
            .unwrap();
        assert_eq!(degraded.status, operator_kit::status::Status::True);
        assert_eq!(degraded.message, text);
    }
}
