//! The docker side of the containers backend: the cluster's network, what is done to a node's
//! container (stop, start, pause, cut off), and the removal of what a dead harness left.
//!
//! Every container and network the backend makes carries the label [`RUN_DIR_LABEL`] with
//! the cluster's run directory, whose lock the owning process holds. A labelled object
//! whose run directory is gone or unlocked belongs to a harness that died without cleaning
//! up: [`remove_stale`] removes it.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use futures::StreamExt;
use testcontainers::bollard::Docker;
use testcontainers::bollard::exec::{CreateExecOptions, StartExecResults};
use testcontainers::bollard::models::{
    EndpointSettings, Ipam, NetworkConnectRequest, NetworkCreateRequest, NetworkDisconnectRequest,
};
use testcontainers::bollard::query_parameters::{
    InspectNetworkOptions, KillContainerOptionsBuilder, ListContainersOptionsBuilder,
    ListNetworksOptionsBuilder, RemoveContainerOptionsBuilder, StartContainerOptions,
};

use super::super::error::{Error, Result};

/// The label naming the run directory of the cluster a container or network belongs to.
pub const RUN_DIR_LABEL: &str = "openstack-csi-conformance.run-dir";

/// The engine, through its local socket (`DOCKER_HOST` is honoured).
pub(crate) fn engine() -> Result<Docker> {
    Docker::connect_with_local_defaults().map_err(Error::docker("connecting to the engine"))
}

/// The cluster's private network (a user-defined bridge, so containers have addresses of
/// their own and reach each other by name).
#[derive(Debug, Clone)]
pub struct ContainerNetwork {
    name: String,
    gateway: IpAddr,
}

impl ContainerNetwork {
    /// Creates the network `name`, labelled with the cluster's run directory.
    pub async fn create(name: &str, run_dir: &Path) -> Result<Self> {
        let docker = engine()?;
        let action = format!("creating network {name}");
        docker
            .create_network(NetworkCreateRequest {
                name: name.to_string(),
                driver: Some("bridge".into()),
                labels: Some(HashMap::from([(
                    RUN_DIR_LABEL.to_string(),
                    run_dir.display().to_string(),
                )])),
                ipam: Some(Ipam::default()),
                ..Default::default()
            })
            .await
            .map_err(Error::docker(&action))?;
        let inspect = docker
            .inspect_network(name, None::<InspectNetworkOptions>)
            .await
            .map_err(Error::docker(format!("inspecting network {name}")))?;
        let gateway = inspect
            .ipam
            .and_then(|ipam| ipam.config)
            .into_iter()
            .flatten()
            .filter_map(|config| config.gateway)
            .find_map(|gateway| gateway.parse::<IpAddr>().ok().filter(IpAddr::is_ipv4));
        match gateway {
            Some(gateway) => Ok(Self {
                name: name.to_string(),
                gateway,
            }),
            None => {
                let _ = docker.remove_network(name).await;
                Err(Error::Docker {
                    action,
                    reason: "the network has no IPv4 gateway".into(),
                })
            }
        }
    }

    /// The network's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The host's address on the network: what the containers reach this host at (a server
    /// of the test process, such as the fake cloud, listens there).
    pub fn gateway(&self) -> IpAddr {
        self.gateway
    }

    /// Removes the network (its containers must be gone).
    pub async fn remove(&self) -> Result<()> {
        remove_network(&engine()?, &self.name).await
    }
}

async fn remove_network(docker: &Docker, name: &str) -> Result<()> {
    match docker.remove_network(name).await {
        Ok(()) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(Error::docker(format!("removing network {name}"))(e)),
    }
}

fn is_not_found(e: &testcontainers::bollard::errors::Error) -> bool {
    matches!(
        e,
        testcontainers::bollard::errors::Error::DockerResponseServerError {
            status_code: 404,
            ..
        }
    )
}

