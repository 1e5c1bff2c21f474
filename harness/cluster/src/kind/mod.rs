//! The kind backend: real kubelets and a real container runtime (containerd, runc, the CNI
//! plugins) in node containers, bootstrapped as kind does, with kubeadm.
//!
//! ```text
//! docker network ock-<id> (user-defined bridge)
//!   ock-<id>-control-plane   kubelet + containerd; kubeadm init runs etcd, kube-apiserver,
//!                            kube-controller-manager and kube-scheduler as static pods, and
//!                            kube-proxy as a DaemonSet
//!   ock-<id>-node-1 …        kubelet + containerd, joined with kubeadm join
//! ```
//!
//! kind's steps, in order: node containers from the node image; kubeadm's configuration
//! written for each ([`config`]); `kubeadm init --skip-phases=preflight` on the control-plane
//! node; the admin kubeconfig copied out (pointed at the node's address, which this host
//! reaches); `kubeadm join --skip-phases=preflight` on the workers; the pod network (what
//! kind's CNI does: a ptp CNI configuration per node for its pod CIDR, routes to the other
//! nodes' ranges, masquerading out of the pod network); every node Ready.
//!
//! - **Node image** ([`kind_node_image`]): `kindest/node` when present or pullable (run
//!   privileged, as kind runs it), otherwise the image `ci/node-image/build.sh kind` builds
//!   from Debian's packages, which runs unprivileged (every capability but
//!   `SYS_RESOURCE`, which the engine cannot grant on this project's machines) with a kubelet
//!   supervised by its entrypoint instead of systemd; its control-plane images are made from
//!   the same binaries the embedded backend runs. See `ci/node-image/README.md`.
//! - **Differences from kind**: no CoreDNS (the `addon/coredns` phase is skipped: CoreDNS is
//!   not packaged by Debian, so the local image cannot carry it) and the pod network is set up
//!   by this module rather than by a kindnetd DaemonSet (kindnetd's image is not buildable
//!   from Debian either); Services and kube-proxy work as in kind.
//! - **Images** ([`KindOptions::image_archives`]): image archives (`docker save` format or
//!   OCI layouts in a tarball, such as [`project_image_archive`] makes from the project's
//!   binaries) are imported into every node's containerd, as `kind load image-archive` does.
//! - **Nothing left behind**: [`KindCluster::stop`] (or drop) removes the containers with
//!   their volumes, the kubelets' cgroups, the network and the run directory.

mod bootstrap;
mod cgroups;
pub mod config;
pub mod image;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use testcontainers::{ContainerAsync, GenericImage};

use super::Cluster;
use super::containers::docker::{self, ContainerExec};
use super::containers::run::{ContainerRun, remove_stale_objects};
use super::embedded::{ClusterDescription, StartTimings, check_nodes_and_zones, node_layout};
use super::error::{Error, Result};
use bootstrap::Bootstrap;
use cgroups::remove_cgroups;
use control_plane::run_dir;

pub use config::NodeImageInfo;
pub use image::{
    KIND_NODE_IMAGE_ENV, KINDEST_NODE_IMAGE, KindNodeImage, kind_node_image, local_kind_node_image,
    project_image_archive,
};

/// The control-plane node's name.
pub const CONTROL_PLANE_NODE: &str = "control-plane";

/// Options of a [`KindCluster`].
#[derive(Debug, Clone)]
pub struct KindOptions {
    /// How many worker nodes (default 2), besides the control-plane node.
    pub nodes: usize,
    /// The zones, assigned to the workers in turn (default `zone-a`, `zone-b`, `zone-c`).
    pub zones: Vec<String>,
    /// The region of every worker (default `RegionOne`).
    pub region: String,
    /// Where the run directory is created (default `$TMPDIR/occ`).
    pub base_dir: PathBuf,
    /// Image archives imported into every node's containerd once it runs.
    pub image_archives: Vec<PathBuf>,
    /// The node image; default [`kind_node_image`] (`kindest/node` when available, else the
    /// local build).
    pub image: Option<KindNodeImage>,
    /// How long each step (kubeadm init, join, nodes Ready) may take (default 240 s).
    pub step_timeout: Duration,
    /// Keep the run directory (kubeadm's and the kubelets' logs) after
    /// [`KindCluster::stop`].
    pub keep_run_dir: bool,
}

impl Default for KindOptions {
    fn default() -> Self {
        Self {
            nodes: 2,
            zones: vec!["zone-a".into(), "zone-b".into(), "zone-c".into()],
            region: "RegionOne".into(),
            base_dir: run_dir::default_base(),
            image_archives: Vec::new(),
            image: None,
            step_timeout: Duration::from_secs(240),
            keep_run_dir: false,
        }
    }
}

