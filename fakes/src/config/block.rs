//! The seed sections of the block-storage part of the cloud: Cinder (`cinder:`) and the Nova
//! servers volumes attach to (`nova:`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::limits::check_delay;
use crate::release::MaxMicroversion;

/// The Cinder service: presence, microversions, volume types, zones, delays, quotas.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CinderConfig {
    /// Whether Cinder (and Nova with it) is in the catalog and answers at all. Off by
    /// default, so that a Manila cloud stays what it was: a block-storage cloud opts in.
    pub present: bool,
    /// Highest microversion announced (the lowest is 3.0); unset, the release's
    /// ([`crate::OpenStackRelease::cinder_max`]).
    pub max_microversion: MaxMicroversion,
    /// Volume types, in listing order.
    pub volume_types: Vec<VolumeTypeSeed>,
    /// Name of the default volume type (used when a create names none).
    pub default_volume_type: Option<String>,
    /// Availability zone names; the first is where volumes land when none is asked for.
    pub availability_zones: Vec<String>,
    /// How long the asynchronous transitions take.
    pub delays: CinderDelays,
    /// Project quotas (413 when a create would exceed them).
    pub quotas: CinderQuotas,
}

impl Default for CinderConfig {
    fn default() -> Self {
        Self {
            present: false,
            max_microversion: MaxMicroversion::from_release(),
            volume_types: vec![
                VolumeTypeSeed::named("__DEFAULT__"),
                VolumeTypeSeed {
                    extra_specs: BTreeMap::from([("multiattach".into(), "<is> True".into())]),
                    ..VolumeTypeSeed::named("multiattach")
                },
            ],
            default_volume_type: Some("__DEFAULT__".into()),
            availability_zones: vec!["nova".into()],
            delays: CinderDelays::default(),
            quotas: CinderQuotas::default(),
        }
    }
}

/// A volume type to seed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VolumeTypeSeed {
    /// Type name (unique).
    pub name: String,
    /// Type id; generated when absent.
    pub id: Option<String>,
    /// Extra specs, verbatim (`multiattach: "<is> True"` makes multiattach volumes).
    pub extra_specs: BTreeMap<String, String>,
    /// Free-text description.
    pub description: Option<String>,
}

impl Default for VolumeTypeSeed {
    fn default() -> Self {
        Self::named("__DEFAULT__")
    }
}

impl VolumeTypeSeed {
    /// A type without extra specs.
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            id: None,
            extra_specs: BTreeMap::new(),
            description: None,
        }
    }
}

/// Durations of Cinder's asynchronous transitions, in milliseconds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CinderDelays {
    /// Volume `creating` → `available`.
    pub volume_create_ms: u64,
    /// Volume `deleting` → gone.
    pub volume_delete_ms: u64,
    /// Volume `extending` → `available`/`in-use`.
    pub volume_extend_ms: u64,
    /// Snapshot `creating` → `available`.
    pub snapshot_create_ms: u64,
    /// Snapshot `deleting` → gone.
    pub snapshot_delete_ms: u64,
    /// Volume `attaching` → `in-use` and `detaching` → `available`.
    pub attach_ms: u64,
}

impl Default for CinderDelays {
    fn default() -> Self {
        Self {
            volume_create_ms: 150,
            volume_delete_ms: 100,
            volume_extend_ms: 150,
            snapshot_create_ms: 150,
            snapshot_delete_ms: 100,
            attach_ms: 100,
        }
    }
}

impl CinderDelays {
    /// Every delay set to `ms`.
    pub fn uniform(ms: u64) -> Self {
        Self {
            volume_create_ms: ms,
            volume_delete_ms: ms,
            volume_extend_ms: ms,
            snapshot_create_ms: ms,
            snapshot_delete_ms: ms,
            attach_ms: ms,
        }
    }

    /// No delay: every transition is done by the next read.
    pub fn none() -> Self {
        Self::uniform(0)
    }

    /// Checks every delay against [`super::MAX_DELAY_MS`].
    pub fn validate(&self) -> std::result::Result<(), String> {
        for (field, ms) in [
            ("volume_create_ms", self.volume_create_ms),
            ("volume_delete_ms", self.volume_delete_ms),
            ("volume_extend_ms", self.volume_extend_ms),
            ("snapshot_create_ms", self.snapshot_create_ms),
            ("snapshot_delete_ms", self.snapshot_delete_ms),
            ("attach_ms", self.attach_ms),
        ] {
            check_delay(field, ms)?;
        }
        Ok(())
    }
}

/// Cinder's project quotas.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CinderQuotas {
    /// Number of volumes.
    pub volumes: u64,
    /// Total GiB of volumes and snapshots.
    pub gigabytes: u64,
    /// Number of snapshots.
    pub snapshots: u64,
}

impl Default for CinderQuotas {
    fn default() -> Self {
        Self {
            volumes: 10_000,
            gigabytes: 1_000_000,
            snapshots: 10_000,
        }
    }
}

/// The Nova servers of the cloud (one per node the driver runs on).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NovaConfig {
    /// Servers that exist from the start.
    pub servers: Vec<ServerSeed>,
    /// Compute availability zones besides the servers' own (zones whose hosts run none of
    /// the cloud's servers). `GET /os-availability-zone` lists these and the zone of every
    /// server, sorted and without duplicates; `nova` (Nova's default zone) when both are
    /// empty.
    pub availability_zones: Vec<String>,
    /// Highest compute microversion announced (the lowest is 2.1); unset, the release's
    /// ([`crate::OpenStackRelease::nova_max`]).
    pub max_microversion: MaxMicroversion,
}

/// A server to seed: its name is also the node name of its metadata document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSeed {
    /// Server (and node) name.
    pub name: String,
    /// Compute availability zone.
    pub availability_zone: String,
    /// Server id; generated when absent.
    #[serde(default)]
    pub id: Option<String>,
    /// Where attached volumes appear as `virtio-<id[..20]>` links (the node's
    /// `/dev/disk/by-id`); default `<backend root>/servers/<name>/by-id`.
    #[serde(default)]
    pub disk_dir: Option<PathBuf>,
}

/// Checks the block-storage seed sections.
pub(crate) fn validate(cinder: &CinderConfig, nova: &NovaConfig) -> Result<(), String> {
    let mut names = std::collections::BTreeSet::new();
    for t in &cinder.volume_types {
        if t.name.is_empty() || !names.insert(t.name.as_str()) {
            return Err(format!(
                "cinder.volume_types: empty or duplicate type name {:?}",
                t.name
            ));
        }
    }
    if let Some(default) = &cinder.default_volume_type
        && !names.contains(default.as_str())
    {
        return Err(format!(
            "cinder.default_volume_type {default:?} is not among cinder.volume_types"
        ));
    }
    if cinder.availability_zones.is_empty() {
        return Err("cinder.availability_zones must not be empty".into());
    }
    cinder
        .max_microversion
        .validate("cinder.max_microversion", 3)?;
    nova.max_microversion.validate("nova.max_microversion", 2)?;
    cinder
        .delays
        .validate()
        .map_err(|e| format!("cinder.delays.{e}"))?;
    if nova.availability_zones.iter().any(String::is_empty) {
        return Err("nova.availability_zones: a zone name must not be empty".into());
    }
    let mut servers = std::collections::BTreeSet::new();
    for s in &nova.servers {
        if s.name.is_empty() || s.availability_zone.is_empty() || !servers.insert(&s.name) {
            return Err(format!(
                "nova.servers: a server needs a unique name and a zone ({:?})",
                s.name
            ));
        }
    }
    Ok(())
}
