//! The containers backend: the same real control plane and node agents as the embedded
//! backend, but each in a container of its own, on a private docker network, started and
//! removed with `testcontainers`. Nodes have their own addresses, so a node can be powered
//! off, frozen or cut off from the network ([`NodeAction`]), which the embedded backend, where
//! every node shares this host, cannot do.
//!
//! ```text
//! docker network occ-<id> (user-defined bridge; the host is its gateway)
//!   occ-<id>-control-plane   `control-plane`: etcd, kube-apiserver (on the container's
//!                            address), kube-controller-manager, kube-scheduler
//!   occ-<id>-node-1 …        `node-agent` as PID 1's child (docker's init reaps orphans):
//!                            pods are processes in the node container, on its address
//! ```
//!
//! - **Image**: one Debian root filesystem built without a registry and cached ([`image`]).
//!   The project's binaries, the control-plane binaries and the cluster's run directory are
//!   bind-mounted at the same paths as on the host, so every path (kubeconfigs, certificates,
//!   logs, a node's pods) means the same inside and out, and a code change needs no new image.
//! - **Addresses**: the control plane listens on its container's address and issues each node
//!   a kubelet serving certificate for the node container's name; the apiserver reaches
//!   kubelets by that name (`--kubelet-preferred-address-types=Hostname,…`), which the
//!   network's DNS resolves. Each node learns its own address (InternalIP, pod IPs) from its
//!   route to the control plane.
//! - **Privileges**: not `--privileged` (the engine cannot grant every capability on this
//!   project's machines): every capability but `SYS_RESOURCE`, no seccomp or AppArmor
//!   profile, docker's init. Mounts made in a node (volumes, published CSI volumes) stay in
//!   its mount namespace.
//! - **The host**: services of the test process (the fake cloud) listen on the network's
//!   gateway address ([`ContainerNetwork::gateway`]); directories that must be shared with
//!   the nodes (the fake cloud's NFS exports) are below the run directory or named in
//!   [`ContainerOptions::shared_paths`].
//! - **Nothing left behind**: [`ContainerCluster::stop`] removes the containers, the network
//!   and the run directory; dropped without it, the same happens synchronously. A harness
//!   that died leaves objects labelled with its run directory, which the next start removes
//!   ([`remove_stale`]).

pub(crate) mod docker;
pub mod image;
pub(crate) mod run;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Deserialize;
use testcontainers::runners::AsyncRunner;
use testcontainers::{ContainerAsync, GenericImage, ImageExt};

use super::embedded::node_agents::NodeAgentLaunch;
use super::embedded::{
    ClusterDescription, NODE_PLACEHOLDER, NodeDescription, StartTimings, check_nodes_and_zones,
    host_port, locate_node_agent, node_layout, wait_nodes_ready_checking, wait_usable,
};
use super::error::{Error, Result};
use super::{Cluster, embedded};
use control_plane::{Binaries, run_dir};
use kube_support::error::IoContext;
use run::{ContainerRun, bind, bind_read_only, remove_stale_objects};

pub use docker::{
    ContainerNetwork, LabelledObject, NodeAction, RUN_DIR_LABEL, labelled_objects, remove_stale,
};
pub use image::{NODE_IMAGE_ENV, node_image};

/// The kubelet API's port in every node container (each has its own address).
pub const KUBELET_PORT: u16 = 10250;

/// How long the control-plane container may take to be ready.
const CONTROL_PLANE_TIMEOUT: Duration = Duration::from_secs(120);

/// Options of a [`ContainerCluster`].
#[derive(Debug, Clone)]
pub struct ContainerOptions {
    /// How many nodes (default 3).
    pub nodes: usize,
    /// The zones, assigned to the nodes in turn (default `zone-a`, `zone-b`, `zone-c`).
    pub zones: Vec<String>,
    /// The region of every node (default `RegionOne`).
    pub region: String,
    /// Where the run directory is created (default `$TMPDIR/occ`).
    pub base_dir: PathBuf,
    /// Images mapped to host binaries (their directories are bind-mounted read-only).
    pub images: Vec<(String, PathBuf)>,
    /// The `node-agent` binary; `control-plane` and `pod-sandbox` must be beside it.
    pub node_agent: Option<PathBuf>,
    /// The control-plane binaries; default [`Binaries::locate`].
    pub binaries: Option<Binaries>,
    /// How long the nodes may take to become Ready once their containers run (default 90 s).
    pub ready_timeout: Duration,
    /// Keep the run directory (logs) after [`ContainerCluster::stop`].
    pub keep_run_dir: bool,
    /// Environment variables of every container of every node's pods (see
    /// [`EmbeddedOptions::pod_env`](super::EmbeddedOptions::pod_env)).
    pub pod_env: Vec<(String, String)>,
    /// Host directories every node container sees at the same path (read-write).
    pub shared_paths: Vec<PathBuf>,
    /// Extra kube-controller-manager flags, e.g. a shorter `--node-monitor-grace-period` for
    /// node-loss tests (default none: Kubernetes' defaults).
    pub controller_manager_args: Vec<String>,
    /// The network, made beforehand by the caller (to learn its gateway before the cluster
    /// starts); default a new one. Either way the cluster removes it when it stops.
    pub network: Option<ContainerNetwork>,
}

