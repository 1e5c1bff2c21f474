//! The node agent: a kubelet simulation that registers a Node and runs the pods bound to it
//! through the pod [`runtime`](pod_runtime).
//!
//! What it does, as kubelet 1.20 does it:
//!
//! - **Registration** ([`registration`]): creates the Node with the hostname, OS, arch and
//!   zone/region labels (GA and `failure-domain.beta` keys), the
//!   `volumes.kubernetes.io/controller-managed-attach-detach` annotation, capacity =
//!   allocatable, addresses (`InternalIP` = [`NodeAgentConfig::node_ip`], `Hostname`) and
//!   nodeInfo (`kubeletVersion` v1.20.2); posts the Ready (and no-pressure) conditions every
//!   [`Timings::node_status_interval`].
//! - **Lease** ([`lease`]): `kube-node-lease/<node>`, renewed every 10 s, 40 s duration.
//! - **Pods** (`pod`): a watch on `spec.nodeName=<node>`, one worker per pod: volumes
//!   (emptyDir, hostPath, configMap, secret, downwardAPI, projected service-account token via
//!   TokenRequest + `kube-root-ca.crt` + namespace; only those a container or init container
//!   mounts or maps, as kubelet), the pod's `fsGroup` on them (`ownership`: group, group
//!   permissions, setgid directories; `fsGroupChangePolicy`), `subPath`/`subPathExpr` mounts
//!   opened inside their volume without following links out of it and bind-mounted from
//!   `volume-subpaths/` (a subPath leading out is refused: `CreateContainerConfigError`),
//!   environment (values, ConfigMap/Secret keys, `envFrom`, downward API fields and
//!   resources, `$(VAR)` expansion), command/args through the
//!   [`ImageMap`](pod_runtime::ImageMap), working directory, `runAsUser` (with
//!   `runAsGroup`), `supplementalGroups` and `fsGroup` as supplementary groups; init
//!   containers in order; startup/readiness/liveness probes (exec, httpGet,
//!   tcpSocket); restart policies with kubelet's back-off (immediate first restart, then
//!   [`Timings::backoff_initial`] doubling up to [`Timings::backoff_max`]) and
//!   `CrashLoopBackOff`; graceful deletion (SIGTERM, the shorter of the pod's grace periods
//!   but at least 2 s, SIGKILL, then the Pod is deleted with grace 0); the pod status
//!   (phase, conditions, container statuses with exit codes and restart counts, IPs, start
//!   time) through the status subresource; events (`Pulled`, `Created`, `Started`,
//!   `Killing`, `BackOff`, `Unhealthy`, `Failed`, `FailedMount`) with source `kubelet`.
//! - **CSI plugins** ([`csi`]): kubelet's plugin watcher on `<run_dir>/plugins_registry`
//!   (node-driver-registrar sockets): NodeGetInfo → the node's CSINode entry, topology
//!   labels and the `csi.volume.kubernetes.io/nodeid` annotation.
//! - **CSI volumes** ([`csi::VolumeManager`]): `persistentVolumeClaim` volumes bound to CSI
//!   PVs (inline `csi` volumes are refused with a FailedMount): the claim must be Bound and
//!   the driver registered; the volume (`kubernetes.io/csi/<driver>^<handle>`) goes into
//!   the Node's `status.volumesInUse` (the whole sorted list, patched on change; the
//!   heartbeat leaves it alone); with attachment required (CSIDriver `attachRequired`, true
//!   without a CSIDriver) the pod waits, retried every second, until the Node's
//!   `volumesAttached` lists it, and the VolumeAttachment's `attachmentMetadata` is the
//!   publish context; NodeStageVolume once per node (refcounted across pods) with the
//!   `STAGE_UNSTAGE_VOLUME` capability, then NodePublishVolume at kubelet's paths
//!   (`/var/lib/kubelet/…`, the run directory on this machine, `vol_data.json` next to
//!   them; pod info in the volume context with `podInfoOnMount`; secrets from the PV's
//!   secret refs), then the pod's `fsGroup` as the CSIDriver's `fsGroupPolicy` says
//!   (`ReadWriteOnceWithFSType` by default: RWO volumes with an `fsType` only; `File`;
//!   `None`); containers bind-mount the target. Block volumes (`volumeMode: Block`, in
//!   containers' `volumeDevices`) likewise, at kubelet 1.20's `volumeDevices` paths: a block
//!   capability, NodeStageVolume at the directory `…/csi/volumeDevices/staging/<pv>`,
//!   NodePublishVolume at the file `…/csi/volumeDevices/publish/<pv>/<pod uid>`, which the
//!   container gets at its `devicePath`; a claim's PV whose `volumeMode` does not match
//!   its use (`volumeMounts`/`volumeDevices`) fails with kubelet's message. Errors are
//!   `FailedMount` events with
//!   kubelet's messages, retried with back-off. On pod deletion, after the sandbox is gone:
//!   the pod's subPath bind mounts, NodeUnpublishVolume, NodeUnstageVolume when no pod uses
//!   the volume any more, then out of `volumesInUse`; a directory still holding a mount
//!   point is never removed (the unmount is retried). After a restart, published volumes
//!   (their `vol_data.json` and a mount point at the target) are reconstructed, not
//!   published again; orphaned pods' subPath mounts and volumes are unmounted before their
//!   directories go. Claims with the
//!   `FileSystemResizePending` condition get NodeExpandVolume (drivers with
//!   `EXPAND_VOLUME`) and their status capacity. `<run_dir>/pods` and `<run_dir>/plugins`
//!   are shared mount points, so node plugin pods' Bidirectional mounts reach the host;
//!   hostPath volumes under `/var/lib/kubelet` are mapped into the run directory (see
//!   [`layout`] for where everything lives). The volume manager's module
//!   (`csi/volumes/`) lists its files in the order a volume goes through them.
//! - **In-cluster access**: containers get `KUBERNETES_SERVICE_HOST/PORT` pointing at the
//!   real API server (there is no service proxy) and, through the volume the ServiceAccount
//!   admission plugin adds (the legacy token Secret in 1.20, the projected `kube-api-access`
//!   volume from 1.21), a token, `ca.crt` and `namespace` at
//!   `/var/run/secrets/kubernetes.io/serviceaccount`.
//! - **Re-adoption**: on start, sandboxes running in the run directory are matched to pods
//!   by UID and taken over (same processes, restart counts and times kept); those of pods
//!   that no longer exist are removed. Stopping the agent leaves pods running.
//!
//! # Networking
//!
//! Pods share the host's network namespace (the runtime creates none): every pod's `podIP`
//! is its node's address, as with `hostNetwork: true`. Container ports are host ports, so
//! two pods listening on one port collide, and probes connect to `<node_ip>:<port>`.
//!
//! # Not served
//!
//! The kubelet API ([`kubelet`]: logs, exec, attach, port-forward, stats) is served when
//! [`NodeAgentConfig::kubelet_api`] is set (the embedded cluster sets it); without it
//! `kubectl logs/exec` fail, and [`exec`] and [`logs`] still work from any process through
//! the run directory. ConfigMap/Secret updates are not propagated into running pods'
//! volumes; termination messages, lifecycle hooks, resource limits and
//! `activeDeadlineSeconds` are not implemented.
//!
//! # Identity
//!
//! Give the agent a kubeconfig for `system:node:<name>` in `system:nodes` (see
//! [`ControlPlane::write_kubeconfig`](control_plane::ControlPlane::write_kubeconfig)):
//! the Node authorizer and NodeRestriction then hold it to what a kubelet may do.
//!
//! ```no_run
//! # async fn demo(cp: &control_plane::ControlPlane) -> node_agent::Result<()> {
//! use control_plane::ClientIdentity;
//! use node_agent::{NodeAgent, NodeAgentConfig};
//!
//! let kubeconfig = std::path::Path::new("/tmp/run/node-a/kubeconfig");
//! let identity = ClientIdentity {
//!     user: "system:node:node-a".into(),
//!     group: Some("system:nodes".into()),
//! };
//! cp.write_kubeconfig(kubeconfig, &identity).expect("kubeconfig");
//! let port = cp.ports().apiserver;
//! let config = NodeAgentConfig::new("node-a", kubeconfig, "/tmp/run/node-a", port, cp.ca_file());
//! // Runs until Ctrl-C (a failure to wait for it stops the agent too).
//! let shutdown = async {
//!     let _ = tokio::signal::ctrl_c().await;
//! };
//! NodeAgent::run(config, shutdown).await
//! # }
//! ```

