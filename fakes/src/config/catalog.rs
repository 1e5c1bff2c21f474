//! The catalog section of the seed (`catalog:`): further regions, and Manila endpoints that
//! point elsewhere.

use serde::{Deserialize, Serialize};

/// The catalog beyond [`super::CloudConfig::region`]: more regions, and Manila endpoints that point
/// elsewhere (e.g. an unreachable URL, to prove a client picked another region or interface).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CatalogSeed {
    /// Regions listed after [`super::CloudConfig::region`]; every service has the three interfaces
    /// (`public`, `internal`, `admin`) in each.
    pub extra_regions: Vec<String>,
    /// Manila endpoint URLs replacing the fake's own for one region and interface.
    pub manila_endpoints: Vec<EndpointUrl>,
}

/// One catalog endpoint's URL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointUrl {
    /// Region (the cloud's `region` or one of `catalog.extra_regions`).
    pub region: String,
    /// `public`, `internal` or `admin`.
    pub interface: String,
    /// The URL listed.
    pub url: String,
}

/// The interfaces every catalog service has, in listing order.
pub const INTERFACES: [&str; 3] = ["public", "internal", "admin"];
