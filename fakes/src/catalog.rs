//! The service catalog: where each API is mounted on the fake's one port, the URLs clients
//! are given, and the catalog a scoped token carries. Keystone serves the catalog and the
//! other services are listed in it; all depend on this module (and the services on Keystone,
//! for token validation), so that no service module needs another to describe the cloud.

use serde_json::{Value, json};

use crate::config::{CloudConfig, INTERFACES};

/// Where Keystone is mounted.
pub const KEYSTONE_PREFIX: &str = "/identity";
/// Where Manila is mounted.
pub const MANILA_PREFIX: &str = "/share";
/// Where Cinder is mounted.
pub const CINDER_PREFIX: &str = "/volume";
/// Where Nova is mounted.
pub const NOVA_PREFIX: &str = "/compute";

/// Keystone's URL as clients are given it (`…/identity/v3`).
pub(crate) fn auth_url(base_url: &str) -> String {
    format!("{base_url}{KEYSTONE_PREFIX}/v3")
}

/// Manila's catalog URL (`…/share/v2`).
pub(crate) fn manila_url(base_url: &str) -> String {
    format!("{base_url}{MANILA_PREFIX}/v2")
}

/// Cinder's catalog URL (`…/volume/v3/<project_id>`).
pub(crate) fn cinder_url(base_url: &str, project_id: &str) -> String {
    format!("{base_url}{CINDER_PREFIX}/v3/{project_id}")
}

/// Nova's catalog URL (`…/compute/v2.1`).
pub(crate) fn nova_url(base_url: &str) -> String {
    format!("{base_url}{NOVA_PREFIX}/v2.1")
}

/// The catalog: Keystone, and Manila (under `shared-file-system` and `sharev2`) when present;
/// each with a `public`, `internal` and `admin` endpoint in every region (the seed's
/// `region` first, then `catalog.extra_regions`), Manila's URLs replaced where the seed's
/// `catalog.manila_endpoints` says so.
pub(crate) fn catalog(config: &CloudConfig, base_url: &str) -> Value {
    let base = base_url;
    let keystone = format!("{base}{KEYSTONE_PREFIX}");
    let mut services = vec![json!({
        "type": "identity", "name": "keystone", "id": "5e1b2d4c6a8f4e0b9d7c3a1f2e4b6d8a",
        "endpoints": endpoints(config, "identity", &|_, _| keystone.clone()),
    })];
    if config.manila.present {
        let url = manila_url(base);
        let manila = |region: &str, interface: &str| {
            config
                .catalog
                .manila_endpoints
                .iter()
                .find(|e| e.region == region && e.interface == interface)
                .map_or_else(|| url.clone(), |e| e.url.clone())
        };
        for (kind, id) in [
            ("shared-file-system", "8c2d4e6f0a1b4c3d9e8f7a6b5c4d3e2f"),
            ("sharev2", "1a2b3c4d5e6f4a7b8c9d0e1f2a3b4c5d"),
        ] {
            services.push(json!({
                "type": kind, "name": "manilav2", "id": id,
                "endpoints": endpoints(config, kind, &manila),
            }));
        }
    }
    if config.cinder.present {
        let url = cinder_url(base, &config.account.project_id);
        for (kind, id) in [
            ("block-storage", "3c4d5e6f7a8b4c9d0e1f2a3b4c5d6e7f"),
            ("volumev3", "4d5e6f7a8b9c4d0e1f2a3b4c5d6e7f80"),
        ] {
            services.push(json!({
                "type": kind, "name": "cinderv3", "id": id,
                "endpoints": endpoints(config, kind, &|_, _| url.clone()),
            }));
        }
        let nova = nova_url(base);
        services.push(json!({
            "type": "compute", "name": "nova", "id": "5e6f7a8b9c0d4e1f2a3b4c5d6e7f8091",
            "endpoints": endpoints(config, "compute", &|_, _| nova.clone()),
        }));
    }
    Value::Array(services)
}

fn endpoints(config: &CloudConfig, service: &str, url: &dyn Fn(&str, &str) -> String) -> Value {
    let regions = config.regions();
    let first = regions.first().copied().unwrap_or_default();
    regions
        .iter()
        .flat_map(|region| {
            INTERFACES
                .iter()
                .map(move |interface| (*region, *interface))
        })
        .map(|(region, interface)| {
            // The first region's ids stay what they were before regions were added.
            let name = if region == first {
                format!("{service}/{interface}")
            } else {
                format!("{service}/{region}/{interface}")
            };
            json!({
                "id": stable_id(&name),
                "interface": interface,
                "region": region,
                "region_id": region,
                "url": url(region, interface),
            })
        })
        .collect()
}

/// A 32-hex-digit id derived from a name (FNV-1a, 128 bit), so that endpoint (and role) ids
/// are the same in every token.
pub(crate) fn stable_id(name: &str) -> String {
    let hash = name
        .bytes()
        .fold(0x6c62_272e_07bb_0142_62b8_2175_6295_c58du128, |h, b| {
            (h ^ u128::from(b)).wrapping_mul(0x0000_0000_0100_0000_0000_0000_0000_013b)
        });
    format!("{hash:032x}")
}