impl Default for ContainerOptions {
    fn default() -> Self {
        Self {
            nodes: 3,
            zones: vec!["zone-a".into(), "zone-b".into(), "zone-c".into()],
            region: "RegionOne".into(),
            base_dir: run_dir::default_base(),
            images: Vec::new(),
            node_agent: None,
            binaries: None,
            ready_timeout: Duration::from_secs(90),
            keep_run_dir: false,
            pod_env: Vec::new(),
            shared_paths: Vec::new(),
            controller_manager_args: Vec::new(),
            network: None,
        }
    }
}

/// The prefix of a run directory's name (`containers-XXXXXX`).
const RUN_DIR_PREFIX: &str = "containers-";

/// What the control-plane container writes once ready (`control-plane --ready-file`).
#[derive(Debug, Deserialize)]
struct ControlPlaneReady {
    api_url: String,
    kubeconfig: PathBuf,
    ca_file: PathBuf,
}

/// A cluster of the containers backend owned by this process (see the module docs).
pub struct ContainerCluster {
    /// The run directory, the network and the containers' names.
    run: ContainerRun,
    control_plane: Option<ContainerAsync<GenericImage>>,
    nodes: Vec<ContainerAsync<GenericImage>>,
    /// What [`ContainerCluster::boot`] starts (taken by it).
    plan: Option<Plan>,
}

/// A prepared cluster's plan: what [`ContainerCluster::boot`] needs.
#[derive(Debug)]
struct Plan {
    options: ContainerOptions,
    image: String,
    node_agent: PathBuf,
    bin_dir: PathBuf,
    control_plane_bin: PathBuf,
    assets: PathBuf,
    layout: Vec<(String, String)>,
    started: Instant,
}

impl std::fmt::Debug for ContainerCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContainerCluster")
            .field("run_dir", &self.run.root)
            .field("containers", &self.run.names)
            .finish_non_exhaustive()
    }
}

/// The host directory holding `binary`.
fn dir_of(binary: &Path) -> Result<PathBuf> {
    let canonical = std::fs::canonicalize(binary).map_err(Error::io("resolving", binary))?;
    Ok(canonical
        .parent()
        .map_or_else(|| PathBuf::from("/"), Path::to_path_buf))
}

/// The request every container of the backend starts from: the image, the network, the
/// run directory's label and mount, the capabilities a node needs, docker's init.
fn base_request(
    image: &str,
    name: &str,
    network: &ContainerNetwork,
    root: &Path,
) -> testcontainers::ContainerRequest<GenericImage> {
    let (repository, tag) = image.rsplit_once(':').unwrap_or((image, "latest"));
    GenericImage::new(repository, tag)
        .with_container_name(name)
        .with_network(network.name())
        .with_label(RUN_DIR_LABEL, root.display().to_string())
        .with_mount(bind(root))
        .with_cap_add("ALL")
        .with_cap_drop("SYS_RESOURCE")
        .with_security_opt("seccomp=unconfined")
        .with_security_opt("apparmor=unconfined")
        .with_host_config_modifier(|config| config.init = Some(true))
}

impl ContainerCluster {
    /// Builds (or finds) the image, starts the control-plane container, then the node
    /// containers, and waits until every node is Ready and the cluster usable.
    pub async fn start(options: ContainerOptions) -> Result<Self> {
        let mut cluster = Self::prepare(options).await?;
        cluster.boot(Vec::new()).await?;
        Ok(cluster)
    }

