//! The kind backend's bootstrap ([`Bootstrap::run`]): kind's steps, in order, each failure
//! an [`Error::Bootstrap`] naming the node, the step and what kubeadm (or the node) last
//! wrote (see the module docs of [`kind`](super)).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use testcontainers::bollard::models::{DeviceMapping, Mount as DockerMount, MountType};
use testcontainers::runners::AsyncRunner;
use testcontainers::{ContainerAsync, GenericImage, ImageExt};

use super::config::{self, NodeImageInfo};
use super::image::KindNodeImage;
use super::{CONTROL_PLANE_NODE, KUBEADM_DIR, KindOptions};
use crate::containers::docker::{self, ContainerExec, ContainerNetwork, RUN_DIR_LABEL};
use crate::containers::run::{bind, bind_read_only};
use crate::embedded::{
    ClusterDescription, ContainersDescription, NodeDescription, StartTimings,
    wait_nodes_ready_checking, wait_usable,
};
use crate::error::{Error, Result};
use kube_support::error::IoContext;
use kube_support::wait;

/// What the bootstrap works with: the run's directory, names and network, and the node
/// image.
#[derive(Debug, Clone, Copy)]
pub(super) struct Bootstrap<'a> {
    /// The run directory (kubeadm's configuration and output, the kubelets' logs).
    pub root: &'a Path,
    /// The network's and the containers' names.
    pub names: &'a ContainersDescription,
    /// The network.
    pub network: &'a ContainerNetwork,
    /// The node image.
    pub image: &'a KindNodeImage,
}

impl Bootstrap<'_> {
    /// kind's steps (see the module docs), from the node containers (pushed to
    /// `containers` as they start) to every node Ready; writes the description and returns
    /// it with the start's timings.
    pub(super) async fn run(
        &self,
        options: &KindOptions,
        layout: &[(String, String)],
        started: Instant,
        containers: &mut Vec<ContainerAsync<GenericImage>>,
    ) -> Result<(ClusterDescription, StartTimings)> {
        let mut timings = StartTimings::default();
        let kubeadm_dir = self.root.join(KUBEADM_DIR);
        std::fs::create_dir_all(&kubeadm_dir).map_err(Error::io("creating", &kubeadm_dir))?;
        let control_plane = self.names.control_plane.clone();
        let all: Vec<(String, String)> =
            std::iter::once((CONTROL_PLANE_NODE.to_string(), control_plane.clone()))
                .chain(self.names.nodes.clone())
                .collect();
        for (node, container) in &all {
            containers.push(
                self.start_container(node, container, &options.image_archives)
                    .await?,
            );
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
            return Err(self.error(
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
        let client = control_plane::client_from_kubeconfig(&kubeconfig).await?;
        timings.control_plane = started.elapsed();

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
            let this = self;
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
        timings.nodes = nodes_started.elapsed();
        timings.total = started.elapsed();

        let description = ClusterDescription {
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
        description.write(self.root)?;
        tracing::info!(nodes = ?node_names, ?timings, run_dir = %self.root.display(), image = self.image.reference(), "kind cluster ready");
        Ok((description, timings))
    }

    /// Starts `node`'s container from the node image, with the image archives mounted.
    async fn start_container(
        &self,
        node: &str,
        container: &str,
        archives: &[PathBuf],
    ) -> Result<ContainerAsync<GenericImage>> {
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
            .with_mount(bind(self.root))
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
            if !archive.starts_with(self.root) {
                request = request.with_mount(bind_read_only(archive));
            }
        }
        let started = request
            .start()
            .await
            .map_err(Error::docker(format!("starting container {container}")))?;
        tracing::info!(node, container, image = %reference, "kind node container started");
        Ok(started)
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
            return Err(self.error(
                node,
                "starting containerd",
                format!("{e}; container log:\n{}", container_log(container).await),
            ));
        }
        Ok(())
    }

    /// The node's IPv4 address on the network (`hostname -i`).
    async fn address_of(&self, node: &str, container: &str) -> Result<IpAddr> {
        let out = docker::exec(container, &["hostname", "-i"]).await?;
        out.output
            .split_whitespace()
            .find_map(|word| word.parse::<IpAddr>().ok().filter(IpAddr::is_ipv4))
            .ok_or_else(|| {
                self.error(
                    node,
                    "finding the node's address",
                    format!("`hostname -i` printed {:?}", out.output),
                )
            })
    }

    /// Imports `archive` into the node's containerd (`ctr images import`).
    async fn import_archive(&self, node: &str, container: &str, archive: &Path) -> Result<()> {
        let path = archive.display().to_string();
        let out = docker::exec(
            container,
            &["ctr", "--namespace=k8s.io", "images", "import", &path],
        )
        .await?;
        if !out.success() {
            return Err(self.error(
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
            return Err(self.error(
                node,
                &format!("kubeadm {what}"),
                format!(
                    "exited {} after {:?}; last lines of {}:\n{}",
                    out.code,
                    started.elapsed(),
                    log.display(),
                    control_plane::process::log_tail(&log)
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
            return Err(self.error(
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
        control_plane::pki::write_private(&path, &text)?;
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
                return Err(self.error(
                    node,
                    "setting up the pod network",
                    format!("exited {}: {}", out.code, out.output),
                ));
            }
            tracing::info!(node, pod_cidr = %own, "pod network configured");
        }
        Ok(())
    }

    /// A failed `step` on `node`: [`Error::Bootstrap`], naming the run directory.
    fn error(&self, node: &str, step: &str, reason: String) -> Error {
        Error::Bootstrap {
            node: node.to_string(),
            step: step.to_string(),
            reason,
            run_dir: self.root.to_path_buf(),
        }
    }
}

/// The last lines of `container`'s own log (its entrypoint's).
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