/// The prefix of a run directory's name (`kind-XXXXXX`).
const RUN_DIR_PREFIX: &str = "kind-";

/// Where kubeadm's configuration, its output and the kubelets' logs go in the run directory.
const KUBEADM_DIR: &str = "kubeadm";

/// A kind cluster owned by this process (see the module docs).
pub struct KindCluster {
    /// The run directory, the network and the containers' names.
    run: ContainerRun,
    image: KindNodeImage,
    containers: Vec<ContainerAsync<GenericImage>>,
    /// Each node's cgroup root under the host's hierarchies (removed at the end).
    cgroup_roots: Vec<String>,
}

impl std::fmt::Debug for KindCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KindCluster")
            .field("run_dir", &self.run.root)
            .field("image", &self.image)
            .field("containers", &self.run.names)
            .finish_non_exhaustive()
    }
}

impl KindCluster {
    /// Finds (or builds) the node image, starts the node containers and bootstraps the
    /// cluster (see the module docs); returns once every node is Ready. A failure removes
    /// everything started, and names the step, the node and what kubeadm last wrote.
    pub async fn start(options: KindOptions) -> Result<Self> {
        check_nodes_and_zones(options.nodes, &options.zones)?;
        for archive in &options.image_archives {
            if !archive.is_file() {
                return Err(Error::InvalidOption {
                    option: "image_archives",
                    reason: format!("{} is not a file", archive.display()),
                });
            }
        }
        let started = Instant::now();
        remove_stale_objects().await?;
        let image = match &options.image {
            Some(image) => image.clone(),
            None => kind_node_image().await?,
        };
        let layout = node_layout(options.nodes, &options.zones);
        let run = ContainerRun::create(
            &options.base_dir,
            RUN_DIR_PREFIX,
            "ock",
            None,
            &layout,
            options.keep_run_dir,
        )
        .await?;
        let mut cluster = KindCluster {
            cgroup_roots: run.names.container_names(),
            run,
            image,
            containers: Vec::new(),
        };
        // A failure from here on drops `cluster`, which removes what was started.
        let bootstrap = Bootstrap {
            root: &cluster.run.root,
            names: &cluster.run.names,
            network: &cluster.run.network,
            image: &cluster.image,
        };
        let (description, timings) = bootstrap
            .run(&options, &layout, started, &mut cluster.containers)
            .await?;
        cluster.run.description = description;
        cluster.run.timings = timings;
        Ok(cluster)
    }

    /// A handle the suites use.
    pub async fn cluster(&self) -> Result<Cluster> {
        self.run.cluster().await
    }

    /// The run directory (kubeadm's configuration and output, the kubelets' logs).
    pub fn run_dir(&self) -> &Path {
        &self.run.root
    }

    /// The node image the cluster runs.
    pub fn image(&self) -> &KindNodeImage {
        &self.image
    }

    /// What other processes read to attach.
    pub fn description(&self) -> &ClusterDescription {
        &self.run.description
    }

    /// How long the start took (control plane: up to kubeadm init done; nodes: the joins
    /// to every node Ready).
    pub fn timings(&self) -> StartTimings {
        self.run.timings
    }

    /// The containers' names: control plane first, then the workers.
    pub fn container_names(&self) -> Vec<String> {
        self.run.names.container_names()
    }

    /// Runs `argv` in a node's container (`docker exec`).
    pub async fn exec_on_node(&self, node: &str, argv: &[&str]) -> Result<ContainerExec> {
        let names = &self.run.names;
        let container = if node == CONTROL_PLANE_NODE {
            &names.control_plane
        } else {
            names.node_container(node)?
        };
        docker::exec(container, argv).await
    }

    /// Removes the containers with their volumes, the kubelets' cgroups and the network,
    /// then the run directory unless kept.
    pub async fn stop(mut self) -> Result<()> {
        tracing::info!(run_dir = %self.run.root.display(), "stopping the kind cluster");
        self.run.mark_stopped();
        self.containers.clear();
        let roots = self.cgroup_roots.clone();
        self.run
            .finish(None, move || {
                let left = remove_cgroups(&roots);
                if left.is_empty() {
                    return Ok(());
                }
                Err(Error::Docker {
                    action: "removing the nodes' cgroups".into(),
                    reason: format!("still there: {}", left.join(", ")),
                })
            })
            .await
    }
}

impl Drop for KindCluster {
    fn drop(&mut self) {
        if self.run.is_stopped() {
            return;
        }
        tracing::warn!(run_dir = %self.run.root.display(), "kind cluster dropped without stop: removing its containers");
        // testcontainers' drop removes its containers in the background; the CLI makes sure,
        // synchronously, and removes the network.
        self.containers.clear();
        self.run.remove_now();
        remove_cgroups(&self.cgroup_roots);
    }
}