    /// The first half of [`ContainerCluster::start`]: the image, the run directory and the
    /// network, nothing running yet. The network's gateway is then known, so servers the
    /// cluster's pods must reach (the fake cloud) can be started before [`Self::boot`].
    pub async fn prepare(options: ContainerOptions) -> Result<Self> {
        check_nodes_and_zones(options.nodes, &options.zones)?;
        let started = Instant::now();
        remove_stale_objects().await?;
        let image = node_image().await?;
        let node_agent = match &options.node_agent {
            Some(path) => path.clone(),
            None => locate_node_agent()?,
        };
        let bin_dir = dir_of(&node_agent)?;
        let control_plane_bin = bin_dir.join("control-plane");
        if !control_plane_bin.is_file() {
            return Err(Error::BinaryMissing {
                binary: "control-plane",
                path: control_plane_bin,
                env: embedded::NODE_AGENT_ENV,
            });
        }
        let binaries = match &options.binaries {
            Some(binaries) => binaries.clone(),
            None => tokio::task::spawn_blocking(Binaries::locate)
                .await
                .map_err(|e| Error::InvalidOption {
                    option: "binaries",
                    reason: format!("locating the control-plane binaries panicked: {e}"),
                })??,
        };
        let assets = dir_of(&binaries.kube_apiserver)?;

        let layout = node_layout(options.nodes, &options.zones);
        let run = ContainerRun::create(
            &options.base_dir,
            RUN_DIR_PREFIX,
            "occ",
            options.network.clone(),
            &layout,
            options.keep_run_dir,
        )
        .await?;
        Ok(ContainerCluster {
            run,
            control_plane: None,
            nodes: Vec::new(),
            plan: Some(Plan {
                options,
                image,
                node_agent,
                bin_dir,
                control_plane_bin,
                assets,
                layout,
                started,
            }),
        })
    }

    /// The second half of [`ContainerCluster::start`] after [`Self::prepare`]: starts the
    /// containers (each node's pods also get `pod_env`, after the options' own) and waits
    /// until the cluster is usable. A failure leaves the cluster to be stopped or dropped.
    pub async fn boot(&mut self, pod_env: Vec<(String, String)>) -> Result<()> {
        let Some(Plan {
            mut options,
            image,
            node_agent,
            bin_dir,
            control_plane_bin,
            assets,
            layout,
            started,
        }) = self.plan.take()
        else {
            return Err(Error::InvalidOption {
                option: "boot",
                reason: "the cluster was already booted".into(),
            });
        };
        options.pod_env.extend(pod_env);
        let root = self.run.root.clone();
        let cluster = self;
        let ready = cluster
            .start_control_plane(
                &image,
                &control_plane_bin,
                &bin_dir,
                &assets,
                &options.controller_manager_args,
            )
            .await?;
        cluster.run.timings.control_plane = started.elapsed();
        let client = control_plane::client_from_kubeconfig(&ready.kubeconfig).await?;
        let (api_host, api_port) = advertised_address(&ready.api_url)?;

        let nodes_started = Instant::now();
        let mut read_only: Vec<PathBuf> = vec![bin_dir.clone()];
        for (_, binary) in &options.images {
            let dir = dir_of(binary)?;
            if !read_only.contains(&dir) {
                read_only.push(dir);
            }
        }
        for (name, zone) in &layout {
            let node_dir = root.join("nodes").join(name);
            let container_name = cluster.run.names.nodes[name].clone();
            let log = root.join("nodes").join(format!("{name}.log"));
            let launch = NodeAgentLaunch {
                binary: node_agent.clone(),
                node: NodeDescription {
                    name: name.clone(),
                    zone: zone.clone(),
                    run_dir: node_dir.clone(),
                    log: log.clone(),
                },
                region: options.region.clone(),
                kubeconfig: node_dir.join("kubeconfig"),
                api_host: api_host.to_string(),
                api_port,
                ca_file: ready.ca_file.clone(),
                images: options.images.clone(),
                lifeline: None,
                serving: control_plane::CertFiles {
                    cert: node_dir.join("kubelet.crt"),
                    key: node_dir.join("kubelet.key"),
                },
                kubelet_port: KUBELET_PORT,
                pod_env: options
                    .pod_env
                    .iter()
                    .map(|(key, value)| (key.clone(), value.replace(NODE_PLACEHOLDER, name)))
                    .collect(),
                node_ip_route_to: Some(api_host),
                hostname_address: Some(container_name.clone()),
            };
            let args: Vec<String> = std::iter::once(node_agent.display().to_string())
                .chain(
                    launch
                        .args()
                        .iter()
                        .map(|a| a.to_string_lossy().into_owned()),
                )
                .collect();
            let mut request = base_request(&image, &container_name, &cluster.run.network, &root)
                .with_env_var(
                    "RUST_LOG",
                    std::env::var("HARNESS_NODE_AGENT_LOG").unwrap_or_else(|_| "info".into()),
                )
                .with_cmd(logged(&log, &args));
            for dir in &read_only {
                if !dir.starts_with(&root) {
                    request = request.with_mount(bind_read_only(dir));
                }
            }
            for path in &options.shared_paths {
                if !path.starts_with(&root) {
                    request = request.with_mount(bind(path));
                }
            }
            let container = request.start().await.map_err(Error::docker(format!(
                "starting container {container_name}"
            )))?;
            tracing::info!(node = %name, %zone, container = %container_name, "node container started");
            cluster.nodes.push(container);
            cluster.run.description.nodes.push(launch.node);
        }
        let node_names: Vec<String> = layout.iter().map(|(n, _)| n.clone()).collect();
        wait_nodes_ready_checking(&client, &node_names, options.ready_timeout, || Ok(())).await?;
        wait_usable(&client, &node_names, options.ready_timeout).await?;
        let run = &mut cluster.run;
        run.timings.nodes = nodes_started.elapsed();
        run.timings.total = started.elapsed();
        run.description.kubeconfig = ready.kubeconfig;
        run.description.api_url = ready.api_url;
        run.description.write(&root)?;
        tracing::info!(nodes = ?node_names, timings = ?run.timings, run_dir = %root.display(), "container cluster ready");
        Ok(())
    }

