//! The templates of `assets/current/`, in apply order.

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
pub(super) const CURRENT: &[Asset] = &[
    asset!("current", "controller-rbac.yaml", When::Always),
    asset!("current", "node-rbac.yaml", When::Always),
    asset!("current", "csidriver.yaml", When::Always),
    asset!("current", "node.yaml", When::Always),
    asset!("current", "controller.yaml", When::Always),
    asset!("current", "snapshotclass.yaml", When::SnapshotCrds),
    asset!("current", "storageclass.yaml", When::Always),
];
