//! The seed of a fake cloud: account, catalog shape, share types, zones, delays and limits.
//!
//! Seeds are plain serde structs, readable from YAML (see `fixtures/fake-cloud/`). Every
//! field has a default, so `CloudConfig::default()` is a working cloud with one user, one
//! project, Manila present and a `default` share type.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The highest Manila microversion the fake announces unless the seed says otherwise
/// (Manila 2024.2 "Dalmatian"; python-manilaclient 6.3 speaks up to 2.98 and negotiates down).
pub const DEFAULT_MAX_MICROVERSION: &str = "2.84";

/// The longest transition delay or injected latency, in milliseconds (one day). Longer
/// values are refused (400 on the control API, an error in seeds): use a `stuck` fault for
/// a transition that never ends.
pub const MAX_DELAY_MS: u64 = 24 * 60 * 60 * 1000;

/// The longest token lifetime, in seconds (ten years).
pub const MAX_TOKEN_LIFETIME_SECS: u64 = 10 * 365 * 24 * 60 * 60;

/// The largest share size in GiB: Manila keeps sizes in a 32-bit integer column.
pub const MAX_SHARE_SIZE_GIB: u64 = i32::MAX as u64;

/// Checks a token lifetime: 1 to [`MAX_TOKEN_LIFETIME_SECS`] seconds; the error names
/// `field`.
pub(crate) fn check_token_lifetime(field: &str, seconds: u64) -> std::result::Result<(), String> {
    if (1..=MAX_TOKEN_LIFETIME_SECS).contains(&seconds) {
        Ok(())
    } else {
        Err(format!(
            "{field} {seconds} is out of range: a token lifetime is 1 to {MAX_TOKEN_LIFETIME_SECS} seconds"
        ))
    }
}

/// Checks a delay in milliseconds: at most [`MAX_DELAY_MS`]; the error names `field`.
pub(crate) fn check_delay(field: &str, ms: u64) -> std::result::Result<(), String> {
    if ms <= MAX_DELAY_MS {
        Ok(())
    } else {
        Err(format!(
            "{field} {ms} is out of range: delays are at most {MAX_DELAY_MS} ms (one day); use a stuck fault for a transition that never ends"
        ))
    }
}

pub use crate::cinder::seed::{
    CinderConfig, CinderDelays, CinderQuotas, NovaConfig, ServerSeed, VolumeTypeSeed,
};

/// A string that never prints: passwords and application-credential secrets.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    /// The secret value, for the few places that must compare or hand it out.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// The whole seed of a fake cloud.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CloudConfig {
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

/// The catalog beyond [`CloudConfig::region`]: more regions, and Manila endpoints that point
/// elsewhere (e.g. an unreachable URL, to prove a client picked another region or interface).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CatalogSeed {
    /// Regions listed after [`CloudConfig::region`]; every service has the three interfaces
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

impl CloudConfig {
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

/// The account: a user in a domain, a project, roles and an application credential.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Account {
    /// Domain ID of the user and the project.
    pub domain_id: String,
    /// Domain name of the user and the project.
    pub domain_name: String,
    /// User ID.
    pub user_id: String,
    /// User name.
    pub user_name: String,
    /// The user's password.
    pub password: Secret,
    /// Project ID.
    pub project_id: String,
    /// Project name.
    pub project_name: String,
    /// Role names in the user's tokens; `admin` among them makes the user a Manila admin
    /// (admin-only calls and fields). By default a member, as a cloud's users are: use
    /// [`admin`](Self::admin) for what only an administrator may do.
    pub roles: Vec<String>,
    /// An application credential of the user, scoped to the project.
    pub application_credential: Option<ApplicationCredential>,
    /// A second user, in the same domain, to whom the user delegated its roles on the
    /// project through a trust: it gets trust-scoped tokens (`OS-TRUST:trust`).
    pub trustee: Option<Trustee>,
    /// The cloud's administrator: another user in the same domain with the `admin` role on
    /// the project (password auth only), for what a cloud operator does (reset-state,
    /// force-delete, extra specs, admin export locations).
    pub admin: Option<AdminUser>,
}

/// The cloud administrator's user (see [`Account::admin`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdminUser {
    /// User ID.
    pub user_id: String,
    /// User name.
    pub user_name: String,
    /// Password.
    pub password: Secret,
}

impl Default for AdminUser {
    fn default() -> Self {
        Self {
            user_id: "a1d2m3i4n5e6f7a8b9c0d1e2f3a4b5c6".into(),
            user_name: "admin".into(),
            password: Secret::new("fake-admin-password"),
        }
    }
}