mod config;
pub mod csi;
mod error;
pub mod events;
mod inspect;
pub mod kubelet;
pub mod layout;
pub mod lease;
mod mounts;
mod ownership;
mod pod;
pub mod registration;

use kube_support::error::IoContext;
use std::future::Future;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Node, Pod};
use kube::api::Api;

pub use config::{Capacity, KUBELET_PORT, NodeAgentConfig, Timings};
pub use error::{Error, Result};
pub use inspect::{exec, logs};
pub use kubelet::KubeletApiConfig;
pub use layout::pod_dir;
pub use pod::{BackOff, phase};

pub use pod_runtime::ExecOutput;
use pod_runtime::{Runtime, RuntimeConfig};

/// How often mounted volumes are checked for a pending file-system resize.
const EXPAND_INTERVAL: std::time::Duration = std::time::Duration::from_secs(3);

/// The node agent (see the module docs).
#[derive(Debug)]
pub struct NodeAgent;

impl NodeAgent {
    /// Registers the node, then renews its Lease, posts its status and runs its pods until
    /// `shutdown` completes. On start, sandboxes running in the run directory are re-adopted;
    /// on shutdown, pods keep running (they end with the runtime's lifeline, or when a later
    /// agent deletes them).
    pub async fn run(
        mut config: NodeAgentConfig,
        shutdown: impl Future<Output = ()>,
    ) -> Result<()> {
        config.validate()?;
        // Bound first: the Node advertises the port.
        let kubelet_listener = match &mut config.kubelet_api {
            Some(api) => {
                let listener = kubelet::bind(config.node_ip, api.port).await?;
                api.port = listener
                    .local_addr()
                    .map_err(Error::io(
                        "reading the address of",
                        "the kubelet API socket",
                    ))?
                    .port();
                Some(listener)
            }
            None => None,
        };
        std::fs::create_dir_all(&config.run_dir).map_err(Error::io("creating", &config.run_dir))?;
        let client = control_plane::client_from_kubeconfig(&config.kubeconfig)
            .await
            .map_err(|e| Error::Client {
                path: config.kubeconfig.clone(),
                source: Box::new(e),
            })?;
        let mut runtime_config = RuntimeConfig::new(config.runtime_dir());
        if let Some(helper) = &config.sandbox_helper {
            runtime_config.helper = helper.clone();
        }
        runtime_config.lifeline = config.lifeline.clone();
        let (runtime, adopted) = Runtime::adopt(runtime_config)?;
        let http = reqwest::Client::builder()
            .danger_accept_invalid_certs(true)
            .build()
            .map_err(|e| Error::Client {
                path: config.kubeconfig.clone(),
                source: Box::new(e),
            })?;
        let nodes: Api<Node> = Api::all(client.clone());
        // Registered CSI drivers, for the volume manager to find.
        let csi_drivers = csi::CsiDrivers::default();
        let plugin_paths = csi::PluginPaths::new(&config.run_dir);
        let pods_dir = layout::pods_dir(&config.run_dir);
        for dir in [&plugin_paths.registry, &plugin_paths.plugins, &pods_dir] {
            std::fs::create_dir_all(dir).map_err(Error::io("creating", dir))?;
        }
        // Shared, so mounts a node plugin pod makes below them (Bidirectional propagation)
        // reach the host and the other pods.
        for dir in [&pods_dir, &plugin_paths.plugins] {
            mounts::make_shared(dir).map_err(Error::io("making a shared mount point of", dir))?;
        }
        let volumes = Arc::new(csi::VolumeManager::new(
            client.clone(),
            &config.node_name,
            plugin_paths.clone(),
            csi_drivers.clone(),
        ));
        volumes.reconstruct();
        let store = kubelet::PodStore::default();
        let ctx = Arc::new(pod::Context {
            client: client.clone(),
            config: config.clone(),
            runtime,
            recorder: events::Recorder::new(client.clone(), &config.node_name),
            http,
            csi: volumes.clone(),
            store: store.clone(),
        });
        tokio::pin!(shutdown);
        let node = tokio::select! {
            node = register_until_done(&nodes, &config) => node,
            () = &mut shutdown => return Ok(()),
        };
        tracing::info!(node = %config.node_name, adopted = adopted.len(), "node agent running");
        let status = node.status.clone();
        let plugin_watcher = csi::watch(
            client.clone(),
            config.node_name.clone(),
            plugin_paths,
            csi_drivers,
        );
        let server = kubelet::Server {
            node: config.node_name.clone(),
            run_dir: config.run_dir.clone(),
            runtime: ctx.runtime.clone(),
            pods: store.clone(),
            auth: kubelet::Authorizer::new(client.clone(), &config.node_name),
            client: client.clone(),
            csi: volumes.clone(),
        };
        let kubelet_api = async {
            match (kubelet_listener, &config.kubelet_api) {
                (Some(listener), Some(api)) => {
                    tracing::info!(node = %config.node_name, port = api.port, "serving the kubelet API");
                    match kubelet::serve(listener, api, &config.cluster_ca, server).await {
                        Ok(never) => match never {},
                        Err(e) => e,
                    }
                }
                _ => std::future::pending().await,
            }
        };
        tokio::select! {
            e = kubelet_api => return Err(e.into()),
            () = plugin_watcher => {}
            () = registration::heartbeat(nodes, config.clone(), status) => {}
            () = lease::renew_forever(client, config.clone(), node) => {}
            () = volumes.report_in_use() => {}
            () = volumes.expand_forever(EXPAND_INTERVAL) => {}
            () = pod::run(ctx, adopted) => {}
            () = &mut shutdown => {}
        }
        tracing::info!(node = %config.node_name, "node agent stopped; pods keep running");
        Ok(())
    }
}

/// Registers the node, retrying (as kubelet does) until it works.
async fn register_until_done(nodes: &Api<Node>, config: &NodeAgentConfig) -> Node {
    let mut delay = std::time::Duration::from_millis(100);
    loop {
        match registration::register(nodes, config).await {
            Ok(node) => return node,
            Err(e) => {
                tracing::warn!(node = %config.node_name, error = %error_chain(&e), "node registration failed; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(std::time::Duration::from_secs(7));
            }
        }
    }
}

/// A pod's containers, then its init containers (the containers kubelet visits, ephemeral
/// ones aside).
pub(crate) fn pod_containers(pod: &Pod) -> impl Iterator<Item = &Container> {
    pod.spec.iter().flat_map(|spec| {
        spec.containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
    })
}

pub(crate) use kube_support::error::error_chain;
