//! The upgrade of the Manila CSI driver operator from release N-1 to the current release on
//! the embedded cluster with the fake cloud over TLS, as a user does it (the operator
//! manifests applied again; the operator rolls the driver), while writer pods append a
//! timestamp every 100 ms: two on two nodes on an RWX claim, one on an RWO claim. Prints the
//! writer stall during the upgrade (the longest gap any writer saw between two lines) and the
//! time from applying the new manifests until the operator reports the new version,
//! Available, next to the issue's targets; then the timeline.
//!
//! ```sh
//! cargo bench -p suites --bench operator_upgrade --profile dev
//! ```
#![allow(missing_docs)]

use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use suites::conformance::{TestResult, Timeline};
use suites::e2e::workload::Workload;
use suites::e2e::{ManilaCsiEnvironment, OperatorOptions};
use suites::resilience::upgrade;
use suites::resilience::writers;

const TIMEOUT: Duration = Duration::from_secs(120);
/// The issue's target for the writer stall.
const STALL_TARGET: Duration = Duration::from_secs(1);

fn main() -> anyhow::Result<()> {
    testkit::init_tracing("warn");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(run())
}

fn report(what: &str, took: Duration, target: Option<Duration>) {
    match target {
        Some(target) => {
            let verdict = if took <= target { "ok" } else { "OVER TARGET" };
            println!("{what:<55} {took:>8.3?}  (target ≤ {target:.0?}: {verdict})");
        }
        None => println!("{what:<55} {took:>8.3?}  (no target)"),
    }
}

/// The resilience helpers' result as the bench's.
fn checked<T>(result: TestResult<T>) -> anyhow::Result<T> {
    result.map_err(|e| anyhow::anyhow!("{e}"))
}

async fn run() -> anyhow::Result<()> {
    let env = upgrade::start_release_n_minus_1()
        .await
        .context("installing release N-1 of the operator")?;
    let timeline = Timeline::new();
    let result = measure(&env, &timeline).await;
    if result.is_err() {
        eprintln!("--- timeline ---\n{}", timeline.render());
    }
    result?;
    env.teardown().await.context("teardown")?;
    Ok(())
}

async fn measure(env: &ManilaCsiEnvironment, timeline: &Timeline) -> anyhow::Result<()> {
    let previous = OperatorOptions::PREVIOUS_RELEASE.version()?;
    let current = OperatorOptions::CURRENT_RELEASE.version()?;
    env.wait_operator_version(&previous, TIMEOUT).await?;
    let workload = Workload::create(env, "upgrade-bench").await?;
    let nodes = env.cluster().node_names();
    let writers = checked(upgrade::start_writers(&workload, &nodes, timeline).await)?;

    let before = checked(writers.read().await)?;
    let (started, _) = writers::now();
    let timings = env
        .upgrade_operator_and_wait(OperatorOptions::CURRENT_RELEASE, TIMEOUT, timeline)
        .await?;
    checked(writers.wait_written_since(SystemTime::now()).await)?;
    let stall = checked(writers.check_since(started, Some(&before)).await)?;

    println!("upgrade {previous} → {current}, 3 writers (RWX on two nodes, RWO), every 100 ms:");
    report(
        "writer stall during the upgrade",
        stall.length,
        Some(STALL_TARGET),
    );
    report(
        "manifests applied → operator Deployment rolled out",
        timings.rolled_out,
        None,
    );
    report(
        "manifests applied → all Available with the new version",
        timings.available,
        None,
    );
    println!("--- timeline ---\n{}", timeline.render());

    checked(writers.stop().await)?;
    workload.cleanup().await?;
    Ok(())
}
