//! The seed of a fake cloud: account, catalog shape, share types, zones, delays and limits,
//! one module per section ([`CloudConfig`] composes them; every type is re-exported here).
//!
//! Seeds are plain serde structs, readable from YAML (see `fixtures/fake-cloud/`). Every
//! field has a default, so `CloudConfig::default()` is a working cloud with one user, one
//! project, Manila present and a `default` share type. The seed is also the cloud's settings
//! at run time (delays, presence, token lifetime), which the control API changes and a reset
//! brings back.

mod account;
mod block;
mod catalog;
mod limits;
mod manila;

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::microversion::Microversion;
use crate::release::OpenStackRelease;

pub use account::{ADMIN_ROLES, Account, AdminUser, ApplicationCredential, Secret, Trustee};
pub use block::{CinderConfig, CinderDelays, CinderQuotas, NovaConfig, ServerSeed, VolumeTypeSeed};
pub use catalog::{CatalogSeed, EndpointUrl, INTERFACES};
pub use limits::{MAX_DELAY_MS, MAX_SHARE_SIZE_GIB, MAX_TOKEN_LIFETIME_SECS};
pub(crate) use limits::{check_delay, check_token_lifetime};
pub use manila::{
    Delays, ExportAddress, ManilaConfig, Quotas, ShareGroupSeed, ShareGroupTypeSeed, ShareTypeSeed,
};

/// The whole seed of a fake cloud.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CloudConfig {
    /// The OpenStack release the cloud emulates (default the newest): each service's
    /// highest microversion unless its section sets `max_microversion`.
    pub release: OpenStackRelease,
    /// Region of every catalog endpoint.
    pub region: String,
    /// The one user/project the cloud knows, and its application credential.
    pub account: Account,
    /// Lifetime of issued tokens, in seconds.
    pub token_lifetime_secs: u64,
    /// The Manila service.
    pub manila: ManilaConfig,
    /// Further regions and endpoint URLs of the catalog (default: one region, every
    /// endpoint on the fake's own URLs).
    pub catalog: CatalogSeed,
    /// The Cinder service.
    pub cinder: CinderConfig,
    /// The Nova servers volumes attach to.
    pub nova: NovaConfig,
}

impl CloudConfig {
    /// Manila's highest microversion: the seed's `manila.max_microversion`, else the
    /// release's.
    pub fn manila_max_microversion(&self) -> Microversion {
        let release = self.release.manila_max();
        self.manila
            .max_microversion
            .resolve(release)
            .unwrap_or(release)
    }

    /// Cinder's highest microversion: the seed's `cinder.max_microversion`, else the
    /// release's.
    pub fn cinder_max_microversion(&self) -> Microversion {
        let release = self.release.cinder_max();
        self.cinder
            .max_microversion
            .resolve(release)
            .unwrap_or(release)
    }

    /// Nova's highest microversion: the seed's `nova.max_microversion`, else the release's.
    pub fn nova_max_microversion(&self) -> Microversion {
        let release = self.release.nova_max();
        self.nova
            .max_microversion
            .resolve(release)
            .unwrap_or(release)
    }

    /// Every region of the catalog, the cloud's `region` first.
    pub fn regions(&self) -> Vec<&str> {
        std::iter::once(self.region.as_str())
            .chain(self.catalog.extra_regions.iter().map(String::as_str))
            .collect()
    }

    fn validate_catalog(&self) -> Result<()> {
        let mut seen = std::collections::BTreeSet::new();
        for region in self.regions() {
            if region.is_empty() {
                return Err(Error::InvalidSeed("catalog: a region name is empty".into()));
            }
            if !seen.insert(region) {
                return Err(Error::InvalidSeed(format!(
                    "catalog.extra_regions: region {region:?} is listed twice"
                )));
            }
        }
        for endpoint in &self.catalog.manila_endpoints {
            if !seen.contains(endpoint.region.as_str()) {
                return Err(Error::InvalidSeed(format!(
                    "catalog.manila_endpoints: region {:?} is not a region of the catalog ({})",
                    endpoint.region,
                    self.regions().join(", ")
                )));
            }
            if !INTERFACES.contains(&endpoint.interface.as_str()) {
                return Err(Error::InvalidSeed(format!(
                    "catalog.manila_endpoints: interface {:?} is not one of {}",
                    endpoint.interface,
                    INTERFACES.join(", ")
                )));
            }
        }
        Ok(())
    }
}

impl Default for CloudConfig {
    fn default() -> Self {
        Self {
            release: OpenStackRelease::default(),
            region: "RegionOne".into(),
            account: Account::default(),
            token_lifetime_secs: 3600,
            manila: ManilaConfig::default(),
            catalog: CatalogSeed::default(),
            cinder: CinderConfig::default(),
            nova: NovaConfig::default(),
        }
    }
}

impl CloudConfig {
    /// Parses a YAML seed; `origin` names it in errors.
    pub fn from_yaml(text: &str, origin: &str) -> Result<Self> {
        let config: Self = serde_yaml::from_str(text).map_err(|source| Error::ParseSeed {
            origin: origin.into(),
            source,
        })?;
        config.validate()?;
        Ok(config)
    }

