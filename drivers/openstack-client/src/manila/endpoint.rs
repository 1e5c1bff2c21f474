//! Where Manila is: its endpoint in a token's catalog, for the credentials' region and
//! interface, with an error that names what the catalog does list.

use crate::credentials::Credentials;
use crate::error::{Error, Result};
use crate::keystone::Catalog;

/// Catalog types under which Manila may be registered, most specific first.
pub const MANILA_SERVICE_TYPES: [&str; 3] = ["shared-file-system", "sharev2", "share"];

/// The Manila endpoint of a session's tokens ([`crate::keystone::EndpointPicker`]).
pub fn pick(catalog: &Catalog, credentials: &Credentials) -> Result<String> {
    manila_endpoint(
        catalog,
        credentials.region.as_deref(),
        &credentials.interface,
    )
}

/// The Manila endpoint of `catalog` for `interface` (`public`, `internal`, `admin`, with or
/// without the old `URL` suffix) in `region` (any region when `None`). A region the catalog
/// does not list at all is named in the error with the regions it does list.
pub fn manila_endpoint(catalog: &Catalog, region: Option<&str>, interface: &str) -> Result<String> {
    let interface = interface.trim_end_matches("URL");
    if let Some(url) = catalog.endpoint(&MANILA_SERVICE_TYPES, interface, region) {
        return Ok(url);
    }
    if let Some(region) = region
        && !catalog
            .endpoints_of(&MANILA_SERVICE_TYPES)
            .any(|e| e.in_region(Some(region)))
    {
        let regions = catalog.regions_of(&MANILA_SERVICE_TYPES);
        return Err(Error::NotInCatalog(format!(
            "os-region {region:?}: the Keystone catalog has no Manila endpoint (type {}) in that region; its Manila regions are: {}",
            MANILA_SERVICE_TYPES.join("/"),
            if regions.is_empty() {
                "none".to_string()
            } else {
                regions.join(", ")
            }
        )));
    }
    Err(Error::NotInCatalog(format!(
        "no Manila endpoint (type {}) with interface {interface:?} (os-endpointType){} in the Keystone catalog",
        MANILA_SERVICE_TYPES.join("/"),
        region
            .map(|r| format!(" in region {r:?}"))
            .unwrap_or_default()
    )))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::keystone::catalog::{CatalogEntry, Endpoint};

    fn catalog() -> Catalog {
        let endpoints = ["RegionOne", "RegionTwo"]
            .iter()
            .flat_map(|region| {
                ["public", "internal", "admin"]
                    .iter()
                    .map(move |interface| Endpoint {
                        url: format!("http://{region}-{interface}/v2/"),
                        interface: interface.to_string(),
                        region: Some(region.to_string()),
                        region_id: Some(region.to_string()),
                    })
            })
            .collect();
        Catalog {
            entries: vec![
                CatalogEntry {
                    kind: "identity".into(),
                    endpoints: Vec::new(),
                },
                CatalogEntry {
                    kind: "sharev2".into(),
                    endpoints,
                },
            ],
        }
    }

    #[test]
    fn region_and_interface_pick_the_endpoint() {
        let catalog = catalog();
        assert_eq!(
            manila_endpoint(&catalog, Some("RegionTwo"), "internal").unwrap(),
            "http://RegionTwo-internal/v2"
        );
        assert_eq!(
            manila_endpoint(&catalog, Some("RegionOne"), "adminURL").unwrap(),
            "http://RegionOne-admin/v2"
        );
        assert_eq!(
            manila_endpoint(&catalog, None, "public").unwrap(),
            "http://RegionOne-public/v2"
        );
    }

    #[test]
    fn an_unknown_region_names_the_known_ones() {
        let error = manila_endpoint(&catalog(), Some("RegionNine"), "public")
            .unwrap_err()
            .to_string();
        assert!(error.contains("\"RegionNine\""), "{error}");
        assert!(error.contains("RegionOne, RegionTwo"), "{error}");
        let error = manila_endpoint(&catalog(), Some("RegionTwo"), "private")
            .unwrap_err()
            .to_string();
        assert!(error.contains("\"private\""), "{error}");
    }
}