/// The roles of [`Account::admin`]'s tokens.
pub const ADMIN_ROLES: [&str; 3] = ["admin", "member", "reader"];

/// The trustee of a trust the account's user made on its project.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Trustee {
    /// The trust's ID (what `os-trustID` names).
    pub trust_id: String,
    /// The trustee user's ID.
    pub user_id: String,
    /// The trustee user's name.
    pub user_name: String,
    /// The trustee user's password.
    pub password: Secret,
}

impl Default for Trustee {
    fn default() -> Self {
        Self {
            trust_id: "7d6c5b4a39284f1e8d7c6b5a49382716".into(),
            user_id: "2b3c4d5e6f708192a3b4c5d6e7f80912".into(),
            user_name: "csi-trustee".into(),
            password: Secret::new("fake-trustee-password"),
        }
    }
}

impl Default for Account {
    fn default() -> Self {
        Self {
            domain_id: "default".into(),
            domain_name: "Default".into(),
            user_id: "4f1b2c3d5e6f47a8b9c0d1e2f3a4b5c6".into(),
            user_name: "demo".into(),
            password: Secret::new("fake-password"),
            project_id: "9a8b7c6d5e4f43a2b1c0d9e8f7a6b5c4".into(),
            project_name: "demo".into(),
            roles: vec!["member".into(), "reader".into()],
            application_credential: Some(ApplicationCredential::default()),
            trustee: Some(Trustee::default()),
            admin: Some(AdminUser::default()),
        }
    }
}

impl Account {
    /// Whether the roles make the user an administrator.
    pub fn is_admin(&self) -> bool {
        self.roles.iter().any(|r| r == "admin")
    }

    /// The same project as the administrator (password auth as [`Account::admin`], the
    /// `admin` role), for a client that does what only a cloud operator may; `None` when
    /// the seed has no administrator.
    pub fn as_admin(&self) -> Option<Account> {
        let admin = self.admin.as_ref()?;
        Some(Account {
            user_id: admin.user_id.clone(),
            user_name: admin.user_name.clone(),
            password: admin.password.clone(),
            roles: ADMIN_ROLES.iter().map(|r| r.to_string()).collect(),
            application_credential: None,
            trustee: None,
            admin: None,
            ..self.clone()
        })
    }
}

/// An application credential (id + secret, or name + user + secret).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApplicationCredential {
    /// Credential ID.
    pub id: String,
    /// Credential name (unique per user).
    pub name: String,
    /// Credential secret.
    pub secret: Secret,
}

impl Default for ApplicationCredential {
    fn default() -> Self {
        Self {
            id: "0e1d2c3b4a5948e7a6b5c4d3e2f1a0b9".into(),
            name: "csi".into(),
            secret: Secret::new("fake-app-cred-secret"),
        }
    }
}

/// The Manila service: presence, share types, zones, export addresses, delays, quotas.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ManilaConfig {
    /// Whether Manila is in the catalog and answers at all (false: a Manila-less cloud).
    pub present: bool,
    /// Whether `GET /types` answers 403 (Manila present but share types not listable).
    pub types_forbidden: bool,
    /// Highest microversion announced (the lowest is always 2.0).
    pub max_microversion: String,
    /// Share types, in listing order.
    pub share_types: Vec<ShareTypeSeed>,
    /// Name of the default share type (`GET /types/default`); none if absent.
    pub default_share_type: Option<String>,
    /// Availability zone names; the first is where shares land when none is asked for.
    pub availability_zones: Vec<String>,
    /// Share networks that exist from the start (names).
    pub share_networks: Vec<String>,
    /// The export locations every share gets, one per entry.
    pub export_locations: Vec<ExportAddress>,
    /// How long the asynchronous transitions take.
    pub delays: Delays,
    /// Project quotas.
    pub quotas: Quotas,
    /// The CephFS file system behind CEPHFS shares, when not the cluster's default: as
    /// Manila's CephFS driver does (`cephfs_filesystem_name`), every CEPHFS share then gets
    /// the metadata `__mount_options: fs=<name>`. None: no such metadata.
    pub cephfs_filesystem_name: Option<String>,
    /// Share group types (`GET /share-group-types`, microversion 2.31); none by default.
    pub share_group_types: Vec<ShareGroupTypeSeed>,
    /// Share groups that exist from the start. The fake also keeps the groups created
    /// through the API here, so that a reset goes back to the seeded ones.
    pub share_groups: Vec<ShareGroupSeed>,
}

