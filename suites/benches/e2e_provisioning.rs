//! Provisioning throughput of the Manila CSI driver deployed from `fixtures/manila-csi/` on
//! its own embedded cluster: how long `CLAIMS` (default 100) claims of the default class take
//! to be Bound, and how long their deletion takes until no PV and no share is left.
//!
//! ```sh
//! cargo bench -p suites --bench e2e_provisioning --profile dev   # CLAIMS=n to change the count
//! ```
#![allow(missing_docs)]

use std::time::{Duration, Instant};

use anyhow::Context as _;
use harness::cluster::wait;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use suites::e2e::workload::claim;
use suites::e2e::{EnvironmentOptions, ManilaCsiEnvironment};

const TIMEOUT: Duration = Duration::from_secs(600);
/// The target of each phase.
const TARGET: Duration = Duration::from_secs(30);

fn main() -> anyhow::Result<()> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .try_init();
    let count: usize = match std::env::var("CLAIMS") {
        Ok(value) => value.parse().context("CLAIMS must be a number")?,
        Err(_) => 100,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(run(count))
}

async fn run(count: usize) -> anyhow::Result<()> {
    let env = ManilaCsiEnvironment::start(EnvironmentOptions::default())
        .await
        .context("deploying the driver")?;
    let timings = env.timings();
    println!(
        "environment: binaries {:.1?}, cluster {:.1?}, deployment {:.1?}",
        timings.binaries, timings.cluster, timings.deploy
    );
    let result = measure(&env, count).await;
    let teardown = env.teardown().await.context("teardown");
    result?;
    teardown
}

async fn measure(env: &ManilaCsiEnvironment, count: usize) -> anyhow::Result<()> {
    let ns = env.cluster().namespace("bench").await?;
    let claims: Api<PersistentVolumeClaim> = ns.api();

    let started = Instant::now();
    for i in 0..count {
        claims
            .create(
                &PostParams::default(),
                &claim(&format!("claim-{i:03}"), None, "1Gi", "ReadWriteMany"),
            )
            .await
            .with_context(|| format!("creating claim-{i:03}"))?;
    }
    let created = started.elapsed();
    wait::wait_until(format!("{count} claims Bound"), TIMEOUT, || {
        let claims = claims.clone();
        async move {
            let list = claims
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?;
            let bound = list
                .items
                .iter()
                .filter(|c| c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound"))
                .count();
            if bound == count {
                Ok(Some(()))
            } else {
                Err(format!("{bound}/{count} Bound"))
            }
        }
    })
    .await?;
    let bound = started.elapsed();
    let shares = env.inspector().shares().await?.len();
    anyhow::ensure!(shares == count, "{shares} shares for {count} claims");

    let deleting = Instant::now();
    claims
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .context("deleting the claims")?;
    let volumes: Api<PersistentVolume> = Api::all(env.client());
    let cloud = env.cloud();
    wait::wait_until("every PV and share deleted", TIMEOUT, || {
        let volumes = volumes.clone();
        async move {
            let pvs = volumes
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?
                .items
                .len();
            let shares = cloud.leftovers().shares.len();
            if pvs == 0 && shares == 0 {
                Ok(Some(()))
            } else {
                Err(format!("{pvs} PVs, {shares} shares left"))
            }
        }
    })
    .await?;
    let deleted = deleting.elapsed();

    let verdict = |d: Duration| if d <= TARGET { "ok" } else { "over target" };
    println!("{count} claims created in {created:.1?}");
    println!(
        "{count} claims Bound in {bound:.1?} (target {TARGET:?}: {})",
        verdict(bound)
    );
    println!(
        "{count} claims deleted, PVs and shares gone in {deleted:.1?} (target {TARGET:?}: {})",
        verdict(deleted)
    );
    ns.cleanup().await?;
    Ok(())
}
