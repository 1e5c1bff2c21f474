//! The Manila section of the seed (`manila:`): presence, share types, zones, share networks
//! and groups, export addresses, delays and quotas.

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::limits::check_delay;
use crate::error::{Error, Result};
use crate::release::MaxMicroversion;

/// The Manila service: presence, share types, zones, export addresses, delays, quotas.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ManilaConfig {
    /// Whether Manila is in the catalog and answers at all (false: a Manila-less cloud).
    pub present: bool,
    /// Whether `GET /types` answers 403 (Manila present but share types not listable).
    pub types_forbidden: bool,
    /// Highest microversion announced (the lowest is always 2.0); unset, the release's
    /// ([`crate::OpenStackRelease::manila_max`]).
    pub max_microversion: MaxMicroversion,
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
    /// Share groups that exist from the start; those created through the API are kept
    /// beside them in the cloud's state until a reset, which goes back to these.
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
            max_microversion: MaxMicroversion::from_release(),
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
    /// Checks every delay is at most [`super::MAX_DELAY_MS`]; the error names the field.
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

impl ManilaConfig {
    /// Checks what serde cannot of the share types, zones, export addresses and maximum
    /// microversion: unique type names, a default type that exists, at least one zone,
    /// loopback export addresses, a maximum of the form 2.N.
    pub(crate) fn validate_types_and_exports(&self) -> Result<()> {
        let mut names = std::collections::BTreeSet::new();
        for t in &self.share_types {
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
        if let Some(default) = &self.default_share_type
            && !names.contains(default.as_str())
        {
            return Err(Error::InvalidSeed(format!(
                "manila.default_share_type {default:?} is not among manila.share_types"
            )));
        }
        if self.availability_zones.is_empty() {
            return Err(Error::InvalidSeed(
                "manila.availability_zones must not be empty".into(),
            ));
        }
        for e in &self.export_locations {
            if !e.address.is_loopback() {
                return Err(Error::InvalidSeed(format!(
                    "manila.export_locations: {} is not a loopback address (use 127.0.0.x or ::1)",
                    e.address
                )));
            }
        }
        self.max_microversion
            .validate("manila.max_microversion", 2)
            .map_err(Error::InvalidSeed)
    }
}
