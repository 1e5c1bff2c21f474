//! The volume manager's record of this node's CSI volumes (in the spirit of
//! csi-driver-host-path's `pkg/state`): which pods want which volume, and what is staged
//! and published.
//!
//! # Contract
//!
//! - **Wanted**: per unique volume name, the pods whose mount of the volume has started
//!   ([`VolumeState::want`], before any node call) and whose volumes have not been unmounted
//!   yet ([`VolumeState::release_pod`]). A wanted volume is never unstaged.
//! - **Mounted**: per unique volume name, what is done on the node: whether it is staged
//!   ([`VolumeState::mark_staged`]) and, per pod, the target it is published at
//!   ([`VolumeState::mark_published`]). A record exists while the volume is staged or
//!   published for a pod: unpublishing the last pod of an unstaged volume
//!   ([`VolumeState::mark_unpublished`]) or unstaging ([`VolumeState::mark_unstaged`])
//!   removes it.
//! - **In use**: the union of both sets of names, which is the Node's
//!   `status.volumesInUse`; every transition that changes it notifies the receivers of
//!   [`VolumeState::subscribe`].
//! - Transitions record what already happened (the node call succeeded, the files were
//!   found); they never fail and never call out. The manager holds a volume's lock around a
//!   node call and the transition that records it, so one volume's record changes in the
//!   order its operations ran.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use tokio::sync::watch;

use super::paths::unique_volume_name;

/// Which volume: its driver, handle and PV.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct VolumeIdentity {
    /// The driver name.
    pub driver: String,
    /// The volume handle (CSI volume id).
    pub handle: String,
    /// The PV name (kubelet's spec name in paths).
    pub pv: String,
    /// Whether it is a block volume (`volumeMode: Block`, kubelet's `volumeDevices` paths).
    pub block: bool,
}

impl VolumeIdentity {
    /// `kubernetes.io/csi/<driver>^<handle>`.
    pub fn unique_name(&self) -> String {
        unique_volume_name(&self.driver, &self.handle)
    }
}

/// A volume staged and/or published on this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct MountedVolume {
    /// Which volume.
    pub volume: VolumeIdentity,
    /// Whether it is staged (at its staging path).
    pub staged: bool,
    /// Pod UID → kubelet's publish path.
    pub pods: BTreeMap<String, PathBuf>,
}

#[derive(Debug, Default)]
struct Records {
    wanted: BTreeMap<String, BTreeSet<String>>,
    mounted: BTreeMap<String, MountedVolume>,
}

impl Records {
    fn in_use(&self) -> BTreeSet<String> {
        self.wanted
            .keys()
            .chain(self.mounted.keys())
            .cloned()
            .collect()
    }

    fn mounted_entry(&mut self, volume: &VolumeIdentity) -> &mut MountedVolume {
        self.mounted
            .entry(volume.unique_name())
            .or_insert_with(|| MountedVolume {
                volume: volume.clone(),
                staged: false,
                pods: BTreeMap::new(),
            })
    }
}

/// The record (see the module docs for its contract).
#[derive(Debug)]
pub(super) struct VolumeState {
    records: Mutex<Records>,
    in_use: watch::Sender<BTreeSet<String>>,
}

impl Default for VolumeState {
    fn default() -> Self {
        VolumeState {
            records: Mutex::default(),
            in_use: watch::Sender::new(BTreeSet::new()),
        }
    }
}

impl VolumeState {
    // Transitions.

    /// Pod `pod` started mounting volume `unique`.
    pub fn want(&self, unique: &str, pod: &str) {
        self.change(|records| {
            records
                .wanted
                .entry(unique.to_string())
                .or_default()
                .insert(pod.to_string());
        });
    }

    /// The volume is staged (NodeStageVolume succeeded, or its staging `vol_data.json` was
    /// found at start).
    pub fn mark_staged(&self, volume: &VolumeIdentity) {
        self.change(|records| records.mounted_entry(volume).staged = true);
    }

    /// The volume is published for `pod` at kubelet's path `target` (NodePublishVolume
    /// succeeded, or a mounted target was found at start).
    pub fn mark_published(&self, volume: &VolumeIdentity, pod: &str, target: PathBuf) {
        self.change(|records| {
            records
                .mounted_entry(volume)
                .pods
                .insert(pod.to_string(), target);
        });
    }

    /// The volume is no longer published for `pod`; its record goes when it was the last
    /// pod and the volume is not staged.
    pub fn mark_unpublished(&self, unique: &str, pod: &str) {
        self.change(|records| {
            if let Some(mounted) = records.mounted.get_mut(unique) {
                mounted.pods.remove(pod);
                if mounted.pods.is_empty() && !mounted.staged {
                    records.mounted.remove(unique);
                }
            }
        });
    }

    /// The volume, published for no pod, is no longer staged (NodeUnstageVolume succeeded,
    /// or it never was): its record goes.
    pub fn mark_unstaged(&self, unique: &str) {
        self.change(|records| {
            records.mounted.remove(unique);
        });
    }

    /// Pod `pod`'s volumes are unmounted: it wants none any more.
    pub fn release_pod(&self, pod: &str) {
        self.change(|records| {
            for pods in records.wanted.values_mut() {
                pods.remove(pod);
            }
            records.wanted.retain(|_, pods| !pods.is_empty());
        });
    }

