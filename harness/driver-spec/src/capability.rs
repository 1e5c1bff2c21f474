//! The driver capabilities of `DriverInfo.Capabilities`, spelt as upstream's `Cap*` constants
//! (`test/e2e/storage/framework/testdriver.go`), and upstream's one implied default:
//! `controllerExpansion: true` turns on `onlineExpansion` and `offlineExpansion` unless they
//! are given.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use super::reader::{Check, Field, unknown};

/// A capability a test driver declares; the suites skip tests whose capability is absent or
/// false.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Capability {
    /// `persistence`: data survives pod restarts.
    Persistence,
    /// `block`: raw block volumes.
    Block,
    /// `fsGroup`: volume ownership via the pod's fsGroup.
    FsGroup,
    /// `volumeMountGroup`: the CSI node capability VOLUME_MOUNT_GROUP (needs `fsGroup`).
    VolumeMountGroup,
    /// `exec`: files in the volume can be executed.
    Exec,
    /// `snapshotDataSource`: volumes can be provisioned from snapshots.
    SnapshotDataSource,
    /// `pvcDataSource`: volumes can be cloned from claims.
    PvcDataSource,
    /// `offlineSnapshotClone`: snapshots and clones only while the volume is not attached.
    OfflineSnapshotClone,
    /// `multipods`: several pods on one node can use a volume at once.
    MultiPods,
    /// `RWX`: ReadWriteMany on every volume mode the driver supports.
    Rwx,
    /// `RWXFilesystemOnly`: ReadWriteMany for filesystem volumes only.
    RwxFilesystemOnly,
    /// `RWXBlockOnly`: ReadWriteMany for block volumes only.
    RwxBlockOnly,
    /// `controllerExpansion`: ControllerExpandVolume.
    ControllerExpansion,
    /// `nodeExpansion`: NodeExpandVolume.
    NodeExpansion,
    /// `offlineExpansion`: expansion while no pod uses the volume.
    OfflineExpansion,
    /// `onlineExpansion`: expansion while a pod uses the volume.
    OnlineExpansion,
    /// `volumeLimits`: the node reports a volume limit.
    VolumeLimits,
    /// `singleNodeVolume`: volumes live on a single node (like hostpath).
    SingleNodeVolume,
    /// `topology`: the driver reports topology.
    Topology,
    /// `capacity`: the driver publishes storage capacity.
    Capacity,
    /// `FSResizeFromSourceNotSupported`: an anti-capability; restored or cloned volumes'
    /// filesystems are not resized.
    FsResizeFromSourceNotSupported,
    /// `readWriteOncePod`: the ReadWriteOncePod access mode.
    ReadWriteOncePod,
    /// `multiplePVsSameID`: two PVs with the same volume handle work.
    MultiplePvsSameId,
    /// `capReadOnlyMany`: the ReadOnlyMany access mode.
    ReadOnlyMany,
    /// `groupSnapshot`: volume group snapshots.
    GroupSnapshot,
}

impl Capability {
    /// Every capability, in upstream's order.
    pub const ALL: [Capability; 25] = [
        Capability::Persistence,
        Capability::Block,
        Capability::FsGroup,
        Capability::VolumeMountGroup,
        Capability::Exec,
        Capability::SnapshotDataSource,
        Capability::PvcDataSource,
        Capability::OfflineSnapshotClone,
        Capability::MultiPods,
        Capability::Rwx,
        Capability::RwxFilesystemOnly,
        Capability::RwxBlockOnly,
        Capability::ControllerExpansion,
        Capability::NodeExpansion,
        Capability::OfflineExpansion,
        Capability::OnlineExpansion,
        Capability::VolumeLimits,
        Capability::SingleNodeVolume,
        Capability::Topology,
        Capability::Capacity,
        Capability::FsResizeFromSourceNotSupported,
        Capability::ReadWriteOncePod,
        Capability::MultiplePvsSameId,
        Capability::ReadOnlyMany,
        Capability::GroupSnapshot,
    ];

