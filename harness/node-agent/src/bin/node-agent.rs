//! `node-agent`: one simulated node (a kubelet stand-in) as its own process. See
//! `node_agent` for what it does.
//!
//! It stops cleanly on SIGTERM or SIGINT and leaves its pods running, so a restarted agent on
//! the same run directory re-adopts them. Pods end with the harness run through the
//! lifeline the parent hands down in `HARNESS_LIFELINE_FD`.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;
use node_agent::{Capacity, KubeletApiConfig, NodeAgent, NodeAgentConfig, Timings};
use pod_runtime::{ImageMap, Lifeline};
use tokio::signal::unix::{SignalKind, signal};

/// A simulated Kubernetes node: registers a Node and runs the pods bound to it.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// The Node's name.
    #[arg(long, env = "NODE_NAME")]
    node_name: String,
    /// The node's zone (topology.kubernetes.io/zone).
    #[arg(long)]
    zone: Option<String>,
    /// The node's region (topology.kubernetes.io/region).
    #[arg(long)]
    region: Option<String>,
    /// An extra Node label, `key=value` (repeatable).
    #[arg(long = "label", value_parser = parse_pair)]
    labels: Vec<(String, String)>,
    /// The kubeconfig to reach the API server with (normally `system:node:<name>`).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: PathBuf,
    /// The node's run directory (sandboxes and volumes).
    #[arg(long)]
    run_dir: PathBuf,
    /// An image mapped to a host binary, `image=binary` (repeatable).
    #[arg(long = "image", value_parser = parse_pair)]
    images: Vec<(String, String)>,
    /// An environment variable every container of this node's pods gets, `NAME=value`
    /// (repeatable; the container's own `env` wins): e.g. `OS_METADATA_URL`, the stand-in
    /// for the per-instance OpenStack metadata service.
    #[arg(long = "pod-env", value_parser = parse_pair)]
    pod_env: Vec<(String, String)>,
    /// The cluster CA certificate.
    #[arg(long)]
    cluster_ca: PathBuf,
    /// KUBERNETES_SERVICE_HOST for containers: the API server's address.
    #[arg(long, default_value = "127.0.0.1")]
    api_server_host: String,
    /// KUBERNETES_SERVICE_PORT for containers: the API server's port.
    #[arg(long)]
    api_server_port: u16,
    /// The node's address (InternalIP, hostIP and every podIP).
    #[arg(long, default_value = "127.0.0.1", conflicts_with = "node_ip_route_to")]
    node_ip: IpAddr,
    /// Take the node's address from the route to this address (the node's own address on
    /// the network that reaches it), instead of `--node-ip`: a node in a container whose
    /// address is only known inside it.
    #[arg(long)]
    node_ip_route_to: Option<IpAddr>,
    /// The Node's `Hostname` address (default: the node's name).
    #[arg(long)]
    hostname_address: Option<String>,
    /// CPU capacity.
    #[arg(long, default_value = "4")]
    cpu: String,
    /// Memory capacity.
    #[arg(long, default_value = "8Gi")]
    memory: String,
    /// Maximum pods.
    #[arg(long, default_value_t = 110)]
    max_pods: u32,
    /// First restart back-off of crashing containers, in seconds (kubelet: 10).
    #[arg(long, default_value_t = 10.0)]
    backoff_initial_seconds: f64,
    /// Longest restart back-off, in seconds (kubelet: 300).
    #[arg(long, default_value_t = 300.0)]
    backoff_max_seconds: f64,
    /// The pod-sandbox helper (default: $POD_SANDBOX_BIN, else next to this binary).
    #[arg(long)]
    sandbox_helper: Option<PathBuf>,
    /// The kubelet API's serving certificate (PEM, from the cluster CA); without it no
    /// kubelet API is served.
    #[arg(long, requires = "tls_private_key_file")]
    tls_cert_file: Option<PathBuf>,
    /// The serving certificate's key (PEM).
    #[arg(long, requires = "tls_cert_file")]
    tls_private_key_file: Option<PathBuf>,
    /// The kubelet API's port (0: a free one; the Node advertises it).
    #[arg(long, default_value_t = 0)]
    kubelet_port: u16,
}

fn parse_pair(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() && !v.is_empty() => Ok((k.into(), v.into())),
        _ => Err(format!("{text:?} is not of the form key=value")),
    }
}

fn seconds(what: &str, value: f64) -> anyhow::Result<Duration> {
    if !(value.is_finite() && value > 0.0) {
        bail!("{what} must be a positive number of seconds, not {value}");
    }
    Ok(Duration::from_secs_f64(value))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    kube_support::telemetry::init_with_default("info");
    let args = Args::parse();
    let mut images = ImageMap::new();
    for (image, binary) in &args.images {
        images.insert(image.clone(), binary);
    }
    let mut config = NodeAgentConfig::new(
        &args.node_name,
        &args.kubeconfig,
        &args.run_dir,
        args.api_server_port,
        &args.cluster_ca,
    );
    config.zone = args.zone;
    config.region = args.region;
    config.labels = args.labels.into_iter().collect::<BTreeMap<_, _>>();
    config.images = images;
    config.pod_env = args.pod_env;
    config.node_ip = match args.node_ip_route_to {
        Some(peer) => control_plane::net::route_source(peer)
            .with_context(|| format!("finding this node's address on the route to {peer}"))?,
        None => args.node_ip,
    };
    config.hostname_address = args.hostname_address;
    config.api_server_service_host = args.api_server_host;
    config.capacity = Capacity {
        cpu: args.cpu,
        memory: args.memory,
        pods: args.max_pods,
        ..Capacity::default()
    };
    config.timings = Timings {
        backoff_initial: seconds("--backoff-initial-seconds", args.backoff_initial_seconds)?,
        backoff_max: seconds("--backoff-max-seconds", args.backoff_max_seconds)?,
        ..Timings::default()
    };
    config.sandbox_helper = args.sandbox_helper;
    config.kubelet_api =
        args.tls_cert_file
            .zip(args.tls_private_key_file)
            .map(|(serving_cert, serving_key)| KubeletApiConfig {
                serving_cert,
                serving_key,
                port: args.kubelet_port,
            });
    config.lifeline = Lifeline::from_env().context("reading the lifeline")?;
    if config.lifeline.is_none() {
        tracing::warn!(
            "no lifeline ({}): pods outlive the harness unless stopped",
            pod_runtime::LIFELINE_FD_ENV
        );
    }

    let mut terminate = signal(SignalKind::terminate()).context("handling SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("handling SIGINT")?;
    let shutdown = async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
    };
    NodeAgent::run(config, shutdown)
        .await
        .context("the node agent failed")
}
