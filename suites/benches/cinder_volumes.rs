//! Block volumes end to end with the Cinder CSI driver deployed from `fixtures/cinder-csi/`
//! on its own embedded cluster, against the fake Cinder + Nova (loop devices): `VOLUMES`
//! (default 50) claims of the default class (WaitForFirstConsumer), each used by its own
//! pod, created at once; then every pod and claim deleted. For each volume it records when
//! its claim was Bound (provisioned in Cinder), its VolumeAttachment attached (Nova attach,
//! a loop device), its pod Ready (formatted, staged, published, container started); then when
//! its pod was gone (unpublished, unstaged), its VolumeAttachment gone (detached) and its PV
//! gone (deleted in Cinder). It prints p50 / p99 / max of each step.
//!
//! ```sh
//! cargo bench -p suites --bench cinder_volumes --profile dev   # VOLUMES=n to change the count
//! ```
//!
//! The times are observed by listing the objects every [`POLL`], so each is late by up to
//! that much.
#![allow(missing_docs)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::api::{Api, DeleteParams, ListParams};
use suites::e2e::cinder::{CinderCsiEnvironment, CinderEnvironmentOptions};
use suites::e2e::workload::{PodBuilder, Workload, claim, pod_is_ready};

const TIMEOUT: Duration = Duration::from_secs(900);
const POLL: Duration = Duration::from_millis(200);

