//! The three backends side by side, in one run: boot time to every node Ready (control plane,
//! nodes, total), pod creation → Running (one pod per node, at once), and memory: the peak
//! over the boot and pods, and the steady resident memory once the pods run (every process
//! of the cluster and its pods, see `support/memory.rs`). Binaries and the containers
//! backends' images are located (or built) before any clock starts. The kind backend's
//! clusters have a control-plane node besides the N workers (kubeadm's static pods run
//! there); its "control plane" time runs to `kubeadm init` done.
//!
//! `cargo bench -p cluster --bench backends [-- --nodes N --boots N]`

#[path = "support/memory.rs"]
mod memory;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use cluster::{
    Cluster, ContainerCluster, ContainerOptions, EmbeddedCluster, EmbeddedOptions, KindCluster,
    KindOptions,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use memory::{MemorySampler, cluster_rss_kib};

struct Args {
    nodes: usize,
    boots: usize,
}

fn args() -> anyhow::Result<Args> {
    let mut parsed = Args { nodes: 3, boots: 1 };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let target = match arg.as_str() {
            "--nodes" => &mut parsed.nodes,
            "--boots" => &mut parsed.boots,
            _ => continue,
        };
        let value = args.next().context(format!("{arg} needs a number"))?;
        *target = value.parse().with_context(|| format!("{arg} {value:?}"))?;
    }
    anyhow::ensure!(
        parsed.nodes > 0 && parsed.boots > 0,
        "--nodes and --boots must be positive"
    );
    Ok(parsed)
}

/// One boot's figures.
struct Figures {
    control_plane: Duration,
    nodes: Duration,
    total: Duration,
    pods_running: Duration,
    peak_mib: f64,
    steady_mib: f64,
}

/// The backends compared.
#[derive(Debug, Clone, Copy)]
enum Backend {
    Embedded,
    Containers,
    Kind,
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Backend::Embedded => "embedded",
            Backend::Containers => "containers",
            Backend::Kind => "kind",
        }
    }

    /// The image of the bench's pods: the embedded and containers backends map `busybox` to
    /// a host binary; kind's nodes run real images (the local node image's busybox).
    fn pod_image(self) -> &'static str {
        match self {
            Backend::Kind => "localhost/openstack-csi-conformance/busybox:bookworm",
            _ => "busybox",
        }
    }
}

/// The clusters a bench boots, for a uniform stop.
enum Booted {
    Embedded(Box<EmbeddedCluster>),
    Containers(Box<ContainerCluster>),
    Kind(Box<KindCluster>),
}

impl Booted {
    async fn stop(self) -> anyhow::Result<()> {
        match self {
            Booted::Embedded(c) => c.stop().await?,
            Booted::Containers(c) => c.stop().await?,
            Booted::Kind(c) => c.stop().await?,
        }
        Ok(())
    }
}

fn pod_on(node: &str, image: &str) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": format!("bench-{node}") },
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 1,
            "containers": [{ "name": "app", "image": image, "imagePullPolicy": "Never",
                             "command": ["sleep", "3600"] }]
        }
    }))?)
}

/// Creates a pod on every node at once; returns when all run.
async fn pods_running(cluster: &Cluster, image: &str) -> anyhow::Result<Duration> {
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    let started = Instant::now();
    for node in cluster.node_names() {
        pods.create(&PostParams::default(), &pod_on(&node, image)?)
            .await?;
    }
    for node in cluster.node_names() {
        kube_support::wait::wait_for(
            &pods,
            &format!("bench-{node}"),
            kube::runtime::conditions::is_pod_running(),
            Duration::from_secs(120),
        )
        .await?;
    }
    Ok(started.elapsed())
}

async fn boot(
    backend: Backend,
    nodes: usize,
    base: &std::path::Path,
    kind_image: &cluster::kind::KindNodeImage,
) -> anyhow::Result<Figures> {
    let node_agent = cluster::embedded::locate_node_agent()?;
    let zones = vec!["zone-a".to_string(), "zone-b".to_string()];
    // The run directory is not known before the start: sample everything naming the base.
    let mut sampler = MemorySampler::start(base.to_path_buf());
    let (booted, timings) = match backend {
        Backend::Embedded => {
            let c = EmbeddedCluster::start(EmbeddedOptions {
                nodes,
                zones,
                base_dir: base.to_path_buf(),
                node_agent: Some(node_agent),
                ..Default::default()
            })
            .await?;
            let t = c.timings();
            (Booted::Embedded(Box::new(c)), t)
        }
        Backend::Containers => {
            let c = ContainerCluster::start(ContainerOptions {
                nodes,
                zones,
                base_dir: base.to_path_buf(),
                node_agent: Some(node_agent),
                ..Default::default()
            })
            .await?;
            let t = c.timings();
            (Booted::Containers(Box::new(c)), t)
        }
        Backend::Kind => {
            let c = KindCluster::start(KindOptions {
                nodes,
                zones,
                base_dir: base.to_path_buf(),
                image: Some(kind_image.clone()),
                ..Default::default()
            })
            .await?;
            let t = c.timings();
            (Booted::Kind(Box::new(c)), t)
        }
    };
    let cluster = match &booted {
        Booted::Embedded(c) => c.cluster().await?,
        Booted::Containers(c) => c.cluster().await?,
        Booted::Kind(c) => c.cluster().await?,
    };
    let pods_running = pods_running(&cluster, backend.pod_image()).await?;
    // Steady state: the median of a few samples once the pods run.
    let mut samples = Vec::new();
    for _ in 0..10 {
        samples.push(cluster_rss_kib(base));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    samples.sort_unstable();
    let steady_mib = samples[samples.len() / 2] as f64 / 1024.0;
    let peak_mib = sampler.peak_mib();
    booted.stop().await?;
    Ok(Figures {
        control_plane: timings.control_plane,
        nodes: timings.nodes,
        total: timings.total,
        pods_running,
        peak_mib,
        steady_mib,
    })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = args()?;
    // Found (or built) before any clock starts: the control-plane binaries and the image.
    tokio::task::spawn_blocking(control_plane::Binaries::locate).await??;
    cluster::containers::node_image().await?;
    // The local node image, whose busybox the pods run.
    let kind_image = cluster::kind::local_kind_node_image().await?;
    let base = tempfile::Builder::new().prefix("bench-").tempdir_in(
        std::env::var_os("TMPDIR").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from),
    )?;
    println!(
        "{} nodes per cluster, {} boot(s) per backend; memory: resident, every process of the cluster and its pods",
        args.nodes, args.boots
    );
    println!(
        "{:<11} {:>5} {:>14} {:>12} {:>10} {:>14} {:>12} {:>14}",
        "backend",
        "boot",
        "control plane",
        "nodes Ready",
        "total",
        "pods Running",
        "peak MiB",
        "steady MiB"
    );
    for backend in [Backend::Embedded, Backend::Containers, Backend::Kind] {
        for i in 1..=args.boots {
            let f = boot(backend, args.nodes, base.path(), &kind_image).await?;
            println!(
                "{:<11} {:>5} {:>12.2} s {:>10.2} s {:>8.2} s {:>12.2} s {:>12.0} {:>14.0}",
                backend.name(),
                i,
                f.control_plane.as_secs_f64(),
                f.nodes.as_secs_f64(),
                f.total.as_secs_f64(),
                f.pods_running.as_secs_f64(),
                f.peak_mib,
                f.steady_mib
            );
        }
    }
    Ok(())
}
