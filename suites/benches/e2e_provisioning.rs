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
use kube::api::{DeleteParams, ListParams};
use suites::e2e::workload::{Workload, claim};
use suites::e2e::{EnvironmentOptions, ManilaCsiEnvironment};
use testkit::provisioning::{wait_claims_bound, wait_volumes_and_shares_gone};

const TIMEOUT: Duration = Duration::from_secs(600);
/// The target of each phase.
const TARGET: Duration = Duration::from_secs(30);

fn main() -> anyhow::Result<()> {
    testkit::init_tracing("warn");
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
    measure(&env, count).await?;
    env.teardown().await.context("teardown")
}

async fn measure(env: &ManilaCsiEnvironment, count: usize) -> anyhow::Result<()> {
    let workload = Workload::create(env, "bench").await?;

    let started = Instant::now();
    for i in 0..count {
        workload
            .create_claim(&claim(
                &format!("claim-{i:03}"),
                None,
                "1Gi",
                "ReadWriteMany",
            ))
            .await?;
    }
    let created = started.elapsed();
    wait_claims_bound(&workload.claims, count, TIMEOUT).await;
    let bound = started.elapsed();
    let shares = env
        .inspector()
        .context("the fake cloud")?
        .shares()
        .await?
        .len();
    anyhow::ensure!(shares == count, "{shares} shares for {count} claims");

    let deleting = Instant::now();
    workload
        .claims
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .context("deleting the claims")?;
    wait_volumes_and_shares_gone(
        &env.client(),
        env.fake_cloud().context("the fake cloud")?,
        TIMEOUT,
    )
    .await;
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
    workload.cleanup().await?;
    Ok(())
}