    async fn start_control_plane(
        &mut self,
        image: &str,
        binary: &Path,
        bin_dir: &Path,
        assets: &Path,
        controller_manager_args: &[String],
    ) -> Result<ControlPlaneReady> {
        let root = &self.run.root;
        let cp_dir = root.join("control-plane");
        let ready_file = root.join("control-plane.ready");
        let log = root.join("control-plane.log");
        let mut args: Vec<String> = vec![
            binary.display().to_string(),
            "--run-dir".into(),
            cp_dir.display().to_string(),
            "--advertise-route-to".into(),
            self.run.network.gateway().to_string(),
            "--ready-file".into(),
            ready_file.display().to_string(),
            "--nodes-dir".into(),
            root.join("nodes").display().to_string(),
            // The apiserver reaches kubelets by the node container's name.
            "--apiserver-arg=--kubelet-preferred-address-types=Hostname,InternalIP".into(),
        ];
        for arg in controller_manager_args {
            args.push(format!("--controller-manager-arg={arg}"));
        }
        for (node, container) in &self.run.names.nodes {
            args.push("--node".into());
            args.push(format!("{node}={container}"));
        }
        let name = self.run.names.control_plane.clone();
        let container = base_request(image, &name, &self.run.network, root)
            .with_mount(bind_read_only(bin_dir))
            .with_mount(bind_read_only(assets))
            .with_env_var("KUBEBUILDER_ASSETS", assets.display().to_string())
            .with_cmd(logged(&log, &args))
            .start()
            .await
            .map_err(Error::docker(format!("starting container {name}")))?;
        self.control_plane = Some(container);
        tracing::info!(container = %name, "control-plane container started; waiting until it is ready");
        let deadline = Instant::now() + CONTROL_PLANE_TIMEOUT;
        loop {
            if let Ok(text) = std::fs::read(&ready_file) {
                return serde_json::from_slice(&text).map_err(|e| {
                    Error::NodeImage(format!("reading {}: {e}", ready_file.display()))
                });
            }
            let running = match &self.control_plane {
                Some(c) => c.is_running().await.unwrap_or(false),
                None => false,
            };
            if !running || Instant::now() >= deadline {
                return Err(Error::Docker {
                    action: format!("starting the control plane in {name}"),
                    reason: format!(
                        "{}; last lines of {}:\n{}",
                        if running {
                            format!("not ready after {CONTROL_PLANE_TIMEOUT:?}")
                        } else {
                            "its container exited".to_string()
                        },
                        log.display(),
                        control_plane::process::log_tail(&log)
                    ),
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// A handle the suites use.
    pub async fn cluster(&self) -> Result<Cluster> {
        self.run.cluster().await
    }

    /// The run directory (bind-mounted at the same path in every container).
    pub fn run_dir(&self) -> &Path {
        &self.run.root
    }

    /// The network (its gateway is this host's address for the containers).
    pub fn network(&self) -> &ContainerNetwork {
        &self.run.network
    }

    /// What other processes read to attach.
    pub fn description(&self) -> &ClusterDescription {
        &self.run.description
    }

    /// How long the start took.
    pub fn timings(&self) -> StartTimings {
        self.run.timings
    }

    /// The containers' names: control plane first, then the nodes.
    pub fn container_names(&self) -> Vec<String> {
        self.run.names.container_names()
    }

    /// Does `action` to `node`'s container.
    pub async fn node_action(&self, node: &str, action: NodeAction) -> Result<()> {
        node_action(&self.run.description, node, action).await
    }

    /// Removes the containers and the network, then the run directory unless kept.
    pub async fn stop(mut self) -> Result<()> {
        tracing::info!(run_dir = %self.run.root.display(), "stopping the container cluster");
        self.run.mark_stopped();
        let mut first_error = None;
        // Nodes first (their agents stop and their pods end with the container), then the
        // control plane.
        for container in self.nodes.drain(..).rev().chain(self.control_plane.take()) {
            if let Err(e) = container.rm().await {
                first_error.get_or_insert(Error::docker("removing a container")(e));
            }
        }
        // Whatever a failed removal above left, and the network; then the run directory.
        self.run.finish(first_error, || Ok(())).await
    }
}

impl Drop for ContainerCluster {
    fn drop(&mut self) {
        if self.run.is_stopped() {
            return;
        }
        tracing::warn!(run_dir = %self.run.root.display(), "container cluster dropped without stop: removing its containers");
        // The containers' own drop removes them through testcontainers; the network and any
        // container they missed go through the CLI.
        self.nodes.clear();
        self.control_plane = None;
        self.run.remove_now();
    }
}

/// Does `action` to the container of `node` of the cluster `description` describes.
pub(crate) async fn node_action(
    description: &ClusterDescription,
    node: &str,
    action: NodeAction,
) -> Result<()> {
    description.node(node)?;
    let containers = description.containers.as_ref().ok_or(Error::Unsupported {
        operation: "acting on a node's machine",
        needs: "the containers backend",
    })?;
    let container = containers.node_container(node)?;
    tracing::info!(node, container = %container, action = action.verb(), "acting on a node");
    docker::act(container, &containers.network, action).await
}

/// The pids whose `/proc/<pid>/mountinfo` show each running node container's mounts.
pub(crate) async fn node_mount_namespaces(
    description: &ClusterDescription,
) -> Result<BTreeMap<String, u32>> {
    let mut pids = BTreeMap::new();
    if let Some(containers) = &description.containers {
        for (node, container) in &containers.nodes {
            if let Some(pid) = docker::init_pid(container).await? {
                pids.insert(node.clone(), pid);
            }
        }
    }
    Ok(pids)
}

/// `sh -c 'exec "$0" "$@" >>LOG 2>&1' ARGS…`: the command with its output appended to a log
/// of the run directory (kept across a node's power cycle, read by the suites' evidence).
fn logged(log: &Path, args: &[String]) -> Vec<String> {
    let mut cmd = vec![
        "/bin/sh".to_string(),
        "-c".to_string(),
        format!("exec \"$0\" \"$@\" >>'{}' 2>&1", log.display()),
    ];
    cmd.extend(args.iter().cloned());
    cmd
}

/// The control plane's advertised `https://<address>:<port>` as an address and a port.
fn advertised_address(url: &str) -> Result<(IpAddr, u16)> {
    let (host, port) = host_port(url);
    let address = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .map_err(|_| Error::InvalidOption {
            option: "api_url",
            reason: format!("the control plane advertised {url:?}, not an address"),
        })?;
    Ok((address, port))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_advertised_url_splits_into_address_and_port() {
        let (address, port) = advertised_address("https://172.18.0.2:41234").unwrap();
        assert_eq!(address.to_string(), "172.18.0.2");
        assert_eq!(port, 41234);
        assert!(advertised_address("https://control-plane:6443").is_err());
    }

    #[test]
    fn commands_log_to_the_run_directory() {
        let cmd = logged(Path::new("/r/n.log"), &["/bin/a".into(), "--x".into()]);
        assert_eq!(
            cmd,
            vec![
                "/bin/sh",
                "-c",
                "exec \"$0\" \"$@\" >>'/r/n.log' 2>&1",
                "/bin/a",
                "--x"
            ]
        );
    }
}