    /// Reads and parses a YAML seed file.
    pub fn from_yaml_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::ReadSeed {
            path: path.into(),
            source,
        })?;
        Self::from_yaml(&text, &path.display().to_string())
    }

    /// Checks what serde cannot: unique type names, a default type that exists, loopback
    /// export addresses, a parsable maximum microversion, at least one zone.
    pub fn validate(&self) -> Result<()> {
        self.manila.validate_types_and_exports()?;
        check_token_lifetime("token_lifetime_secs", self.token_lifetime_secs)
            .map_err(Error::InvalidSeed)?;
        self.validate_catalog()?;
        self.manila
            .delays
            .validate()
            .map_err(|e| Error::InvalidSeed(format!("manila.delays.{e}")))?;
        block::validate(&self.cinder, &self.nova).map_err(Error::InvalidSeed)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn default_seed_is_valid() {
        CloudConfig::default().validate().unwrap();
    }

    #[test]
    fn unknown_seed_field_is_named() {
        let err = CloudConfig::from_yaml("manila:\n  share_typo: []\n", "<inline>").unwrap_err();
        let chain = format!("{err}: {}", std::error::Error::source(&err).unwrap());
        assert!(chain.contains("share_typo"), "{chain}");
    }

    #[test]
    fn default_type_must_exist() {
        let err = CloudConfig::from_yaml(
            "manila:\n  share_types: [{name: gold}]\n  default_share_type: silver\n",
            "<inline>",
        )
        .unwrap_err();
        assert!(err.to_string().contains("\"silver\""), "{err}");
    }

    #[test]
    fn export_addresses_must_be_loopback() {
        let err = CloudConfig::from_yaml(
            "manila:\n  export_locations: [{address: 10.0.0.1}]\n",
            "<inline>",
        )
        .unwrap_err();
        assert!(err.to_string().contains("10.0.0.1"), "{err}");
    }

    #[test]
    fn catalog_endpoints_must_name_a_known_region_and_interface() {
        let err = CloudConfig::from_yaml(
            "catalog:\n  extra_regions: [RegionTwo]\n  manila_endpoints: [{region: RegionThree, interface: public, url: 'http://x'}]\n",
            "<inline>",
        )
        .unwrap_err();
        assert!(err.to_string().contains("\"RegionThree\""), "{err}");
        assert!(err.to_string().contains("RegionOne, RegionTwo"), "{err}");
        let err = CloudConfig::from_yaml(
            "catalog:\n  manila_endpoints: [{region: RegionOne, interface: publicURL, url: 'http://x'}]\n",
            "<inline>",
        )
        .unwrap_err();
        assert!(err.to_string().contains("\"publicURL\""), "{err}");
        let err = CloudConfig::from_yaml("catalog:\n  extra_regions: [RegionOne]\n", "<inline>")
            .unwrap_err();
        assert!(err.to_string().contains("twice"), "{err}");
    }

    #[test]
    fn password_does_not_print() {
        let text = format!("{:?}", CloudConfig::default());
        assert!(!text.contains("fake-password"), "{text}");
        assert!(!text.contains("fake-trustee-password"), "{text}");
    }

    #[test]
    fn the_release_sets_each_maximum_unless_the_seed_does() {
        let newest = CloudConfig::default();
        assert_eq!(newest.release, OpenStackRelease::V2026_1);
        let maxima = |c: &CloudConfig| {
            [
                c.manila_max_microversion().to_string(),
                c.cinder_max_microversion().to_string(),
                c.nova_max_microversion().to_string(),
            ]
        };
        assert_eq!(maxima(&newest), ["2.95", "3.71", "2.103"]);
        let older = CloudConfig::from_yaml("release: '2025.1'\n", "<inline>").unwrap();
        assert_eq!(maxima(&older), ["2.89", "3.71", "2.100"]);
        let pinned = CloudConfig::from_yaml(
            "release: '2025.2'\nmanila: {max_microversion: '2.64'}\ncinder: {max_microversion: '3.50'}\nnova: {max_microversion: '2.88'}\n",
            "<inline>",
        )
        .unwrap();
        assert_eq!(pinned.release, OpenStackRelease::V2025_2);
        assert_eq!(maxima(&pinned), ["2.64", "3.50", "2.88"]);
    }

    #[test]
    fn unknown_releases_and_bad_maxima_are_named() {
        let err = CloudConfig::from_yaml("release: '2024.2'\n", "<inline>").unwrap_err();
        let chain = format!("{err}: {}", std::error::Error::source(&err).unwrap());
        assert!(
            chain.contains("2024.2") && chain.contains("2026.1"),
            "{chain}"
        );
        for (yaml, named) in [
            (
                "manila: {max_microversion: '3.1'}\n",
                "manila.max_microversion",
            ),
            (
                "cinder: {max_microversion: '2.1'}\n",
                "cinder.max_microversion",
            ),
            (
                "nova: {max_microversion: 'latest'}\n",
                "nova.max_microversion",
            ),
        ] {
            let err = CloudConfig::from_yaml(yaml, "<inline>").unwrap_err();
            assert!(err.to_string().contains(named), "{err}");
        }
    }
}