/// What can be done to a node's container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeAction {
    /// Power off: the container is killed (its agent and pods end at once, as on a machine
    /// losing power).
    PowerOff,
    /// Power on again: the container starts again, with its files (a reboot).
    PowerOn,
    /// Freeze every process of the node (a hung machine).
    Pause,
    /// Thaw them.
    Unpause,
    /// Cut the node off the cluster's network.
    Disconnect,
    /// Connect it again.
    Reconnect,
}

impl NodeAction {
    /// As a verb, for messages.
    pub fn verb(self) -> &'static str {
        match self {
            NodeAction::PowerOff => "powering off",
            NodeAction::PowerOn => "powering on",
            NodeAction::Pause => "pausing",
            NodeAction::Unpause => "unpausing",
            NodeAction::Disconnect => "disconnecting",
            NodeAction::Reconnect => "reconnecting",
        }
    }
}

/// Does `action` to `container` on `network`.
pub(crate) async fn act(container: &str, network: &str, action: NodeAction) -> Result<()> {
    let docker = engine()?;
    let what = format!("{} container {container}", action.verb());
    let result = match action {
        NodeAction::PowerOff => {
            docker
                .kill_container(
                    container,
                    Some(KillContainerOptionsBuilder::new().signal("SIGKILL").build()),
                )
                .await
        }
        NodeAction::PowerOn => {
            docker
                .start_container(container, None::<StartContainerOptions>)
                .await
        }
        NodeAction::Pause => docker.pause_container(container).await,
        NodeAction::Unpause => docker.unpause_container(container).await,
        NodeAction::Disconnect => {
            docker
                .disconnect_network(
                    network,
                    NetworkDisconnectRequest {
                        container: container.to_string(),
                        force: Some(true),
                    },
                )
                .await
        }
        NodeAction::Reconnect => {
            docker
                .connect_network(
                    network,
                    NetworkConnectRequest {
                        container: container.to_string(),
                        endpoint_config: Some(EndpointSettings::default()),
                    },
                )
                .await
        }
    };
    result.map_err(Error::docker(what))
}

/// The pid (in this host's PID namespace) of a running container's first process, whose
/// `/proc/<pid>/mountinfo` shows the container's mounts.
pub(crate) async fn init_pid(container: &str) -> Result<Option<u32>> {
    let inspect = engine()?
        .inspect_container(container, None)
        .await
        .map_err(Error::docker(format!("inspecting container {container}")))?;
    Ok(inspect
        .state
        .and_then(|s| s.pid)
        .filter(|pid| *pid > 0)
        .and_then(|pid| u32::try_from(pid).ok()))
}

/// What a command run in a container ([`exec`]) ended with.
#[derive(Debug, Clone)]
pub struct ContainerExec {
    /// Its exit code (`-1` when the engine did not report one).
    pub code: i64,
    /// Its standard output and standard error, interleaved as written.
    pub output: String,
}

impl ContainerExec {
    /// Whether it exited 0.
    pub fn success(&self) -> bool {
        self.code == 0
    }
}

/// Runs `argv` in the running `container` (`docker exec`) and waits for it to end.
pub async fn exec(container: &str, argv: &[&str]) -> Result<ContainerExec> {
    let docker = engine()?;
    let action = || format!("running {argv:?} in container {container}");
    let created = docker
        .create_exec(
            container,
            CreateExecOptions {
                attach_stdout: Some(true),
                attach_stderr: Some(true),
                cmd: Some(argv.to_vec()),
                ..Default::default()
            },
        )
        .await
        .map_err(Error::docker(action()))?;
    let mut output = String::new();
    if let StartExecResults::Attached {
        output: mut stream, ..
    } = docker
        .start_exec(&created.id, None)
        .await
        .map_err(Error::docker(action()))?
    {
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(Error::docker(action()))?;
            output.push_str(&String::from_utf8_lossy(&chunk.into_bytes()));
        }
    }
    let inspect = docker
        .inspect_exec(&created.id)
        .await
        .map_err(Error::docker(action()))?;
    Ok(ContainerExec {
        code: inspect.exit_code.unwrap_or(-1),
        output,
    })
}

