//! [`EmbeddedOptions`]: how the embedded default is set up, whichever driver it deploys.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use cluster::ClusterBackend;

use crate::registry::DriverConfig;

/// How the embedded default is set up.
#[derive(Debug, Clone)]
pub struct EmbeddedOptions {
    /// Nodes of the cluster.
    pub nodes: usize,
    /// Their zones, in turn.
    pub zones: Vec<String>,
    /// The driver configurations the selected tests need (the default one is always there).
    pub configs: BTreeSet<DriverConfig>,
    /// Keep the run directory (logs) after the run.
    pub keep_run_dir: bool,
    /// How long the driver may take to be ready.
    pub ready_timeout: Duration,
    /// A cloud the run does not start (a clouds.yaml and the cloud in it) instead of the fake.
    pub clouds_yaml: Option<(PathBuf, String)>,
    /// With `clouds_yaml`: the directory below which the cloud's NFS exports are on this host
    /// (the NFS plugin binds them); without it the plugin mounts with the kernel NFS client.
    pub nfs_export_root: Option<PathBuf>,
    /// Where the cluster runs (default: processes of this host).
    pub backend: ClusterBackend,
    /// The Manila operator installs the driver (default: the plain fixtures).
    pub by_operator: bool,
}

impl Default for EmbeddedOptions {
    fn default() -> Self {
        EmbeddedOptions {
            nodes: 3,
            zones: vec!["zone-a".into(), "zone-b".into()],
            configs: BTreeSet::new(),
            keep_run_dir: false,
            ready_timeout: Duration::from_secs(180),
            clouds_yaml: None,
            nfs_export_root: None,
            backend: ClusterBackend::Embedded,
            by_operator: false,
        }
    }
}