    // Queries.

    /// Whether volume `unique` is published for `pod`.
    pub fn is_published(&self, unique: &str, pod: &str) -> bool {
        self.records()
            .mounted
            .get(unique)
            .is_some_and(|m| m.pods.contains_key(pod))
    }

    /// Whether volume `unique` has a record: staged or published for a pod.
    pub fn is_mounted(&self, unique: &str) -> bool {
        self.records().mounted.contains_key(unique)
    }

    /// Whether volume `unique` is staged.
    pub fn is_staged(&self, unique: &str) -> bool {
        self.records().mounted.get(unique).is_some_and(|m| m.staged)
    }

    /// The volumes published for at least one pod: (unique name, record).
    pub fn published(&self) -> Vec<(String, MountedVolume)> {
        self.records()
            .mounted
            .iter()
            .filter(|(_, m)| !m.pods.is_empty())
            .map(|(unique, m)| (unique.clone(), m.clone()))
            .collect()
    }

    /// The mounted volumes no pod uses or wants: candidates for unstaging.
    pub fn unused(&self) -> Vec<String> {
        let records = self.records();
        records
            .mounted
            .iter()
            .filter(|(unique, m)| m.pods.is_empty() && !records.wanted.contains_key(*unique))
            .map(|(unique, _)| unique.clone())
            .collect()
    }

    /// Volume `unique`'s record, if it is (still) mounted and unused.
    pub fn unused_volume(&self, unique: &str) -> Option<MountedVolume> {
        let records = self.records();
        records
            .mounted
            .get(unique)
            .filter(|m| m.pods.is_empty() && !records.wanted.contains_key(unique))
            .cloned()
    }

    /// One target volume `unique` is published at (kubelet's path), if any.
    pub fn publish_target(&self, unique: &str) -> Option<PathBuf> {
        self.records()
            .mounted
            .get(unique)
            .and_then(|m| m.pods.values().next().cloned())
    }

    /// The unique names of the volumes in use, sorted.
    pub fn in_use(&self) -> Vec<String> {
        self.in_use.borrow().iter().cloned().collect()
    }

    /// The volumes in use, now and after each change.
    pub fn subscribe(&self) -> watch::Receiver<BTreeSet<String>> {
        self.in_use.subscribe()
    }

    fn records(&self) -> MutexGuard<'_, Records> {
        self.records.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn change(&self, transition: impl FnOnce(&mut Records)) {
        let mut records = self.records();
        transition(&mut records);
        let now = records.in_use();
        self.in_use.send_if_modified(|current| {
            let changed = *current != now;
            *current = now;
            changed
        });
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn volume(handle: &str) -> VolumeIdentity {
        VolumeIdentity {
            driver: "d".into(),
            handle: handle.into(),
            pv: format!("pv-{handle}"),
            block: false,
        }
    }

    #[test]
    fn a_staged_volume_outlives_its_last_pod_until_unstaged() {
        let state = VolumeState::default();
        let v = volume("1");
        let unique = v.unique_name();
        state.want(&unique, "pod-a");
        state.want(&unique, "pod-b");
        state.mark_staged(&v);
        state.mark_published(&v, "pod-a", "/a".into());
        state.mark_published(&v, "pod-b", "/b".into());
        assert!(state.is_staged(&unique) && state.is_published(&unique, "pod-a"));
        assert_eq!(state.publish_target(&unique), Some("/a".into()));

        state.mark_unpublished(&unique, "pod-a");
        state.release_pod("pod-a");
        assert!(state.unused().is_empty(), "pod-b still uses it");

        state.mark_unpublished(&unique, "pod-b");
        assert!(state.unused().is_empty(), "pod-b still wants it");
        state.release_pod("pod-b");
        assert_eq!(state.unused(), [unique.as_str()]);
        assert!(state.unused_volume(&unique).is_some_and(|m| m.staged));
        assert_eq!(state.in_use(), [unique.as_str()]);

        state.mark_unstaged(&unique);
        assert!(state.unused_volume(&unique).is_none());
        assert!(state.in_use().is_empty());
    }

    #[test]
    fn an_unstaged_volume_goes_with_its_last_pod() {
        let state = VolumeState::default();
        let v = volume("1");
        let unique = v.unique_name();
        state.mark_published(&v, "pod-a", "/a".into());
        assert_eq!(state.published().len(), 1);
        state.mark_unpublished(&unique, "pod-a");
        assert!(state.published().is_empty());
        assert!(state.in_use().is_empty());
    }

    #[test]
    fn in_use_is_wanted_or_mounted_and_changes_are_announced() {
        let state = VolumeState::default();
        let mut changes = state.subscribe();
        let (one, two) = (volume("1"), volume("2"));
        state.want(&one.unique_name(), "pod-a");
        assert!(changes.has_changed().unwrap());
        changes.borrow_and_update();
        // Already in use: no news.
        state.want(&one.unique_name(), "pod-b");
        assert!(!changes.has_changed().unwrap());
        state.mark_staged(&two);
        assert_eq!(
            *changes.borrow_and_update(),
            BTreeSet::from([one.unique_name(), two.unique_name()])
        );
        state.release_pod("pod-a");
        state.release_pod("pod-b");
        assert_eq!(state.in_use(), [two.unique_name()]);
    }
}
