//! How fast the Manila CSI driver operator acts on the embedded cluster with the fake cloud:
//! its manifests applied → the ClusterOperator Available (driver ready on every node); a share
//! type added → its StorageClass; a deleted child (the controller Deployment, a
//! StorageClass) → re-created. Then the same for the Cinder CSI driver operator on a cluster
//! of its own: manifests applied → Available, the deleted controller Deployment →
//! re-created. Prints each figure next to the issue's target.
//!
//! ```sh
//! cargo bench -p suites --bench operator --profile dev
//! ```
#![allow(missing_docs)]

use std::time::{Duration, Instant};

use anyhow::Context as _;
use fakes::ShareTypeSeed;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams};
use kube_support::wait;
use suites::e2e::cinder::{
    CINDER_CONTROLLER_DEPLOYMENT, CinderCsiEnvironment, CinderEnvironmentOptions, CinderInstall,
    CinderOperatorOptions,
};
use suites::e2e::{
    DEFAULT_STORAGE_CLASS, EnvironmentOptions, Install, ManilaCsiEnvironment, OperatorOptions,
};

const TIMEOUT: Duration = Duration::from_secs(120);
const CONTROLLER_DEPLOYMENT: &str = "openstack-manila-csi-controllerplugin";

fn main() -> anyhow::Result<()> {
    testkit::init_tracing("warn");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(run())
}

fn report(what: &str, took: Duration, target: Duration) {
    let verdict = if took <= target { "ok" } else { "OVER TARGET" };
    println!("{what:<55} {took:>8.2?}  (target ≤ {target:.0?}: {verdict})");
}

async fn run() -> anyhow::Result<()> {
    let operator = OperatorOptions::default();
    let interval = operator.share_type_sync_interval;
    let env = ManilaCsiEnvironment::start(EnvironmentOptions {
        nodes: 2,
        install: Install::Operator(operator),
        ..Default::default()
    })
    .await
    .context("installing the operator")?;
    let timings = env.timings();
    println!(
        "environment: binaries {:.1?}, cluster {:.1?}",
        timings.binaries, timings.cluster
    );
    report(
        "manifests applied → ClusterOperator Available",
        timings.deploy,
        Duration::from_secs(30),
    );
    let result = measure(&env, interval).await;
    env.teardown().await.context("teardown")?;
    result?;
    cinder().await
}

/// The Cinder operator: apply → Available, and a deleted controller Deployment put back.
async fn cinder() -> anyhow::Result<()> {
    let env = CinderCsiEnvironment::start(CinderEnvironmentOptions {
        nodes: 2,
        install: CinderInstall::Operator(CinderOperatorOptions::default()),
        ..Default::default()
    })
    .await
    .context("installing the Cinder operator")?;
    let timings = env.timings();
    println!(
        "cinder environment: binaries {:.1?}, cluster {:.1?}",
        timings.binaries, timings.cluster
    );
    report(
        "cinder: manifests applied → ClusterOperator Available",
        timings.deploy,
        Duration::from_secs(30),
    );
    let result = cinder_heal(&env).await;
    env.teardown().await.context("cinder teardown")?;
    result
}

async fn cinder_heal(env: &CinderCsiEnvironment) -> anyhow::Result<()> {
    let deployments: Api<Deployment> = Api::namespaced(env.client(), env.namespace());
    let uid = deployments
        .get(CINDER_CONTROLLER_DEPLOYMENT)
        .await?
        .metadata
        .uid;
    let started = Instant::now();
    deployments
        .delete(CINDER_CONTROLLER_DEPLOYMENT, &DeleteParams::default())
        .await?;
    wait_present(&deployments, CINDER_CONTROLLER_DEPLOYMENT, uid).await?;
    report(
        "cinder: controller Deployment deleted → re-created",
        started.elapsed(),
        Duration::from_secs(2),
    );
    env.wait_operator_available(TIMEOUT).await?;
    Ok(())
}

async fn measure(env: &ManilaCsiEnvironment, interval: Duration) -> anyhow::Result<()> {
    let client = env.client();
    let classes: Api<StorageClass> = Api::all(client.clone());

    let started = Instant::now();
    env.fake_cloud()
        .context("the fake cloud")?
        .add_share_type(&ShareTypeSeed::named("bench_type"))?;
    wait_present(&classes, "csi-manila-bench-type", None).await?;
    report(
        &format!("share type added → StorageClass (interval {interval:.0?})"),
        started.elapsed(),
        interval + Duration::from_secs(2),
    );

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), env.namespace());
    let uid = deployments.get(CONTROLLER_DEPLOYMENT).await?.metadata.uid;
    let started = Instant::now();
    deployments
        .delete(CONTROLLER_DEPLOYMENT, &DeleteParams::default())
        .await?;
    wait_present(&deployments, CONTROLLER_DEPLOYMENT, uid).await?;
    report(
        "controller Deployment deleted → re-created",
        started.elapsed(),
        Duration::from_secs(2),
    );

    let uid = classes.get(DEFAULT_STORAGE_CLASS).await?.metadata.uid;
    let started = Instant::now();
    classes
        .delete(DEFAULT_STORAGE_CLASS, &DeleteParams::default())
        .await?;
    wait_present(&classes, DEFAULT_STORAGE_CLASS, uid).await?;
    report(
        "StorageClass deleted → re-created",
        started.elapsed(),
        Duration::from_secs(2),
    );
    env.wait_operator_available(TIMEOUT).await?;
    Ok(())
}

/// Waits until `name` exists with a uid other than `old_uid`.
async fn wait_present<K>(api: &Api<K>, name: &str, old_uid: Option<String>) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + 'static,
{
    wait::wait_until(format!("{name} (re-)created"), TIMEOUT, || {
        let api = api.clone();
        let old_uid = old_uid.clone();
        async move {
            match api.get_opt(name).await.map_err(|e| e.to_string())? {
                Some(object) if object.meta().uid != old_uid => Ok(Some(())),
                Some(_) => Err("still the old one".to_string()),
                None => Err("not there".to_string()),
            }
        }
    })
    .await?;
    Ok(())
}
