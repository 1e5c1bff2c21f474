//! What the two container-based backends (containers and kind) share of a run
//! ([`ContainerRun`]): its run directory, its docker network and its containers' names, made
//! at the start and removed at the end, whether the cluster is stopped or dropped.

use std::path::{Path, PathBuf};

use testcontainers::core::{AccessMode, Mount};

use super::docker::{self, ContainerNetwork};
use crate::Cluster;
use crate::embedded::{ClusterDescription, ContainersDescription, StartTimings};
use crate::error::{Error, Result};
use control_plane::{RunDir, run_dir};
use kube_support::error::IoContext;

/// The name the control-plane node's container ends with.
const CONTROL_PLANE: &str = "control-plane";

/// A read-write bind mount of `path` at the same path.
pub(crate) fn bind(path: &Path) -> Mount {
    let path = path.display().to_string();
    Mount::bind_mount(path.clone(), path)
}

/// A read-only bind mount of `path` at the same path.
pub(crate) fn bind_read_only(path: &Path) -> Mount {
    bind(path).with_access_mode(AccessMode::ReadOnly)
}

/// Removes the containers and networks a dead harness left (see
/// [`remove_stale`](super::remove_stale)), saying what went.
pub(crate) async fn remove_stale_objects() -> Result<()> {
    for stale in docker::remove_stale().await? {
        tracing::info!(object = %stale, "removed a container or network a dead harness left");
    }
    Ok(())
}

/// One run of a container-based backend: from [`ContainerRun::create`] (the run directory
/// and the network, nothing running yet) to [`ContainerRun::finish`] after a stop, or
/// [`ContainerRun::remove_now`] when the cluster is dropped without one.
pub(crate) struct ContainerRun {
    /// The run directory's canonical path (the containers' label and bind mount).
    pub root: PathBuf,
    /// The run directory (held: its lock tells a live harness from a dead one).
    run_dir: Option<RunDir>,
    /// The cluster's network.
    pub network: ContainerNetwork,
    /// The network's and the containers' names.
    pub names: ContainersDescription,
    /// What other processes read to attach, once the cluster is ready.
    pub description: ClusterDescription,
    /// How long the start took.
    pub timings: StartTimings,
    /// Keep the run directory at the end.
    keep_run_dir: bool,
    /// Stopped (or stopping): a drop has nothing left to do.
    stopped: bool,
}

impl std::fmt::Debug for ContainerRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContainerRun")
            .field("run_dir", &self.root)
            .field("containers", &self.names)
            .finish_non_exhaustive()
    }
}

impl ContainerRun {
    /// Cleans stale run directories under `base_dir`, creates `<prefix>XXXXXX` there, and
    /// the network `<network_prefix>-<id>` unless one is given (a failure to create it
    /// removes the fresh run directory: nothing runs yet). The containers are named
    /// `<network_prefix>-<id>-control-plane` and `<network_prefix>-<id>-<node>` for the
    /// nodes of `layout`.
    pub async fn create(
        base_dir: &Path,
        prefix: &str,
        network_prefix: &str,
        network: Option<ContainerNetwork>,
        layout: &[(String, String)],
        keep_run_dir: bool,
    ) -> Result<Self> {
        for stale in run_dir::clean_stale(base_dir)? {
            tracing::info!(path = %stale.path.display(), "cleaned a stale run directory");
        }
        let run_dir = RunDir::create_in(base_dir, prefix)?;
        let root = std::fs::canonicalize(run_dir.path())
            .map_err(Error::io("resolving", run_dir.path()))?;
        let id = root
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix(prefix))
            .unwrap_or("x")
            .to_ascii_lowercase();
        let network = match network {
            Some(network) => network,
            None => {
                match ContainerNetwork::create(&format!("{network_prefix}-{id}"), &root).await {
                    Ok(network) => network,
                    Err(e) => {
                        let _ = run_dir.remove();
                        return Err(e);
                    }
                }
            }
        };
        let names = ContainersDescription {
            network: network.name().to_string(),
            control_plane: format!("{network_prefix}-{id}-{CONTROL_PLANE}"),
            nodes: layout
                .iter()
                .map(|(node, _)| (node.clone(), format!("{network_prefix}-{id}-{node}")))
                .collect(),
        };
        Ok(ContainerRun {
            description: ClusterDescription {
                kubeconfig: PathBuf::new(),
                api_url: String::new(),
                nodes: Vec::new(),
                pid: std::process::id(),
                containers: Some(names.clone()),
            },
            root,
            run_dir: Some(run_dir),
            network,
            names,
            timings: StartTimings::default(),
            keep_run_dir,
            stopped: false,
        })
    }

    /// A handle the suites use.
    pub async fn cluster(&self) -> Result<Cluster> {
        Cluster::from_description(self.root.clone(), self.description.clone()).await
    }

    /// Marks the run stopped: from now on a drop leaves the removal to
    /// [`ContainerRun::finish`].
    pub fn mark_stopped(&mut self) {
        self.stopped = true;
    }

    /// Whether [`ContainerRun::mark_stopped`] was called.
    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// The end of a stop, once the backend has removed what it could of its containers:
    /// the containers that are left and the network, then `after_containers` (what needs
    /// the containers gone), then the run directory unless kept (logged). Returns the first
    /// error, `earlier` (the backend's own) first.
    pub async fn finish(
        &mut self,
        earlier: Option<Error>,
        after_containers: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let mut first_error = earlier;
        let containers = self.names.container_names();
        if let Err(e) = docker::remove_all(&containers, Some(self.network.name())).await {
            first_error.get_or_insert(e);
        }
        if let Err(e) = after_containers() {
            first_error.get_or_insert(e);
        }
        let removed = match self.run_dir.take() {
            Some(dir) if self.keep_run_dir => {
                tracing::info!(run_dir = %dir.path().display(), "keeping the run directory");
                Ok(())
            }
            Some(dir) => dir.remove().map_err(Error::from),
            None => Ok(()),
        };
        if let Err(e) = removed {
            first_error.get_or_insert(e);
        }
        first_error.map_or(Ok(()), Err)
    }

    /// For a cluster dropped without a stop, once its containers' handles are dropped:
    /// removes the containers and the network through the CLI, synchronously (no runtime
    /// is needed), and the run directory unless kept.
    pub fn remove_now(&mut self) {
        docker::remove_now(&self.names.container_names(), self.network.name());
        if let Some(dir) = self.run_dir.take()
            && !self.keep_run_dir
        {
            let _ = dir.remove();
        }
    }
}