/// Removes `containers` (killed if running, with their anonymous volumes) and then
/// `network`; missing ones are fine.
pub(crate) async fn remove_all(containers: &[String], network: Option<&str>) -> Result<()> {
    let docker = engine()?;
    let mut first_error = None;
    for container in containers {
        let removed = docker
            .remove_container(
                container,
                Some(
                    RemoveContainerOptionsBuilder::new()
                        .force(true)
                        .v(true)
                        .build(),
                ),
            )
            .await;
        match removed {
            Ok(()) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => {
                first_error
                    .get_or_insert(Error::docker(format!("removing container {container}"))(e));
            }
        }
    }
    if let Some(network) = network
        && let Err(e) = remove_network(&docker, network).await
    {
        first_error.get_or_insert(e);
    }
    first_error.map_or(Ok(()), Err)
}

/// [`remove_all`] without a runtime, for drops: `docker rm -f -v` of `containers`, then
/// `docker network rm network`, through the CLI, synchronously; errors are ignored (what is
/// left is labelled and goes with the next [`remove_stale`]).
pub(crate) fn remove_now(containers: &[String], network: &str) {
    let quiet = |command: &mut std::process::Command| {
        let _ = command
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    };
    quiet(
        std::process::Command::new("docker")
            .args(["rm", "-f", "-v"])
            .args(containers),
    );
    quiet(std::process::Command::new("docker").args(["network", "rm", network]));
}

/// A container or network of the backend, and the run directory its label names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelledObject {
    /// `container` or `network`.
    pub kind: &'static str,
    /// Its name.
    pub name: String,
    /// The run directory of the cluster it belongs to.
    pub run_dir: PathBuf,
}

/// Every container (running or not) and network labelled with [`RUN_DIR_LABEL`].
pub async fn labelled_objects() -> Result<Vec<LabelledObject>> {
    let docker = engine()?;
    let filters = HashMap::from([("label", vec![RUN_DIR_LABEL])]);
    let containers = docker
        .list_containers(Some(
            ListContainersOptionsBuilder::new()
                .all(true)
                .filters(&filters)
                .build(),
        ))
        .await
        .map_err(Error::docker("listing the backend's containers"))?;
    let networks = docker
        .list_networks(Some(
            ListNetworksOptionsBuilder::new().filters(&filters).build(),
        ))
        .await
        .map_err(Error::docker("listing the backend's networks"))?;
    let run_dir = |labels: Option<&HashMap<String, String>>| {
        labels.and_then(|l| l.get(RUN_DIR_LABEL)).map(PathBuf::from)
    };
    let containers = containers.into_iter().filter_map(|c| {
        let name = c
            .names
            .as_ref()?
            .first()?
            .trim_start_matches('/')
            .to_string();
        Some(LabelledObject {
            kind: "container",
            run_dir: run_dir(c.labels.as_ref())?,
            name,
        })
    });
    let networks = networks.into_iter().filter_map(|n| {
        Some(LabelledObject {
            kind: "network",
            run_dir: run_dir(n.labels.as_ref())?,
            name: n.name?,
        })
    });
    Ok(containers.chain(networks).collect())
}

/// Removes every container and network labelled with a run directory no live harness holds
/// (gone, or its lock free); returns their names.
pub async fn remove_stale() -> Result<Vec<String>> {
    let stale: Vec<LabelledObject> = labelled_objects()
        .await?
        .into_iter()
        .filter(|o| !control_plane::run_dir::is_held(&o.run_dir))
        .collect();
    let of_kind = |kind: &str| -> Vec<String> {
        stale
            .iter()
            .filter(|o| o.kind == kind)
            .map(|o| o.name.clone())
            .collect()
    };
    let containers = of_kind("container");
    remove_all(&containers, None).await?;
    let docker = engine()?;
    let networks = of_kind("network");
    for network in &networks {
        remove_network(&docker, network).await?;
    }
    Ok(containers.into_iter().chain(networks).collect())
}
