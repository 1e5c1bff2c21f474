//! The service catalog of a Keystone token, and the endpoint lookup every client shares:
//! the first service of the given types with an endpoint of the interface (and region).

use serde::Deserialize;

/// A token's catalog: the services and their endpoints.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(transparent)]
pub struct Catalog {
    /// The catalog entries as Keystone lists them.
    pub entries: Vec<CatalogEntry>,
}

/// One service of the catalog.
#[derive(Clone, Debug, Deserialize)]
pub struct CatalogEntry {
    /// The service type (`sharev2`, `volumev3`, `compute` …).
    #[serde(rename = "type")]
    pub kind: String,
    /// Its endpoints.
    #[serde(default)]
    pub endpoints: Vec<Endpoint>,
}

/// One endpoint of a service.
#[derive(Clone, Debug, Deserialize)]
pub struct Endpoint {
    /// The URL.
    pub url: String,
    /// `public`, `internal` or `admin`.
    pub interface: String,
    /// Region name.
    pub region: Option<String>,
    /// Region id.
    pub region_id: Option<String>,
}

impl Endpoint {
    /// Whether the endpoint is in `region` (by name or id); any region when `None`.
    pub fn in_region(&self, region: Option<&str>) -> bool {
        region.is_none_or(|r| {
            self.region.as_deref() == Some(r) || self.region_id.as_deref() == Some(r)
        })
    }
}

impl Catalog {
    /// The endpoints of the services of `types`, the types in the order given.
    pub fn endpoints_of<'a>(&'a self, types: &'a [&'a str]) -> impl Iterator<Item = &'a Endpoint> {
        types
            .iter()
            .flat_map(move |kind| self.entries.iter().filter(move |e| e.kind == *kind))
            .flat_map(|entry| entry.endpoints.iter())
    }

    /// The URL (no trailing slash) of the first endpoint of a service of `types` with
    /// exactly `interface` in `region` (any region when `None`).
    pub fn endpoint(
        &self,
        types: &[&str],
        interface: &str,
        region: Option<&str>,
    ) -> Option<String> {
        self.endpoints_of(types)
            .find(|endpoint| endpoint.interface == interface && endpoint.in_region(region))
            .map(|endpoint| endpoint.url.trim_end_matches('/').to_string())
    }

    /// The regions (names, else ids) the services of `types` have endpoints in, sorted.
    pub fn regions_of(&self, types: &[&str]) -> Vec<String> {
        let mut regions: Vec<String> = self
            .endpoints_of(types)
            .filter_map(|e| e.region.clone().or_else(|| e.region_id.clone()))
            .collect();
        regions.sort_unstable();
        regions.dedup();
        regions
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_lookup_prefers_the_first_type_and_honours_the_region() {
        let catalog: Catalog = serde_json::from_value(json!([
            {"type": "block-storage", "endpoints": [{"interface": "public", "region_id": "R1", "url": "http://bs/v3/p"}]},
            {"type": "volumev3", "endpoints": [
                {"interface": "internal", "region_id": "R1", "url": "http://internal"},
                {"interface": "public", "region_id": "R2", "url": "http://r2/v3/p"},
                {"interface": "public", "region_id": "R1", "url": "http://r1/v3/p/"}]},
        ]))
        .unwrap_or_default();
        assert_eq!(
            catalog.endpoint(&["volumev3", "block-storage"], "public", Some("R1")),
            Some("http://r1/v3/p".to_string())
        );
        assert_eq!(catalog.endpoint(&["compute"], "public", None), None);
        assert_eq!(catalog.regions_of(&["volumev3"]), vec!["R1", "R2"]);
    }
}
