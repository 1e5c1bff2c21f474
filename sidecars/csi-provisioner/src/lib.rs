//! A CSI external-provisioner in Rust, behaving as upstream's `csi-provisioner`:
//!
//! - claims annotated `volume.beta.kubernetes.io/storage-provisioner` (or the GA
//!   `volume.kubernetes.io/storage-provisioner`) with the driver's name, whose StorageClass
//!   names the driver, get a volume by CreateVolume (`pvc-<uid>`) and a PV bound to them by
//!   `claimRef` (the PV controller completes the binding) — Immediate, or
//!   WaitForFirstConsumer once `volume.kubernetes.io/selected-node` is set, with
//!   accessibility requirements from the nodes' CSINode topology keys;
//! - released PVs it made with reclaim policy Delete are deleted by DeleteVolume, then the
//!   finalizer `external-provisioner.volume.kubernetes.io/finalizer` is removed and the PV
//!   deleted;
//! - events on the claim (Provisioning, ProvisioningSucceeded, ProvisioningFailed), per-claim
//!   exponential retry, leader election by Lease, `/healthz` and `/metrics`.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use clap::Parser;
//! let config = csi_provisioner::Config::parse_from(["csi-provisioner", "--csi-address=/csi/csi.sock"]);
//! let client = sidecar_common::kube_client::client(None).await?;
//! let provisioner = csi_provisioner::Provisioner::new(config, client).await?;
//! provisioner.run(sidecar_common::shutdown::signal_received()).await?;
//! # Ok(()) }
//! ```

pub mod claim;
pub mod config;
pub mod data_source;
pub mod deleter;
pub mod error;
pub mod request;
pub mod topology;
pub mod volume;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::api::Api;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use sidecar_common::backoff::KeyedBackoff;
use sidecar_common::driver::Driver;
use sidecar_common::events::EventRecorder;
use sidecar_common::http::Metrics;
use sidecar_common::leader::{LeaderElection, lease_name};
use sidecar_common::run::stopped;

pub use config::Config;
pub use error::{Error, Result};

/// Everything a reconcile needs.
pub struct Context {
    /// Kubernetes client.
    pub client: Client,
    /// The driver (channel, name, capabilities).
    pub driver: Driver,
    /// Flags.
    pub config: Config,
    /// Events on claims and volumes.
    pub recorder: EventRecorder,
    /// Retry delays per claim / volume.
    pub backoff: KeyedBackoff,
    /// CSI call metrics.
    pub metrics: Arc<Metrics>,
    /// `storage.kubernetes.io/csiProvisionerIdentity` of this instance.
    pub identity: String,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("driver", &self.driver.info.name)
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

/// A provisioner connected to its driver, ready to run.
#[derive(Debug)]
pub struct Provisioner {
    ctx: Arc<Context>,
    election: Option<LeaderElection>,
}

impl Provisioner {
    /// Connects to the driver (waiting for Probe up to `--timeout`) and reads its name and
    /// capabilities.
    pub async fn new(config: Config, client: Client) -> sidecar_common::Result<Provisioner> {
        config.common.validate()?;
        let driver = Driver::connect(&config.common.csi_address, config.common.timeout).await?;
        let name = driver.info.name.clone();
        let host = std::env::var("POD_NAME")
            .ok()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| {
                std::fs::read_to_string("/proc/sys/kernel/hostname")
                    .map(|h| h.trim().to_string())
                    .unwrap_or_else(|_| "localhost".into())
            });
        let millis = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis();
        let election = config
            .common
            .leader_election
            .then(|| LeaderElection::from_flags(&config.common, lease_name("", &name)));
        let ctx = Context {
            recorder: EventRecorder::new(client.clone(), format!("{name}_{host}"), host),
            backoff: KeyedBackoff::new(config.retry_interval_start, config.retry_interval_max),
            metrics: Arc::new(Metrics::default()),
            identity: format!("{millis}-{}-{name}", uuid_digits()),
            client,
            driver,
            config,
        };
        Ok(Provisioner {
            ctx: Arc::new(ctx),
            election,
        })
    }

    /// The driver's name.
    pub fn driver_name(&self) -> &str {
        &self.ctx.driver.info.name
    }

    /// The leader-election identity, with `--leader-election`.
    pub fn leader_identity(&self) -> Option<&str> {
        self.election.as_ref().map(|e| e.identity.as_str())
    }

    /// Runs until `shutdown` resolves (with `--leader-election`, only while leading; losing
    /// the Lease is an error). Serves `--http-endpoint` meanwhile.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> sidecar_common::Result<()> {
        let ctx = self.ctx;
        sidecar_common::run::run_sidecar(
            ctx.client.clone(),
            self.election.as_ref(),
            ctx.config.common.http_endpoint.as_deref(),
            ctx.metrics.clone(),
            ctx.driver.channel.clone(),
            shutdown,
            |stop| run_controllers(ctx.clone(), stop),
        )
        .await
    }
}

/// The claim and volume controllers, until `stop`.
async fn run_controllers(ctx: Arc<Context>, stop: tokio::sync::watch::Receiver<bool>) {
    tracing::info!(driver = %ctx.driver.info.name, "provisioning");
    let settings = controller::Config::default().concurrency(ctx.config.worker_threads);
    let claims = Controller::new(
        Api::<PersistentVolumeClaim>::all(ctx.client.clone()),
        watcher::Config::default(),
    )
    .with_config(settings.clone())
    .graceful_shutdown_on(stopped(stop.clone()))
    .run(claim::reconcile, claim_error, ctx.clone())
    .for_each(|outcome| async move {
        if let Err(error) = outcome {
            tracing::debug!(%error, "claim reconcile");
        }
    });
    let volumes = Controller::new(
        Api::<PersistentVolume>::all(ctx.client.clone()),
        watcher::Config::default(),
    )
    .with_config(settings)
    .graceful_shutdown_on(stopped(stop))
    .run(deleter::reconcile, volume_error, ctx.clone())
    .for_each(|outcome| async move {
        if let Err(error) = outcome {
            tracing::debug!(%error, "volume reconcile");
        }
    });
    tokio::join!(claims, volumes);
    tracing::info!("controllers stopped");
}

fn claim_error(claim: Arc<PersistentVolumeClaim>, error: &Error, ctx: Arc<Context>) -> Action {
    let key = claim::claim_key(&claim);
    let delay = ctx.backoff.failed(&key);
    tracing::warn!(claim = %key, %error, retry_in = ?delay, "provisioning failed");
    Action::requeue(delay)
}

fn volume_error(pv: Arc<PersistentVolume>, error: &Error, ctx: Arc<Context>) -> Action {
    let name = pv.name_any();
    let delay = ctx.backoff.failed(&name);
    tracing::warn!(volume = %name, %error, retry_in = ?delay, "deleting failed");
    Action::requeue(delay)
}

/// Four pseudo-random digits, as upstream's identity has.
fn uuid_digits() -> u32 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .subsec_nanos();
    (nanos ^ std::process::id()) % 10_000
}
