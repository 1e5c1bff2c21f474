//! [`Cluster::shared`]: the one cluster of a test run (see the module docs of
//! [`cluster`](super)).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::OnceCell;

use super::Cluster;
use super::embedded::daemon::{self, UpOptions, locate_conformance};
use super::error::Result;

/// The environment variable naming the run directory of the run's shared cluster (set by
/// the nextest setup script `ci/cluster-setup.sh`).
pub const CLUSTER_DIR_ENV: &str = "HARNESS_CLUSTER_DIR";

/// How long starting a cluster for this process may take (the first start may also build
/// the control-plane binaries, which the harness does when they are missing).
const START_TIMEOUT: Duration = Duration::from_secs(900);

/// The run directory of the cluster this process started, once started.
static STARTED_HERE: OnceCell<PathBuf> = OnceCell::const_new();

impl Cluster {
    /// The cluster shared by every test of this run: the one named by `$HARNESS_CLUSTER_DIR`,
    /// else one started for this test process (3 nodes in zones `zone-a`…`zone-c`, stopped
    /// when the process exits).
    pub async fn shared() -> Result<Cluster> {
        if let Some(dir) = std::env::var_os(CLUSTER_DIR_ENV).filter(|d| !d.is_empty()) {
            return Cluster::connect(Path::new(&dir)).await;
        }
        let dir = STARTED_HERE.get_or_try_init(start_for_this_process).await?;
        Cluster::connect(dir).await
    }
}

async fn start_for_this_process() -> Result<PathBuf> {
    let conformance = locate_conformance()?;
    let serve_args: Vec<OsString> =
        vec!["--until-pid".into(), std::process::id().to_string().into()];
    eprintln!(
        "${CLUSTER_DIR_ENV} is not set: starting a cluster for this test process ({})",
        conformance.display()
    );
    let options = UpOptions {
        run_dir: None,
        base_dir: control_plane::run_dir::default_base(),
        serve_args,
        conformance: Some(conformance),
        timeout: START_TIMEOUT,
    };
    daemon::up(options, &mut std::io::stderr()).await
}