    /// The name as the spec file writes it (upstream's spelling).
    pub fn as_str(self) -> &'static str {
        match self {
            Capability::Persistence => "persistence",
            Capability::Block => "block",
            Capability::FsGroup => "fsGroup",
            Capability::VolumeMountGroup => "volumeMountGroup",
            Capability::Exec => "exec",
            Capability::SnapshotDataSource => "snapshotDataSource",
            Capability::PvcDataSource => "pvcDataSource",
            Capability::OfflineSnapshotClone => "offlineSnapshotClone",
            Capability::MultiPods => "multipods",
            Capability::Rwx => "RWX",
            Capability::RwxFilesystemOnly => "RWXFilesystemOnly",
            Capability::RwxBlockOnly => "RWXBlockOnly",
            Capability::ControllerExpansion => "controllerExpansion",
            Capability::NodeExpansion => "nodeExpansion",
            Capability::OfflineExpansion => "offlineExpansion",
            Capability::OnlineExpansion => "onlineExpansion",
            Capability::VolumeLimits => "volumeLimits",
            Capability::SingleNodeVolume => "singleNodeVolume",
            Capability::Topology => "topology",
            Capability::Capacity => "capacity",
            Capability::FsResizeFromSourceNotSupported => "FSResizeFromSourceNotSupported",
            Capability::ReadWriteOncePod => "readWriteOncePod",
            Capability::MultiplePvsSameId => "multiplePVsSameID",
            Capability::ReadOnlyMany => "capReadOnlyMany",
            Capability::GroupSnapshot => "groupSnapshot",
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is no capability (upstream's spelling is case-sensitive).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown capability {0:?}")]
pub struct UnknownCapability(pub String);

impl FromStr for Capability {
    type Err = UnknownCapability;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Capability::ALL
            .into_iter()
            .find(|capability| capability.as_str() == name)
            .ok_or_else(|| UnknownCapability(name.to_owned()))
    }
}

/// The capabilities a driver declares, with their values (upstream's `map[Capability]bool`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Capabilities(BTreeMap<Capability, bool>);

impl Capabilities {
    /// Whether `capability` is declared true; false when absent, as upstream reads the map.
    pub fn has(&self, capability: Capability) -> bool {
        self.0.get(&capability).copied().unwrap_or(false)
    }

    /// The declared value of `capability`, `None` when the spec does not mention it.
    pub fn get(&self, capability: Capability) -> Option<bool> {
        self.0.get(&capability).copied()
    }

    /// Declares `capability` with `value` (e.g. for a driver instance the runner deploys
    /// in another configuration).
    pub fn set(&mut self, capability: Capability, value: bool) {
        self.0.insert(capability, value);
    }

    /// The declared capabilities with their values, in upstream's order.
    pub fn iter(&self) -> impl Iterator<Item = (Capability, bool)> + '_ {
        self.0
            .iter()
            .map(|(capability, value)| (*capability, *value))
    }

    /// Declared values as given, then upstream's implied defaults: `controllerExpansion: true`
    /// declares `onlineExpansion` and `offlineExpansion` true unless they are given.
    pub fn new(declared: impl IntoIterator<Item = (Capability, bool)>) -> Self {
        let mut map: BTreeMap<_, _> = declared.into_iter().collect();
        if map.get(&Capability::ControllerExpansion) == Some(&true) {
            map.entry(Capability::OnlineExpansion).or_insert(true);
            map.entry(Capability::OfflineExpansion).or_insert(true);
        }
        Capabilities(map)
    }

    /// Reads `DriverInfo.Capabilities`: capability names mapped to `true` or `false`.
    pub(super) fn read(field: &Field) -> Check<Self> {
        let names = Capability::ALL.map(Capability::as_str);
        let mut declared = Vec::new();
        for (name, value) in field.entries()? {
            let capability = name
                .parse::<Capability>()
                .map_err(|_| value.key_issue(unknown("capability", name, &names)))?;
            declared.push((capability, value.bool()?));
        }
        Ok(Capabilities::new(declared))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn names_round_trip() {
        for capability in Capability::ALL {
            assert_eq!(capability.as_str().parse::<Capability>(), Ok(capability));
            assert_eq!(capability.to_string(), capability.as_str());
        }
        assert_eq!(
            "Persistence".parse::<Capability>(),
            Err(UnknownCapability("Persistence".into()))
        );
    }

    #[test]
    fn controller_expansion_implies_online_and_offline_expansion() {
        let caps = Capabilities::new([(Capability::ControllerExpansion, true)]);
        assert!(caps.has(Capability::OnlineExpansion));
        assert!(caps.has(Capability::OfflineExpansion));
        assert!(!caps.has(Capability::NodeExpansion));
        assert_eq!(caps.get(Capability::NodeExpansion), None);
    }

    #[test]
    fn explicit_expansion_values_win() {
        let caps = Capabilities::new([
            (Capability::ControllerExpansion, true),
            (Capability::OfflineExpansion, false),
        ]);
        assert!(caps.has(Capability::OnlineExpansion));
        assert_eq!(caps.get(Capability::OfflineExpansion), Some(false));
        let off = Capabilities::new([(Capability::ControllerExpansion, false)]);
        assert_eq!(off.get(Capability::OnlineExpansion), None);
    }

    #[test]
    fn iteration_follows_upstreams_order() {
        let caps = Capabilities::new([(Capability::Rwx, true), (Capability::Persistence, false)]);
        let listed: Vec<_> = caps.iter().collect();
        assert_eq!(
            listed,
            [(Capability::Persistence, false), (Capability::Rwx, true)]
        );
    }
}
