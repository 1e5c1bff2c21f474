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

pub mod config;
pub mod image;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube_support::error::IoContext;
use kube_support::wait;
use testcontainers::bollard::models::{DeviceMapping, Mount as DockerMount, MountType};
use testcontainers::runners::AsyncRunner;
use testcontainers::{ContainerAsync, GenericImage, ImageExt};

use super::Cluster;
use super::containers::docker::{self, ContainerExec, ContainerNetwork, RUN_DIR_LABEL};
use super::containers::{NewRun, bind, end_run_dir, new_run};
use super::embedded::{
    ClusterDescription, ContainersDescription, NodeDescription, StartTimings,
    check_nodes_and_zones, node_layout, wait_nodes_ready_checking, wait_usable,
};
use super::error::{Error, Result};
use crate::control_plane::{RunDir, run_dir};

pub use config::NodeImageInfo;
pub use image::{
    KIND_NODE_IMAGE_ENV, KINDEST_NODE_IMAGE, KindNodeImage, kind_node_image, local_kind_node_image,
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
    root: PathBuf,
    run_dir: Option<RunDir>,
    network: ContainerNetwork,
    image: KindNodeImage,
    containers: Vec<ContainerAsync<GenericImage>>,
    names: ContainersDescription,
    /// Each node's cgroup root under the host's hierarchies (removed at the end).
    cgroup_roots: Vec<String>,
    description: ClusterDescription,
    timings: StartTimings,
    keep_run_dir: bool,
    stopped: bool,
}

