//! Boot time of the embedded control plane (binaries cached): start to every component
//! ready, by phase, over several boots; the components' resident memory once ready; the
//! clean shutdown time.
//!
//! `cargo bench -p control-plane --bench control_plane_boot [-- --boots N]`

use std::time::{Duration, Instant};

use control_plane::{BootTimings, ControlPlane};

fn boots_from_args() -> anyhow::Result<usize> {
    let mut args = std::env::args().skip(1);
    let mut boots = 3;
    while let Some(arg) = args.next() {
        // `cargo bench` adds `--bench`; other flags are not ours.
        if arg == "--boots" {
            let value = args
                .next()
                .ok_or_else(|| anyhow::anyhow!("--boots needs a number"))?;
            boots = value
                .parse()
                .map_err(|e| anyhow::anyhow!("--boots {value:?}: {e}"))?;
        }
    }
    anyhow::ensure!(boots > 0, "--boots must be at least 1");
    Ok(boots)
}

/// Resident memory of a process (`VmRSS`), KiB; 0 if unreadable.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn ms(d: Duration) -> String {
    format!("{:>7.0} ms", d.as_secs_f64() * 1000.0)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let boots = boots_from_args()?;
    // Locate (or build) the binaries first so that the boots measure only the boot.
    let binaries = tokio::task::spawn_blocking(control_plane::Binaries::locate).await??;
    println!(
        "control-plane boot, {boots} boot(s), binaries in {}",
        binaries
            .kube_apiserver
            .parent()
            .unwrap_or(std::path::Path::new("?"))
            .display()
    );
    println!(
        "{:>5} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12}",
        "boot", "prepare", "etcd", "apiserver", "ctrl+sched", "total", "shutdown", "RSS@ready"
    );
    let mut totals = Vec::new();
    for i in 1..=boots {
        let cp = ControlPlane::builder()
            .binaries(binaries.clone())
            .start()
            .await?;
        let BootTimings {
            prepare,
            etcd,
            apiserver,
            controllers,
            total,
        } = cp.boot_timings();
        let rss_kib_total: u64 = cp.pids().iter().map(|(_, pid)| rss_kib(*pid)).sum();
        let stop = Instant::now();
        cp.shutdown().await?;
        let shutdown = stop.elapsed();
        println!(
            "{i:>5} {} {} {} {} {} {} {:>8} MiB",
            ms(prepare),
            ms(etcd),
            ms(apiserver),
            ms(controllers),
            ms(total),
            ms(shutdown),
            rss_kib_total / 1024
        );
        totals.push(total);
    }
    totals.sort();
    let median = totals[totals.len() / 2];
    println!(
        "boot to ready control plane: median {:.2} s, min {:.2} s, max {:.2} s",
        median.as_secs_f64(),
        totals[0].as_secs_f64(),
        totals[totals.len() - 1].as_secs_f64()
    );
    Ok(())
}
