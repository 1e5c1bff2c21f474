//! Exec round trips through the apiserver to a node agent's kubelet API, on a 1-node
//! embedded cluster: `Cluster::exec` of `true` (kube-rs, WebSocket `v4.channel.k8s.io`: the
//! connection, TLS to the apiserver, its TLS to the node, the command in the container, the
//! exit status back), then the same with `echo` of 64 KiB, then `kubectl exec` (v1.20,
//! SPDY/3.1; includes starting kubectl), and for comparison the command started directly
//! in the node's runtime (no API at all) and an exec with kube's default client (whose new
//! connections wait ~40 ms on Nagle's algorithm after the TLS handshake; `Cluster::exec`
//! uses a client with `TCP_NODELAY`). Prints p50/p90/p99/max of each.
//!
//! `cargo bench -p cluster --bench exec_latency [-- --execs N]`
//!
//! Target (issue 16): p50 of `Cluster::exec` ≤ 50 ms.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use cluster::{EmbeddedCluster, EmbeddedOptions};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube::runtime::conditions::is_pod_running;
use kube_support::wait;

fn execs() -> anyhow::Result<usize> {
    let mut execs = 100;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--execs" {
            let value = args.next().context("--execs needs a number")?;
            execs = value
                .parse()
                .with_context(|| format!("--execs {value:?}"))?;
        }
    }
    anyhow::ensure!(execs > 0, "--execs must be positive");
    Ok(execs)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn report(what: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let ms = |d: Duration| format!("{:>7.1} ms", d.as_secs_f64() * 1000.0);
    println!(
        "{what:<34} n={:<4} p50 {} p90 {} p99 {} max {}",
        samples.len(),
        ms(percentile(&samples, 50.0)),
        ms(percentile(&samples, 90.0)),
        ms(percentile(&samples, 99.0)),
        ms(percentile(&samples, 100.0)),
    );
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let execs = execs()?;
    let binaries = tokio::task::spawn_blocking(control_plane::Binaries::locate).await??;
    let embedded = EmbeddedCluster::start(EmbeddedOptions {
        nodes: 1,
        zones: vec!["zone-a".into()],
        binaries: Some(binaries),
        node_agent: Some(cluster::embedded::locate_node_agent()?),
        ..EmbeddedOptions::default()
    })
    .await?;
    let result = measure(&embedded, execs).await;
    embedded.stop().await?;
    result
}

async fn measure(embedded: &EmbeddedCluster, execs: usize) -> anyhow::Result<()> {
    let cluster = embedded.cluster().await?;
    let ns = cluster.namespace("bench").await?;
    let pods: Api<Pod> = ns.api();
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": { "name": "target" },
        "spec": { "terminationGracePeriodSeconds": 1,
                  "containers": [{ "name": "app", "image": "busybox", "command": ["sleep", "3600"] }] }
    }))?;
    pods.create(&PostParams::default(), &pod).await?;
    wait::wait_for(&pods, "target", is_pod_running(), Duration::from_secs(60)).await?;
    println!("exec round trips through the apiserver, 1-node embedded cluster, {execs} execs");

    // The first exec warms the connections and the node's authorization cache.
    cluster.exec(ns.name(), "target", "app", &["true"]).await?;
    let mut samples = Vec::with_capacity(execs);
    for _ in 0..execs {
        let started = Instant::now();
        let out = cluster.exec(ns.name(), "target", "app", &["true"]).await?;
        samples.push(started.elapsed());
        anyhow::ensure!(out.code() == 0, "exec failed: {out:?}");
    }
    report("Cluster::exec true (WebSocket)", samples);

    // kube's default client (Nagle's algorithm on): where the time goes, the upgrade (to the
    // 101), the status, the end of the connection.
    let pods_api: Api<Pod> = Api::namespaced(cluster.client(), ns.name());
    let (mut upgraded, mut statused, mut joined) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..execs.min(20) {
        let started = Instant::now();
        let params = kube::api::AttachParams::default()
            .container("app")
            .stderr(false);
        let mut attached = pods_api.exec("target", ["true"], &params).await?;
        upgraded.push(started.elapsed());
        if let Some(status) = attached.take_status() {
            status.await;
        }
        statused.push(started.elapsed());
        let _ = attached.join().await;
        joined.push(started.elapsed());
    }
    report("default kube client: to the 101", upgraded);
    report("default kube client: to the status", statused);
    report("default kube client: to the end", joined);

    // The same command started directly in the node's runtime: what the path adds.
    let node = &cluster.description().nodes[0];
    let argv = vec!["true".to_string()];
    let mut samples = Vec::with_capacity(execs);
    for _ in 0..execs {
        let started = Instant::now();
        let out = node_agent::exec(&node.run_dir, ns.name(), "target", "app", &argv).await?;
        samples.push(started.elapsed());
        anyhow::ensure!(out.code() == 0, "exec failed: {out:?}");
    }
    report("runtime exec true (no API)", samples);

    let mut samples = Vec::with_capacity(execs);
    for _ in 0..execs {
        let started = Instant::now();
        let out = cluster
            .exec(
                ns.name(),
                "target",
                "app",
                &["head", "-c", "65536", "/dev/zero"],
            )
            .await?;
        samples.push(started.elapsed());
        anyhow::ensure!(
            out.stdout.len() == 65536,
            "short output: {}",
            out.stdout.len()
        );
    }
    report("Cluster::exec 64 KiB out (WebSocket)", samples);

    let kubectl = [
        std::env::var_os("KUBEBUILDER_ASSETS").map(PathBuf::from),
        Some(control_plane::cache_bin_dir()),
    ]
    .into_iter()
    .flatten()
    .map(|d| d.join("kubectl"))
    .find(|p| p.is_file());
    if let Some(kubectl) = kubectl {
        let runs = execs.min(30);
        let mut samples = Vec::with_capacity(runs);
        for _ in 0..runs {
            let started = Instant::now();
            let out = tokio::process::Command::new(&kubectl)
                .arg("--kubeconfig")
                .arg(cluster.kubeconfig())
                .args(["exec", "-n", ns.name(), "target", "--", "true"])
                .output()
                .await?;
            samples.push(started.elapsed());
            anyhow::ensure!(out.status.success(), "kubectl exec: {out:?}");
        }
        report("kubectl exec true (SPDY, 1.20)", samples);
    } else {
        println!("kubectl exec: skipped (no kubectl next to the control-plane binaries)");
    }
    println!("target: p50 of Cluster::exec <= 50 ms");
    ns.cleanup().await?;
    Ok(())
}
