//! The CreateVolume stall while the Manila driver's controller rolls (embedded cluster, fake
//! cloud, the operator's two controller replicas with leader-elected sidecars): the
//! Deployment restarted through a pod-template annotation, as `kubectl rollout restart`
//! does, while a claim of the operator's default class is created every 500 ms; the figure
//! is the longest time from a claim's creation to its binding among the claims created
//! during the rollout (target ≤ 5 s), next to the same figure before it.
//!
//! ```sh
//! cargo bench -p suites --bench operator_ha --profile dev
//! ```
#![allow(missing_docs)]

use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use suites::e2e::workload::{Workload, claim};
use suites::e2e::{
    DEFAULT_STORAGE_CLASS, EnvironmentOptions, Install, ManilaCsiEnvironment, OperatorOptions,
};

const CONTROLLER_DEPLOYMENT: &str = "openstack-manila-csi-controllerplugin";
/// How often a claim is created.
const EVERY: Duration = Duration::from_millis(500);
/// How often the claims are looked at (the figure's resolution).
const LOOK: Duration = Duration::from_millis(100);
/// Claims created after the rollout completed, before the measurement ends.
const AFTER: usize = 4;
const TIMEOUT: Duration = Duration::from_secs(240);
const TARGET: Duration = Duration::from_secs(5);

fn main() -> anyhow::Result<()> {
    testkit::init_tracing("warn");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(run())
}

async fn run() -> anyhow::Result<()> {
    let env = ManilaCsiEnvironment::start(EnvironmentOptions {
        nodes: 2,
        install: Install::Operator(OperatorOptions::default()),
        ..Default::default()
    })
    .await
    .context("installing the operator")?;
    let result = measure(&env).await;
    env.teardown().await.context("teardown")?;
    result
}

/// One claim being watched: its name, when it was created, and whether that was during the
/// rollout.
struct Pending {
    name: String,
    created: Instant,
    during_rollout: bool,
}

async fn measure(env: &ManilaCsiEnvironment) -> anyhow::Result<()> {
    let deployments: Api<Deployment> = Api::namespaced(env.client(), env.namespace());
    wait_rolled_out(&deployments, 0).await?;
    let workload = Workload::create(env, "bench-ha").await?;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(env.client(), workload.namespace());

    let mut pending: Vec<Pending> = Vec::new();
    let mut before: Vec<Duration> = Vec::new();
    let mut during: Vec<(String, Duration)> = Vec::new();
    let mut next = 0usize;
    let mut next_at = Instant::now();
    // Four claims before the rollout, then the restart.
    let mut restart: Option<(Instant, i64)> = None;
    let mut rolled_out: Option<Instant> = None;
    let mut after = 0usize;
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let now = Instant::now();
        if now >= next_at && (rolled_out.is_none() || after < AFTER) {
            let name = format!("claim-{next}");
            next += 1;
            next_at += EVERY;
            claims
                .create(
                    &PostParams::default(),
                    &claim(&name, Some(DEFAULT_STORAGE_CLASS), "1Gi", "ReadWriteMany"),
                )
                .await
                .with_context(|| format!("creating {name}"))?;
            pending.push(Pending {
                name,
                created: Instant::now(),
                during_rollout: restart.is_some(),
            });
            if rolled_out.is_some() {
                after += 1;
            }
        }
        let bound: Vec<String> = claims
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|c| c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound"))
            .filter_map(|c| c.metadata.name)
            .collect();
        let seen = Instant::now();
        pending.retain(|p| {
            if !bound.contains(&p.name) {
                return true;
            }
            let took = seen - p.created;
            if p.during_rollout {
                during.push((p.name.clone(), took));
            } else {
                before.push(took);
            }
            false
        });
        if restart.is_none() && next >= 4 {
            let generation = restart_deployment(&deployments).await?;
            restart = Some((Instant::now(), generation));
        }
        if let (Some((_, generation)), None) = (restart, rolled_out)
            && is_rolled_out(&deployments.get(CONTROLLER_DEPLOYMENT).await?, generation)
        {
            rolled_out = Some(Instant::now());
        }
        if rolled_out.is_some() && after >= AFTER && pending.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            let names: Vec<&str> = pending.iter().map(|p| p.name.as_str()).collect();
            anyhow::bail!(
                "not done within {TIMEOUT:?}: rolled out {:?}, unbound {names:?}",
                rolled_out.is_some()
            );
        }
        tokio::time::sleep(LOOK).await;
    }
    let (Some((restarted, _)), Some(done)) = (restart, rolled_out) else {
        anyhow::bail!("the rollout was not seen");
    };
    let longest_before = before.iter().max().copied().unwrap_or_default();
    let (worst, longest) = during
        .iter()
        .max_by_key(|(_, took)| *took)
        .cloned()
        .unwrap_or_default();
    println!(
        "controller rollout (2 replicas, RollingUpdate): {:.1?}; {} claims created during it",
        done - restarted,
        during.len()
    );
    println!(
        "{:<62} {:>8.2?}",
        "claim created → Bound, longest before the rollout", longest_before
    );
    let verdict = if longest <= TARGET {
        "ok"
    } else {
        "OVER TARGET"
    };
    println!(
        "{:<62} {longest:>8.2?}  (target ≤ {TARGET:.0?}: {verdict}; {worst})",
        "CreateVolume stall: claim created → Bound, longest during it"
    );
    workload.cleanup().await?;
    Ok(())
}

/// Restarts the controller's pods as `kubectl rollout restart` does; returns the
/// Deployment's new generation.
async fn restart_deployment(deployments: &Api<Deployment>) -> anyhow::Result<i64> {
    let now = chrono::Utc::now().to_rfc3339();
    let patch = serde_json::json!({ "spec": { "template": { "metadata": { "annotations": {
        "kubectl.kubernetes.io/restartedAt": now } } } } });
    let patched = deployments
        .patch(
            CONTROLLER_DEPLOYMENT,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .context("restarting the controller")?;
    Ok(patched.metadata.generation.unwrap_or(0))
}

/// Whether `deployment` has observed `generation` and runs only its new pods, all ready.
fn is_rolled_out(deployment: &Deployment, generation: i64) -> bool {
    let wanted = deployment
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1);
    let status = deployment.status.clone().unwrap_or_default();
    status.observed_generation.unwrap_or(0) >= generation
        && status.updated_replicas.unwrap_or(0) == wanted
        && status.ready_replicas.unwrap_or(0) == wanted
        && status.replicas.unwrap_or(0) == wanted
}

async fn wait_rolled_out(deployments: &Api<Deployment>, generation: i64) -> anyhow::Result<()> {
    kube_support::wait::wait_until("the controller Deployment rolled out", TIMEOUT, || {
        let deployments = deployments.clone();
        async move {
            let deployment = deployments
                .get(CONTROLLER_DEPLOYMENT)
                .await
                .map_err(|e| e.to_string())?;
            if is_rolled_out(&deployment, generation) {
                Ok(Some(()))
            } else {
                Err(format!("{:?}", deployment.status))
            }
        }
    })
    .await?;
    Ok(())
}