impl std::fmt::Debug for KindCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KindCluster")
            .field("run_dir", &self.root)
            .field("image", &self.image)
            .field("containers", &self.names)
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
        for stale in docker::remove_stale().await? {
            tracing::info!(object = %stale, "removed a container or network a dead harness left");
        }
        let image = match &options.image {
            Some(image) => image.clone(),
            None => kind_node_image().await?,
        };
        let NewRun {
            run_dir,
            root,
            id,
            network,
        } = new_run(&options.base_dir, RUN_DIR_PREFIX, "ock", None).await?;
        let layout = node_layout(options.nodes, &options.zones);
        let names = ContainersDescription {
            network: network.name().to_string(),
            control_plane: format!("ock-{id}-{CONTROL_PLANE_NODE}"),
            nodes: layout
                .iter()
                .map(|(node, _)| (node.clone(), format!("ock-{id}-{node}")))
                .collect(),
        };
        let mut cluster = KindCluster {
            cgroup_roots: std::iter::once(names.control_plane.clone())
                .chain(names.nodes.values().cloned())
                .collect(),
            root,
            run_dir: Some(run_dir),
            network,
            image,
            containers: Vec::new(),
            names,
            description: ClusterDescription {
                kubeconfig: PathBuf::new(),
                api_url: String::new(),
                nodes: Vec::new(),
                pid: std::process::id(),
                containers: None,
            },
            timings: StartTimings::default(),
            keep_run_dir: options.keep_run_dir,
            stopped: false,
        };
        // A failure from here on drops `cluster`, which removes what was started.
        cluster.bootstrap(&options, &layout, started).await?;
        Ok(cluster)
    }

    async fn bootstrap(
        &mut self,
        options: &KindOptions,
        layout: &[(String, String)],
        started: Instant,
    ) -> Result<()> {
        let kubeadm_dir = self.root.join(KUBEADM_DIR);
        std::fs::create_dir_all(&kubeadm_dir).map_err(Error::io("creating", &kubeadm_dir))?;
        let control_plane = self.names.control_plane.clone();
        let all: Vec<(String, String)> =
            std::iter::once((CONTROL_PLANE_NODE.to_string(), control_plane.clone()))
                .chain(self.names.nodes.clone())
                .collect();
        for (node, container) in &all {
            self.start_container(node, container, &options.image_archives)
                .await?;
        }
        for (node, container) in &all {
            self.wait_entrypoint(node, container, options.step_timeout)
                .await?;
        }
        let info = NodeImageInfo::parse(
            &docker::exec(&control_plane, &["cat", "/kind/images.env"])
                .await?
                .output,
        );
        if matches!(self.image, KindNodeImage::Local(_)) && info.image_repository.is_none() {
            return Err(self.bootstrap_error(
                CONTROL_PLANE_NODE,
                "reading the node image's /kind/images.env",
                "the local node image names no image repository: rebuild it with ci/node-image/build.sh kind".into(),
            ));
        }
        let mut addresses = BTreeMap::new();
        for (node, container) in &all {
            addresses.insert(node.clone(), self.address_of(node, container).await?);
        }
        for archive in &options.image_archives {
            for (node, container) in &all {
                self.import_archive(node, container, archive).await?;
            }
        }

        // kubeadm init on the control-plane node.
        let cp_address = addresses[CONTROL_PLANE_NODE];
        let init = config::init_configuration(
            &config::ControlPlaneNode {
                cluster_name: &self.names.network,
                node_name: CONTROL_PLANE_NODE,
                host: &control_plane,
                address: cp_address,
            },
            &info,
        );
        let init_file = kubeadm_dir.join(format!("{CONTROL_PLANE_NODE}.yaml"));
        std::fs::write(&init_file, init).map_err(Error::io("writing", &init_file))?;
        let mut init_args = vec![
            "kubeadm".to_string(),
            "init".into(),
            format!("--config={}", init_file.display()),
            "--skip-token-print".into(),
            "--v=2".into(),
        ];
        // kind skips the preflight checks; CoreDNS is not in the local image (module docs).
        init_args.push(match self.image {
            KindNodeImage::Kindest(_) => "--skip-phases=preflight".into(),
            KindNodeImage::Local(_) => "--skip-phases=preflight,addon/coredns".into(),
        });
        self.kubeadm(CONTROL_PLANE_NODE, &control_plane, "init", &init_args)
            .await?;
        let kubeconfig = self
            .copy_admin_kubeconfig(&control_plane, cp_address)
            .await?;
        let client = crate::control_plane::client_from_kubeconfig(&kubeconfig).await?;
        self.timings.control_plane = started.elapsed();

        // kubeadm join on the workers, all at once.
        let nodes_started = Instant::now();
        let endpoint = format!("{control_plane}:{}", config::API_SERVER_PORT);
        let mut joins = Vec::new();
        for (node, zone) in layout {
            let labels = vec![
                ("topology.kubernetes.io/zone".to_string(), zone.clone()),
                (
                    "topology.kubernetes.io/region".to_string(),
                    options.region.clone(),
                ),
            ];
            let join = config::join_configuration(
                &config::WorkerNode {
                    node_name: node,
                    address: addresses[node],
                    labels: &labels,
                },
                &endpoint,
            );
            let file = kubeadm_dir.join(format!("{node}.yaml"));
            std::fs::write(&file, join).map_err(Error::io("writing", &file))?;
            let args = vec![
                "kubeadm".to_string(),
                "join".into(),
                format!("--config={}", file.display()),
                "--skip-phases=preflight".into(),
                "--v=2".into(),
            ];
            let container = self.names.nodes[node].clone();
            let this = &*self;
            joins.push(async move { this.kubeadm(node, &container, "join", &args).await });
        }
        for result in futures::future::join_all(joins).await {
            result?;
        }

        let node_names: Vec<String> = std::iter::once(CONTROL_PLANE_NODE.to_string())
            .chain(layout.iter().map(|(n, _)| n.clone()))
            .collect();
        self.pod_network(&client, &all, &addresses, options.step_timeout)
            .await?;
        wait_nodes_ready_checking(&client, &node_names, options.step_timeout, || Ok(())).await?;
        wait_usable(&client, &node_names, options.step_timeout).await?;
        self.timings.nodes = nodes_started.elapsed();
        self.timings.total = started.elapsed();

        self.description = ClusterDescription {
            kubeconfig,
            api_url: format!(
                "https://{}",
                std::net::SocketAddr::new(cp_address, config::API_SERVER_PORT)
            ),
            nodes: layout
                .iter()
                .map(|(name, zone)| NodeDescription {
                    name: name.clone(),
                    zone: zone.clone(),
                    run_dir: self.root.join("nodes").join(name),
                    log: kubeadm_dir.join(format!("{name}.kubelet.log")),
                })
                .collect(),
            pid: std::process::id(),
            containers: Some(self.names.clone()),
        };
        self.description.write(&self.root)?;
        tracing::info!(nodes = ?node_names, timings = ?self.timings, run_dir = %self.root.display(), image = self.image.reference(), "kind cluster ready");
        Ok(())
    }

    async fn start_container(
        &mut self,
        node: &str,
        container: &str,
        archives: &[PathBuf],
    ) -> Result<()> {
        let reference = self.image.reference().to_string();
        let (repository, tag) = reference.rsplit_once(':').unwrap_or((&reference, "latest"));
        let privileged = matches!(self.image, KindNodeImage::Kindest(_));
        let log = self
            .root
            .join(KUBEADM_DIR)
            .join(format!("{node}.kubelet.log"));
        let mut request = GenericImage::new(repository, tag)
            .with_container_name(container)
            .with_hostname(container)
            .with_network(self.network.name())
            .with_label(RUN_DIR_LABEL, self.root.display().to_string())
            .with_mount(bind(&self.root))
            .with_env_var("CGROUP_ROOT", format!("/{container}"))
            .with_env_var("KUBELET_LOG", log.display().to_string())
            .with_security_opt("seccomp=unconfined")
            .with_security_opt("apparmor=unconfined")
            .with_host_config_modifier(move |config| {
                config.init = Some(!privileged);
                config.privileged = Some(privileged);
                config.tmpfs.get_or_insert_with(Default::default).extend([
                    ("/run".to_string(), String::new()),
                    ("/tmp".to_string(), String::new()),
                ]);
                // containerd's snapshots on a volume, not on the engine's own storage
                // driver (fuse-overlayfs here), as kind does.
                config
                    .mounts
                    .get_or_insert_with(Vec::new)
                    .push(DockerMount {
                        target: Some("/var".into()),
                        typ: Some(MountType::VOLUME),
                        ..Default::default()
                    });
                let binds = config.binds.get_or_insert_with(Vec::new);
                binds.push("/sys/fs/cgroup:/sys/fs/cgroup:rw".into());
                if Path::new("/lib/modules").is_dir() {
                    binds.push("/lib/modules:/lib/modules:ro".into());
                }
                if !privileged {
                    config.devices = Some(
                        ["/dev/kmsg", "/dev/fuse"]
                            .iter()
                            .filter(|d| Path::new(d).exists())
                            .map(|d| DeviceMapping {
                                path_on_host: Some((*d).into()),
                                path_in_container: Some((*d).into()),
                                cgroup_permissions: Some("rwm".into()),
                            })
                            .collect(),
                    );
                }
            });
        if !privileged {
            request = request.with_cap_add("ALL").with_cap_drop("SYS_RESOURCE");
        }
        for archive in archives {
            if !archive.starts_with(&self.root) {
                request = request.with_mount(
                    bind(archive).with_access_mode(testcontainers::core::AccessMode::ReadOnly),
                );
            }
        }
        let started = request
            .start()
            .await
            .map_err(Error::docker(format!("starting container {container}")))?;
        tracing::info!(node, container, image = %reference, "kind node container started");
        self.containers.push(started);
        Ok(())
    }

    /// Waits until the node's entrypoint has containerd running with its images imported.
    async fn wait_entrypoint(&self, node: &str, container: &str, timeout: Duration) -> Result<()> {
        let marker = match self.image {
            KindNodeImage::Local(_) => "test -f /run/node-entrypoint.ready",
            // kind's image: systemd started containerd.
            KindNodeImage::Kindest(_) => "test -S /run/containerd/containerd.sock",
        };
        let result = wait::wait_until(
            format!("node {node}'s container runtime ({container})"),
            timeout,
            || async {
                match docker::exec(container, &["sh", "-c", marker]).await {
                    Ok(done) if done.success() => Ok(Some(())),
                    Ok(_) => Err("containerd is not up yet".to_string()),
                    Err(e) => Err(e.to_string()),
                }
            },
        )
        .await;
        if let Err(e) = result {
            return Err(self.bootstrap_error(
                node,
                "starting containerd",
                format!("{e}; container log:\n{}", container_log(container).await),
            ));
        }
        Ok(())
    }

    async fn address_of(&self, node: &str, container: &str) -> Result<IpAddr> {
        let out = docker::exec(container, &["hostname", "-i"]).await?;
        out.output
            .split_whitespace()
            .find_map(|word| word.parse::<IpAddr>().ok().filter(IpAddr::is_ipv4))
            .ok_or_else(|| {
                self.bootstrap_error(
                    node,
                    "finding the node's address",
                    format!("`hostname -i` printed {:?}", out.output),
                )
            })
    }

    async fn import_archive(&self, node: &str, container: &str, archive: &Path) -> Result<()> {
        let path = archive.display().to_string();
        let out = docker::exec(
            container,
            &["ctr", "--namespace=k8s.io", "images", "import", &path],
        )
        .await?;
        if !out.success() {
            return Err(self.bootstrap_error(
                node,
                "importing an image archive",
                format!(
                    "ctr images import {path} exited {}: {}",
                    out.code, out.output
                ),
            ));
        }
        tracing::info!(node, archive = %path, "image archive imported");
        Ok(())
    }

    /// Runs kubeadm (`argv`) in `container`, its output to `<run dir>/kubeadm/<node>.<what>.log`.
    async fn kubeadm(
        &self,
        node: &str,
        container: &str,
        what: &str,
        argv: &[String],
    ) -> Result<()> {
        let log = self
            .root
            .join(KUBEADM_DIR)
            .join(format!("{node}.{what}.log"));
        let script = format!("exec \"$0\" \"$@\" >'{}' 2>&1", log.display());
        let mut command: Vec<&str> = vec!["sh", "-c", &script];
        command.extend(argv.iter().map(String::as_str));
        tracing::info!(node, container, command = ?argv, "kubeadm {what}");
        let started = Instant::now();
        let out: ContainerExec = docker::exec(container, &command).await?;
        if !out.success() {
            return Err(self.bootstrap_error(
                node,
                &format!("kubeadm {what}"),
                format!(
                    "exited {} after {:?}; last lines of {}:\n{}",
                    out.code,
                    started.elapsed(),
                    log.display(),
                    crate::control_plane::process::log_tail(&log)
                ),
            ));
        }
        tracing::info!(node, elapsed = ?started.elapsed(), "kubeadm {what} done");
        Ok(())
    }

    /// The admin kubeconfig kubeadm wrote, copied to the run directory with the server this
    /// host reaches (the control-plane node's address; kubeadm wrote its name).
    async fn copy_admin_kubeconfig(&self, container: &str, address: IpAddr) -> Result<PathBuf> {
        let out = docker::exec(container, &["cat", "/etc/kubernetes/admin.conf"]).await?;
        if !out.success() {
            return Err(self.bootstrap_error(
                CONTROL_PLANE_NODE,
                "reading /etc/kubernetes/admin.conf",
                out.output,
            ));
        }
        let endpoint = format!("https://{container}:{}", config::API_SERVER_PORT);
        let reachable = format!(
            "https://{}",
            std::net::SocketAddr::new(address, config::API_SERVER_PORT)
        );
        let text = out.output.replace(&endpoint, &reachable);
        let path = self.root.join("admin.kubeconfig");
        crate::control_plane::pki::write_private(&path, &text)?;
        Ok(path)
    }

    /// What kindnetd does, once each node has its pod CIDR: the CNI configuration, routes to
    /// the other nodes' pod ranges, masquerading out of the pod network.
    async fn pod_network(
        &self,
        client: &kube::Client,
        all: &[(String, String)],
        addresses: &BTreeMap<String, IpAddr>,
        timeout: Duration,
    ) -> Result<()> {
        let api: Api<Node> = Api::all(client.clone());
        let names: Vec<String> = all.iter().map(|(n, _)| n.clone()).collect();
        let cidrs: BTreeMap<String, String> = wait::wait_until(
            "every node's pod CIDR (spec.podCIDR, from the controller manager)",
            timeout,
            || async {
                let mut cidrs = BTreeMap::new();
                let mut missing = Vec::new();
                for name in &names {
                    let cidr = api
                        .get_opt(name)
                        .await
                        .map_err(|e| e.to_string())?
                        .and_then(|n| n.spec)
                        .and_then(|s| s.pod_cidr);
                    match cidr {
                        Some(cidr) => {
                            cidrs.insert(name.clone(), cidr);
                        }
                        None => missing.push(name.clone()),
                    }
                }
                if missing.is_empty() {
                    Ok(Some(cidrs))
                } else {
                    Err(format!("no pod CIDR yet: {}", missing.join(", ")))
                }
            },
        )
        .await?;
        for (node, container) in all {
            let own = &cidrs[node];
            let peers: Vec<(String, IpAddr)> = cidrs
                .iter()
                .filter(|(other, _)| *other != node)
                .map(|(other, cidr)| (cidr.clone(), addresses[other]))
                .collect();
            let cni = config::cni_configuration(own);
            let script = format!(
                "{routes}mkdir -p /etc/cni/net.d\ncat >/etc/cni/net.d/10-kindnet.conflist <<'CNI'\n{cni}CNI\n",
                routes = config::route_commands(own, &peers)
            );
            let out = docker::exec(container, &["sh", "-c", &script]).await?;
            if !out.success() {
                return Err(self.bootstrap_error(
                    node,
                    "setting up the pod network",
                    format!("exited {}: {}", out.code, out.output),
                ));
            }
            tracing::info!(node, pod_cidr = %own, "pod network configured");
        }
        Ok(())
    }

    fn bootstrap_error(&self, node: &str, step: &str, reason: String) -> Error {
        Error::Bootstrap {
            node: node.to_string(),
            step: step.to_string(),
            reason,
            run_dir: self.root.clone(),
        }
    }

    /// A handle the suites use.
    pub async fn cluster(&self) -> Result<Cluster> {
        Cluster::from_description(self.root.clone(), self.description.clone()).await
    }

    /// The run directory (kubeadm's configuration and output, the kubelets' logs).
    pub fn run_dir(&self) -> &Path {
        &self.root
    }

    /// The node image the cluster runs.
    pub fn image(&self) -> &KindNodeImage {
        &self.image
    }

    /// What other processes read to attach.
    pub fn description(&self) -> &ClusterDescription {
        &self.description
    }

    /// How long the start took (control plane: up to kubeadm init done; nodes: the joins
    /// to every node Ready).
    pub fn timings(&self) -> StartTimings {
        self.timings
    }

    /// The containers' names: control plane first, then the workers.
    pub fn container_names(&self) -> Vec<String> {
        std::iter::once(self.names.control_plane.clone())
            .chain(self.names.nodes.values().cloned())
            .collect()
    }

    /// Runs `argv` in a node's container (`docker exec`).
    pub async fn exec_on_node(&self, node: &str, argv: &[&str]) -> Result<ContainerExec> {
        let container = if node == CONTROL_PLANE_NODE {
            &self.names.control_plane
        } else {
            self.names
                .nodes
                .get(node)
                .ok_or_else(|| Error::UnknownNode {
                    node: node.into(),
                    known: self
                        .names
                        .nodes
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", "),
                })?
        };
        docker::exec(container, argv).await
    }

    /// Removes the containers with their volumes, the kubelets' cgroups and the network,
    /// then the run directory unless kept.
    pub async fn stop(mut self) -> Result<()> {
        tracing::info!(run_dir = %self.root.display(), "stopping the kind cluster");
        self.stopped = true;
        let mut first_error = None;
        self.containers.clear();
        if let Err(e) = docker::remove_all(&self.container_names(), Some(self.network.name())).await
        {
            first_error.get_or_insert(e);
        }
        let left = remove_cgroups(&self.cgroup_roots);
        if !left.is_empty() {
            first_error.get_or_insert(Error::Docker {
                action: "removing the nodes' cgroups".into(),
                reason: format!("still there: {}", left.join(", ")),
            });
        }
        if let Err(e) = end_run_dir(self.run_dir.take(), self.keep_run_dir) {
            first_error.get_or_insert(e);
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl Drop for KindCluster {
    fn drop(&mut self) {
        if self.stopped {
            return;
        }
        tracing::warn!(run_dir = %self.root.display(), "kind cluster dropped without stop: removing its containers");
        // testcontainers' drop removes its containers in the background; the CLI makes sure,
        // synchronously (no runtime is needed), and removes the network.
        self.containers.clear();
        docker::remove_now(&self.container_names(), self.network.name());
        remove_cgroups(&self.cgroup_roots);
        if let Some(dir) = self.run_dir.take()
            && !self.keep_run_dir
        {
            let _ = dir.remove();
        }
    }
}

async fn container_log(container: &str) -> String {
    let output = tokio::process::Command::new("docker")
        .args(["logs", "--tail", "30", container])
        .output()
        .await;
    match output {
        Ok(out) => format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => format!("(docker logs failed: {e})"),
    }
}

/// Removes each node's cgroup tree (`/sys/fs/cgroup/<hierarchy>/<root>`, deepest first) once
/// its processes are gone; returns the directories that could not be removed.
fn remove_cgroups(roots: &[String]) -> Vec<String> {
    let mut left = Vec::new();
    let Ok(hierarchies) = std::fs::read_dir("/sys/fs/cgroup") else {
        return left;
    };
    let hierarchies: Vec<PathBuf> = hierarchies.flatten().map(|e| e.path()).collect();
    for root in roots {
        for hierarchy in &hierarchies {
            let dir = hierarchy.join(root);
            if dir.is_dir() && remove_tree(&dir).is_err() {
                left.push(dir.display().to_string());
            }
        }
    }
    left
}

fn remove_tree(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)?.flatten() {
        if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            remove_tree(&entry.path())?;
        }
    }
    // A cgroup directory goes with rmdir (its files are the kernel's).
    std::fs::remove_dir(dir)
}

/// Writes to `out` an image archive named `reference` (e.g.
/// `registry.k8s.io/provider-os/manila-csi-plugin:v1.20.0`) holding `binaries` in
/// `/usr/local/bin` with the shared libraries they load, its command the first binary: how
/// the project's binaries become images for [`KindOptions::image_archives`] without a
/// registry (`ci/node-image/build.sh image`).
pub async fn project_image_archive(
    reference: &str,
    binaries: &[PathBuf],
    out: &Path,
) -> Result<()> {
    if binaries.is_empty() {
        return Err(Error::InvalidOption {
            option: "binaries",
            reason: format!("the image {reference} needs at least one binary"),
        });
    }
    let script = super::containers::image::build_script();
    let output = tokio::process::Command::new(&script)
        .arg("image")
        .arg(reference)
        .arg(out)
        .args(binaries)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .map_err(|e| Error::NodeImage(format!("running {}: {e}", script.display())))?;
    if !output.status.success() {
        return Err(Error::NodeImage(format!(
            "{} image {reference} failed ({}): {}",
            script.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(())
}
