//! `control-plane`: a control plane (etcd, kube-apiserver, kube-controller-manager,
//! kube-scheduler) in the foreground, reachable from other machines, with the credentials of
//! the nodes that will join it. The containers backend runs it as the control-plane
//! container's command (see `cluster::containers`).
//!
//! - The apiserver listens on and advertises this machine's address on the route to
//!   `--advertise-route-to` (the container's address on its network), or `--advertise-address`.
//! - For each `--node NAME=HOSTNAME` it writes `<nodes-dir>/NAME/kubeconfig`
//!   (`system:node:NAME` in `system:nodes`) and the kubelet API's serving certificate for
//!   `HOSTNAME` (`kubelet.crt`, `kubelet.key`), both from the cluster CA.
//! - Once every component is ready it writes `--ready-file` (JSON: `api_url`, `kubeconfig`,
//!   `ca_file`) and logs `control plane ready`.
//! - SIGTERM or SIGINT stops the components; the run directory (logs, certificates) is kept
//!   for whoever started it.
//!
//! Binaries: `$KUBEBUILDER_ASSETS`, as for every control plane of the harness.

use std::net::IpAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use control_plane::{ClientIdentity, ControlPlane, write_serving_pair};
use serde::Serialize;
use tokio::signal::unix::{SignalKind, signal};

/// A control plane in the foreground, for other machines (see the crate docs).
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// The control plane's run directory (data, certificates, kubeconfigs, logs).
    #[arg(long)]
    run_dir: PathBuf,
    /// Listen on and advertise this machine's address on the route to this address.
    #[arg(long, conflicts_with = "advertise_address")]
    advertise_route_to: Option<IpAddr>,
    /// Listen on and advertise this address (default 127.0.0.1).
    #[arg(long)]
    advertise_address: Option<IpAddr>,
    /// A node that will join, `NAME=HOSTNAME` (repeatable): its kubeconfig and kubelet
    /// serving certificate (valid for HOSTNAME) go to `<nodes-dir>/NAME/`.
    #[arg(long = "node", value_parser = parse_node)]
    nodes: Vec<(String, String)>,
    /// Where the nodes' credentials go.
    #[arg(long)]
    nodes_dir: Option<PathBuf>,
    /// Written once the control plane is ready.
    #[arg(long)]
    ready_file: PathBuf,
    /// An extra kube-apiserver flag (repeatable).
    #[arg(long = "apiserver-arg")]
    apiserver_args: Vec<String>,
    /// An extra kube-controller-manager flag (repeatable).
    #[arg(long = "controller-manager-arg")]
    controller_manager_args: Vec<String>,
}

fn parse_node(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, host)) if !name.is_empty() && !host.is_empty() => {
            Ok((name.into(), host.into()))
        }
        _ => Err(format!("{text:?} is not of the form NAME=HOSTNAME")),
    }
}

/// What `--ready-file` holds.
#[derive(Debug, Serialize)]
struct Ready {
    api_url: String,
    kubeconfig: PathBuf,
    ca_file: PathBuf,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    kube_support::telemetry::init_with_default("info");
    let args = Args::parse();
    let advertise = match (args.advertise_route_to, args.advertise_address) {
        (Some(peer), _) => control_plane::net::route_source(peer)
            .with_context(|| format!("finding this machine's address on the route to {peer}"))?,
        (None, Some(address)) => address,
        (None, None) => IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
    };
    let mut builder = ControlPlane::builder()
        .run_dir(&args.run_dir)
        .keep_run_dir(true)
        .advertise_address(advertise);
    for arg in &args.apiserver_args {
        builder = builder.apiserver_arg(arg);
    }
    for arg in &args.controller_manager_args {
        builder = builder.controller_manager_arg(arg);
    }
    let control_plane = builder
        .start()
        .await
        .context("starting the control plane")?;

    if !args.nodes.is_empty() {
        let nodes_dir = args
            .nodes_dir
            .as_ref()
            .context("--node needs --nodes-dir")?;
        for (name, hostname) in &args.nodes {
            let dir = nodes_dir.join(name);
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {dir:?}"))?;
            control_plane.write_kubeconfig(
                &dir.join("kubeconfig"),
                &ClientIdentity {
                    user: format!("system:node:{name}"),
                    group: Some("system:nodes".into()),
                },
            )?;
            let pair = control_plane.ca().serving_cert(
                &format!("system:node:{name}"),
                std::slice::from_ref(hostname),
            )?;
            write_serving_pair(&dir, "kubelet", &pair)?;
        }
    }

    let ready = Ready {
        api_url: control_plane.api_url().to_string(),
        kubeconfig: control_plane.kubeconfig().to_path_buf(),
        ca_file: control_plane.ca_file().to_path_buf(),
    };
    let partial = args.ready_file.with_extension("partial");
    std::fs::write(&partial, serde_json::to_vec_pretty(&ready)?)
        .with_context(|| format!("writing {partial:?}"))?;
    std::fs::rename(&partial, &args.ready_file)
        .with_context(|| format!("writing {:?}", args.ready_file))?;
    tracing::info!(api = %ready.api_url, "control plane ready");

    let mut terminate = signal(SignalKind::terminate()).context("handling SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("handling SIGINT")?;
    tokio::select! {
        _ = terminate.recv() => {}
        _ = interrupt.recv() => {}
    }
    tracing::info!("stopping the control plane");
    control_plane
        .shutdown()
        .await
        .context("stopping the control plane")
}