/// A share group type to seed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShareGroupTypeSeed {
    /// Name (unique).
    pub name: String,
    /// Id; generated when absent.
    pub id: Option<String>,
    /// The share types (names or ids) a group of this type may hold.
    pub share_types: Vec<String>,
    /// Whether a group created without `share_group_type_id` gets this type (Manila's
    /// `default_share_group_type`).
    pub is_default: bool,
}

/// A share group to seed (or one created through the API).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShareGroupSeed {
    /// Id; generated when absent.
    pub id: Option<String>,
    /// Name.
    pub name: Option<String>,
    /// Description.
    pub description: Option<String>,
    /// The share group type (name or id).
    pub share_group_type: String,
    /// The share types (names or ids) of its shares; empty: the group type's.
    pub share_types: Vec<String>,
    /// `available` (default), `creating`, `error`, …
    pub status: String,
    /// The zone all its shares land in; none: any.
    pub availability_zone: Option<String>,
    /// The share network all its shares use; none: none.
    pub share_network_id: Option<String>,
    /// Creation time (RFC 3339); none: when first listed.
    pub created_at: Option<String>,
}

impl Default for ShareGroupSeed {
    fn default() -> Self {
        Self {
            id: None,
            name: None,
            description: None,
            share_group_type: String::new(),
            share_types: Vec::new(),
            status: "available".into(),
            availability_zone: None,
            share_network_id: None,
            created_at: None,
        }
    }
}

impl Default for ManilaConfig {
    fn default() -> Self {
        Self {
            present: true,
            types_forbidden: false,
            max_microversion: DEFAULT_MAX_MICROVERSION.into(),
            share_types: vec![ShareTypeSeed::named("default")],
            default_share_type: Some("default".into()),
            availability_zones: vec!["nova".into()],
            share_networks: Vec::new(),
            export_locations: vec![
                ExportAddress {
                    address: IpAddr::from([127, 0, 0, 1]),
                    preferred: true,
                    admin_only: false,
                },
                ExportAddress {
                    address: IpAddr::from([127, 0, 0, 2]),
                    preferred: false,
                    admin_only: true,
                },
            ],
            delays: Delays::default(),
            quotas: Quotas::default(),
            cephfs_filesystem_name: None,
            share_group_types: Vec::new(),
            share_groups: Vec::new(),
        }
    }
}

/// A share type to seed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShareTypeSeed {
    /// Type name (unique).
    pub name: String,
    /// Type ID; generated when absent.
    pub id: Option<String>,
    /// The required extra spec `driver_handles_share_servers`.
    pub driver_handles_share_servers: bool,
    /// Extra spec `snapshot_support`.
    pub snapshot_support: bool,
    /// Extra spec `create_share_from_snapshot_support`.
    pub create_share_from_snapshot_support: bool,
    /// Further extra specs, verbatim.
    pub extra_specs: BTreeMap<String, String>,
    /// Free-text description.
    pub description: Option<String>,
}

impl Default for ShareTypeSeed {
    fn default() -> Self {
        Self::named("default")
    }
}

impl ShareTypeSeed {
    /// A DHSS=false type with snapshots and restore-from-snapshot enabled.
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            id: None,
            driver_handles_share_servers: false,
            snapshot_support: true,
            create_share_from_snapshot_support: true,
            extra_specs: BTreeMap::new(),
            description: None,
        }
    }
}

/// One export location every share gets: `<address>:<share directory>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportAddress {
    /// A loopback address (127.0.0.0/8 or ::1).
    pub address: IpAddr,
    /// Marked `preferred`.
    #[serde(default)]
    pub preferred: bool,
    /// Marked `is_admin_only` (hidden from non-admin users).
    #[serde(default)]
    pub admin_only: bool,
}

/// Durations of the asynchronous transitions, in milliseconds. Zero means the creating call
/// answers the transitional state and the next read sees the final one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Delays {
    /// `creating`/`creating_from_snapshot` → `available`.
    pub share_create_ms: u64,
    /// `deleting` → gone.
    pub share_delete_ms: u64,
    /// `extending`/`shrinking` → `available`.
    pub share_resize_ms: u64,
    /// Snapshot `creating` → `available`.
    pub snapshot_create_ms: u64,
    /// Snapshot `deleting` → gone.
    pub snapshot_delete_ms: u64,
    /// Access rule `queued_to_apply` → `active` and `queued_to_deny` → gone.
    pub access_ms: u64,
}