fn main() -> anyhow::Result<()> {
    testkit::init_tracing("warn");
    let count: usize = match std::env::var("VOLUMES") {
        Ok(value) => value.parse().context("VOLUMES must be a number")?,
        Err(_) => 50,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(run(count))
}

async fn run(count: usize) -> anyhow::Result<()> {
    let env = CinderCsiEnvironment::start(CinderEnvironmentOptions::default())
        .await
        .context("deploying the driver")?;
    let timings = env.timings();
    println!(
        "environment: binaries {:.1?}, cluster {:.1?}, deployment {:.1?}",
        timings.binaries, timings.cluster, timings.deploy
    );
    let result = measure(&env, count).await;
    let teardown = env.teardown().await.context("teardown");
    result.and(teardown)
}

/// When each volume reached each step, from its start.
#[derive(Debug, Default, Clone)]
struct Seen {
    created: Duration,
    bound: Option<Duration>,
    attached: Option<Duration>,
    ready: Option<Duration>,
    pod_gone: Option<Duration>,
    detached: Option<Duration>,
    deleted: Option<Duration>,
}

async fn measure(env: &CinderCsiEnvironment, count: usize) -> anyhow::Result<()> {
    let workload = Workload::create(env, "bench").await?;
    let names: Vec<String> = (0..count).map(|i| format!("vol-{i:03}")).collect();
    let mut seen: BTreeMap<String, Seen> =
        names.iter().map(|n| (n.clone(), Seen::default())).collect();

    let started = Instant::now();
    for name in &names {
        if let Some(s) = seen.get_mut(name) {
            s.created = started.elapsed();
        }
        workload
            .create_claim(&claim(name, None, "1Gi", "ReadWriteOnce"))
            .await?;
        workload
            .create_pod(&PodBuilder::new(name, "true").claim(name, "/data").build())
            .await?;
    }
    let created = started.elapsed();
    let client = env.client();
    let attachments: Api<VolumeAttachment> = Api::all(client.clone());
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    // Up: Bound, attached, Ready.
    loop {
        let now = started.elapsed();
        let claims = workload.claims.list(&ListParams::default()).await?;
        let pv_of_claim: BTreeMap<String, String> = claims
            .items
            .iter()
            .filter(|c| c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound"))
            .filter_map(|c| {
                Some((
                    c.metadata.name.clone()?,
                    c.spec.as_ref()?.volume_name.clone()?,
                ))
            })
            .collect();
        let attached: Vec<String> = attachments
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|a| a.status.as_ref().is_some_and(|s| s.attached))
            .filter_map(|a| a.spec.source.persistent_volume_name)
            .collect();
        let pods = workload.pods.list(&ListParams::default()).await?;
        for (name, s) in seen.iter_mut() {
            if let Some(pv) = pv_of_claim.get(name) {
                s.bound.get_or_insert(now);
                if attached.contains(pv) {
                    s.attached.get_or_insert(now);
                }
            }
            if pods
                .items
                .iter()
                .any(|p| p.metadata.name.as_deref() == Some(name.as_str()) && pod_is_ready(p))
            {
                s.ready.get_or_insert(now);
            }
        }
        let ready = seen.values().filter(|s| s.ready.is_some()).count();
        if ready == count {
            break;
        }
        anyhow::ensure!(
            now < TIMEOUT,
            "only {ready} of {count} pods Ready after {TIMEOUT:?}"
        );
        tokio::time::sleep(POLL).await;
    }
    let up = started.elapsed();
    let pv_names: BTreeMap<String, String> = workload
        .claims
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .filter_map(|c: &PersistentVolumeClaim| {
            Some((
                c.metadata.name.clone()?,
                c.spec.as_ref()?.volume_name.clone()?,
            ))
        })
        .collect();

    // Down: every pod and claim deleted at once.
    let down_started = Instant::now();
    workload
        .pods
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .context("deleting the pods")?;
    workload
        .claims
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .context("deleting the claims")?;
    loop {
        let now = down_started.elapsed();
        let pods: Vec<String> = workload
            .pods
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter_map(|p: Pod| p.metadata.name)
            .collect();
        let attached: Vec<String> = attachments
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter_map(|a| a.spec.source.persistent_volume_name)
            .collect();
        let pvs: Vec<String> = volumes
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter_map(|pv| pv.metadata.name)
            .collect();
        for (name, s) in seen.iter_mut() {
            if !pods.contains(name) {
                s.pod_gone.get_or_insert(now);
            }
            if let Some(pv) = pv_names.get(name) {
                if !attached.contains(pv) {
                    s.detached.get_or_insert(now);
                }
                if !pvs.contains(pv) {
                    s.deleted.get_or_insert(now);
                }
            }
        }
        let deleted = seen.values().filter(|s| s.deleted.is_some()).count();
        if deleted == count && seen.values().all(|s| s.detached.is_some()) {
            break;
        }
        anyhow::ensure!(
            now < TIMEOUT,
            "only {deleted} of {count} PVs deleted after {TIMEOUT:?}"
        );
        tokio::time::sleep(POLL).await;
    }
    let down = down_started.elapsed();
    let leftovers = env.cloud().block_leftovers();
    anyhow::ensure!(
        leftovers.volumes.is_empty() && leftovers.attachments.is_empty(),
        "left in the cloud: {leftovers:?}"
    );

    println!(
        "{count} volumes: created the claims and pods in {created:.1?}; all pods Ready after {up:.1?}; \
         all detached and deleted {down:.1?} after the deletion"
    );
    println!("step (per volume)                 p50       p99       max");
    let steps: [(&str, Step); 6] = [
        ("created -> claim Bound", |s| {
            Some(s.bound?.saturating_sub(s.created))
        }),
        ("Bound -> attached", |s| Some(s.attached? - s.bound?)),
        ("attached -> pod Ready", |s| Some(s.ready? - s.attached?)),
        ("deleted -> pod gone", |s| s.pod_gone),
        ("pod gone -> detached", |s| {
            Some(s.detached?.saturating_sub(s.pod_gone?))
        }),
        ("detached -> PV deleted", |s| {
            Some(s.deleted?.saturating_sub(s.detached?))
        }),
    ];
    for (label, step) in steps {
        let mut values: Vec<Duration> = seen.values().filter_map(step).collect();
        values.sort();
        println!(
            "{label:<30} {:>8.2?} {:>8.2?} {:>8.2?}",
            percentile(&values, 50),
            percentile(&values, 99),
            values.last().copied().unwrap_or_default()
        );
    }
    workload.cleanup().await?;
    Ok(())
}

/// One step's duration for a volume, if it got that far.
type Step = fn(&Seen) -> Option<Duration>;

/// The `p`th percentile (nearest rank) of sorted `values`.
fn percentile(values: &[Duration], p: usize) -> Duration {
    if values.is_empty() {
        return Duration::ZERO;
    }
    let rank = (p * values.len()).div_ceil(100).max(1);
    values[rank - 1]
}
