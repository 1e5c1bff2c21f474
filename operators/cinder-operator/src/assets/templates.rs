//! Each release's templates, in apply order: `assets/current/` for N and `assets/previous/`
//! for N-1 (what N-1 does differently: [`crate::config::OperatorConfig::release`]; a test of
//! `assets` renders both and fails on any other difference).

use crate::config::Release;

/// The templates of `release`, in apply order.
pub(super) fn templates(release: Release) -> &'static [Asset] {
    match release {
        Release::Previous => PREVIOUS,
        Release::Current => CURRENT,
    }
}

/// When a template is part of the installation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum When {
    /// Always.
    Always,
    /// Only when the snapshot CRDs exist.
    SnapshotCrds,
}

/// One template file.
#[derive(Debug)]
pub(super) struct Asset {
    /// `<dir>/<file name>` under `assets/`, named in errors.
    pub(super) file: &'static str,
    /// Its text, with `${NAME}` placeholders.
    pub(super) template: &'static str,
    /// When it is rendered.
    pub(super) when: When,
}

/// Declares an asset of `assets/<dir>/`.
macro_rules! asset {
    ($dir:literal, $file:literal, $when:expr) => {
        Asset {
            file: concat!($dir, "/", $file),
            template: include_str!(concat!("../../assets/", $dir, "/", $file)),
            when: $when,
        }
    };
}

/// Identities and RBAC first, then the driver object, the node plugin, the controller, the
/// snapshot class and the StorageClass.
const CURRENT: &[Asset] = &[
    asset!("current", "controller-rbac.yaml", When::Always),
    asset!("current", "node-rbac.yaml", When::Always),
    asset!("current", "csidriver.yaml", When::Always),
    asset!("current", "node.yaml", When::Always),
    asset!("current", "controller.yaml", When::Always),
    asset!("current", "snapshotclass.yaml", When::SnapshotCrds),
    asset!("current", "storageclass.yaml", When::Always),
];

/// The templates of the previous release, in the same order.
const PREVIOUS: &[Asset] = &[
    asset!("previous", "controller-rbac.yaml", When::Always),
    asset!("previous", "node-rbac.yaml", When::Always),
    asset!("previous", "csidriver.yaml", When::Always),
    asset!("previous", "node.yaml", When::Always),
    asset!("previous", "controller.yaml", When::Always),
    asset!("previous", "snapshotclass.yaml", When::SnapshotCrds),
    // The same class as N's: the class sync does not update a class that exists (only
    // re-creates it when an immutable field changes), so an N-1 class without expansion
    // would stay so after the upgrade.
    asset!("current", "storageclass.yaml", When::Always),
];