/// Small but not zero, as on a real cloud, where nothing is `available` the moment it is
/// asked for: a client that does not wait for the status it needs fails here too.
impl Default for Delays {
    fn default() -> Self {
        Self {
            share_create_ms: 150,
            share_delete_ms: 100,
            share_resize_ms: 150,
            snapshot_create_ms: 150,
            snapshot_delete_ms: 100,
            access_ms: 100,
        }
    }
}

impl Delays {
    /// Checks every delay is at most [`MAX_DELAY_MS`]; the error names the field.
    pub fn validate(&self) -> std::result::Result<(), String> {
        for (field, ms) in [
            ("share_create_ms", self.share_create_ms),
            ("share_delete_ms", self.share_delete_ms),
            ("share_resize_ms", self.share_resize_ms),
            ("snapshot_create_ms", self.snapshot_create_ms),
            ("snapshot_delete_ms", self.snapshot_delete_ms),
            ("access_ms", self.access_ms),
        ] {
            check_delay(field, ms)?;
        }
        Ok(())
    }

    /// No delay: every transition is done by the next read (for tests that want the
    /// final state at once).
    pub fn none() -> Self {
        Self::uniform(0)
    }

    /// Every delay set to `ms`.
    pub fn uniform(ms: u64) -> Self {
        Self {
            share_create_ms: ms,
            share_delete_ms: ms,
            share_resize_ms: ms,
            snapshot_create_ms: ms,
            snapshot_delete_ms: ms,
            access_ms: ms,
        }
    }
}

/// Converts a delay in milliseconds.
pub(crate) fn millis(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

/// `now` plus a delay of `ms`, or `None` when that is beyond what an `Instant` can hold
/// (delays set in process are not range-checked: such a transition never comes).
pub(crate) fn due_after(now: std::time::Instant, ms: u64) -> Option<std::time::Instant> {
    now.checked_add(millis(ms))
}

/// Project quotas enforced on create and extend (413 when exceeded, as Manila does).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Quotas {
    /// Number of shares.
    pub shares: u64,
    /// Total GiB of shares.
    pub gigabytes: u64,
    /// Number of snapshots.
    pub snapshots: u64,
    /// Total GiB of snapshots.
    pub snapshot_gigabytes: u64,
    /// Number of share networks.
    pub share_networks: u64,
}

impl Default for Quotas {
    fn default() -> Self {
        Self {
            shares: 10_000,
            gigabytes: 1_000_000,
            snapshots: 10_000,
            snapshot_gigabytes: 1_000_000,
            share_networks: 100,
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
        let m = &self.manila;
        let mut names = std::collections::BTreeSet::new();
        for t in &m.share_types {
            if t.name.is_empty() {
                return Err(Error::InvalidSeed(
                    "manila.share_types: a type has an empty name".into(),
                ));
            }
            if !names.insert(t.name.as_str()) {
                return Err(Error::InvalidSeed(format!(
                    "manila.share_types: duplicate type name {:?}",
                    t.name
                )));
            }
        }
        if let Some(default) = &m.default_share_type
            && !names.contains(default.as_str())
        {
            return Err(Error::InvalidSeed(format!(
                "manila.default_share_type {default:?} is not among manila.share_types"
            )));
        }
        if m.availability_zones.is_empty() {
            return Err(Error::InvalidSeed(
                "manila.availability_zones must not be empty".into(),
            ));
        }
        for e in &m.export_locations {
            if !e.address.is_loopback() {
                return Err(Error::InvalidSeed(format!(
                    "manila.export_locations: {} is not a loopback address (use 127.0.0.x or ::1)",
                    e.address
                )));
            }
        }
        let max = crate::manila::microversion::Microversion::parse(&m.max_microversion)
            .ok_or_else(|| {
                Error::InvalidSeed(format!(
                    "manila.max_microversion {:?} is not of the form 2.N",
                    m.max_microversion
                ))
            })?;
        if max.major != 2 {
            return Err(Error::InvalidSeed(format!(
                "manila.max_microversion {:?} must be 2.N",
                m.max_microversion
            )));
        }
        check_token_lifetime("token_lifetime_secs", self.token_lifetime_secs)
            .map_err(Error::InvalidSeed)?;
        self.validate_catalog()?;
        m.delays
            .validate()
            .map_err(|e| Error::InvalidSeed(format!("manila.delays.{e}")))?;
        crate::cinder::validate_seed(&self.cinder, &self.nova).map_err(Error::InvalidSeed)?;
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
}
