//! The embedded cluster's figures: boot time to a control plane with 3 Ready nodes (binaries
//! cached), pod creation → Running latency (one pod at a time, then a burst), and the peak
//! memory of the whole cluster (sum of the resident memory of every process of the cluster:
//! control plane, node agents, sandboxes and the pods' processes), sampled every 100 ms.
//!
//! `cargo bench -p cluster --bench cluster_boot [-- --boots N --pods N]`
//!
//! Targets (issue 4): boot ≤ 10 s, p50 creation → Running ≤ 1 s, peak memory ≤ 1.5 GiB.

#[path = "support/memory.rs"]
mod memory;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use cluster::{EmbeddedCluster, EmbeddedOptions};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use memory::MemorySampler;

struct Args {
    boots: usize,
    pods: usize,
}

fn args() -> anyhow::Result<Args> {
    let mut parsed = Args { boots: 3, pods: 30 };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        // `cargo bench` adds `--bench`; other flags are not ours.
        let target = match arg.as_str() {
            "--boots" => &mut parsed.boots,
            "--pods" => &mut parsed.pods,
            _ => continue,
        };
        let value = args.next().context(format!("{arg} needs a number"))?;
        *target = value.parse().with_context(|| format!("{arg} {value:?}"))?;
    }
    anyhow::ensure!(
        parsed.boots > 0 && parsed.pods > 0,
        "--boots and --pods must be positive"
    );
    Ok(parsed)
}

fn secs(d: Duration) -> String {
    format!("{:>6.2} s", d.as_secs_f64())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn pod(name: &str) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": name, "labels": { "bench": "latency" } },
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{ "name": "app", "image": "busybox:1.36", "command": ["sleep", "3600"] }]
        }
    }))?)
}

/// Creates `names` (all at once) and returns each pod's create-call → Running latency.
async fn create_and_time(pods: &Api<Pod>, names: &[String]) -> anyhow::Result<Vec<Duration>> {
    let mut running: BTreeMap<String, Instant> = BTreeMap::new();
    let config = watcher::Config::default().labels("bench=latency");
    let mut events = watcher(pods.clone(), config).boxed();
    // The watch is established (initial list done) before the first create.
    while let Some(event) = events.next().await {
        if matches!(event?, watcher::Event::InitDone) {
            break;
        }
    }
    let mut created = BTreeMap::new();
    for name in names {
        let start = Instant::now();
        pods.create(&PostParams::default(), &pod(name)?).await?;
        created.insert(name.clone(), start);
    }
    let wait = async {
        while running.len() < names.len() {
            let Some(event) = events.next().await else {
                anyhow::bail!("the watch ended");
            };
            if let watcher::Event::Apply(p) = event? {
                let name = p.metadata.name.clone().unwrap_or_default();
                let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
                if created.contains_key(&name) && phase == Some("Running") {
                    running.entry(name).or_insert_with(Instant::now);
                }
            }
        }
        Ok(())
    };
    tokio::time::timeout(Duration::from_secs(120), wait)
        .await
        .context("pods not Running after 120 s")??;
    Ok(names
        .iter()
        .map(|n| running[n].duration_since(created[n]))
        .collect())
}

fn print_latencies(label: &str, mut latencies: Vec<Duration>) {
    latencies.sort();
    println!(
        "{label:<28} n={:<3} p50 {}  p99 {}  max {}",
        latencies.len(),
        secs(percentile(&latencies, 50.0)),
        secs(percentile(&latencies, 99.0)),
        secs(*latencies.last().unwrap_or(&Duration::ZERO)),
    );
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = args()?;
    let binaries = tokio::task::spawn_blocking(control_plane::Binaries::locate).await??;
    let options = EmbeddedOptions {
        nodes: 3,
        binaries: Some(binaries),
        node_agent: Some(cluster::embedded::locate_node_agent()?),
        ..EmbeddedOptions::default()
    };
    println!(
        "embedded cluster, 3 nodes, {} boot(s), {} pods",
        args.boots, args.pods
    );
    println!(
        "{:>5} {:>14} {:>14} {:>10}",
        "boot", "control plane", "nodes Ready", "total"
    );
    let mut totals = Vec::new();
    for i in 1..args.boots {
        let cluster = EmbeddedCluster::start(options.clone()).await?;
        let t = cluster.timings();
        println!(
            "{i:>5} {:>14} {:>14} {:>10}",
            secs(t.control_plane),
            secs(t.nodes),
            secs(t.total)
        );
        totals.push(t.total);
        cluster.stop().await?;
    }

    // The last boot also serves the pod latencies and the memory figure; its run directory is
    // named here so that the sampler watches the boot too. It lies under the base directory:
    // should the bench fail or be killed half-way, the next cluster start finds it stale and
    // cleans it, unmounting the node agents' shared mount points (a directory elsewhere would
    // keep them in the host's mount table).
    let run_dir = options
        .base_dir
        .join(format!("cluster-bench-{}", std::process::id()));
    let mut sampler = MemorySampler::start(run_dir.clone());
    let cluster = EmbeddedCluster::start(EmbeddedOptions {
        run_dir: Some(run_dir),
        ..options
    })
    .await?;
    let t = cluster.timings();
    println!(
        "{:>5} {:>14} {:>14} {:>10}",
        args.boots,
        secs(t.control_plane),
        secs(t.nodes),
        secs(t.total)
    );
    totals.push(t.total);
    totals.sort();
    println!(
        "boot to 3 Ready nodes: median {}  (target ≤ 10 s)",
        secs(percentile(&totals, 50.0))
    );

    let handle = cluster.cluster().await?;
    let ns = handle.namespace("bench").await?;
    let pods: Api<Pod> = ns.api();
    let mut one_by_one = Vec::new();
    for i in 0..args.pods {
        one_by_one.extend(create_and_time(&pods, &[format!("seq-{i}")]).await?);
    }
    print_latencies("create → Running, one by one", one_by_one);
    let burst: Vec<String> = (0..args.pods).map(|i| format!("burst-{i}")).collect();
    let started = Instant::now();
    let latencies = create_and_time(&pods, &burst).await?;
    let burst_total = started.elapsed();
    print_latencies(
        &format!("create → Running, burst of {}", args.pods),
        latencies,
    );
    println!(
        "burst: all {} Running after {}",
        args.pods,
        secs(burst_total)
    );
    let cluster_processes = cluster.pids().await.len();
    let peak = sampler.peak_mib();
    println!(
        "peak memory (RSS, {} cluster processes + sandboxes and pods): {peak:.0} MiB  (target ≤ 1536 MiB)",
        cluster_processes
    );
    ns.cleanup().await?;
    cluster.stop().await?;
    Ok(())
}
