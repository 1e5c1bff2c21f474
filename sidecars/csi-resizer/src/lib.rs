//! A CSI external-resizer in Rust, behaving as upstream's `csi-resizer`:
//!
//! - bound PersistentVolumeClaims whose PV belongs to the driver and whose
//!   `spec.resources.requests.storage` exceeds `status.capacity.storage` (the apiserver
//!   allows that only with a StorageClass `allowVolumeExpansion`) get the condition
//!   `Resizing`, a `Resizing` event and ControllerExpandVolume (required bytes = the request,
//!   the PV's `controllerExpandSecretRef`, its volume capability);
//! - on success the PV's `spec.capacity` is updated; when the driver says node expansion is
//!   required the claim gets `FileSystemResizePending` (kubelet finishes), otherwise its
//!   `status.capacity` is updated, its conditions cleared and `VolumeResizeSuccessful`
//!   recorded;
//! - failures record `VolumeResizeFailed` naming the cause, with per-claim exponential
//!   retry; leader election by Lease, `/healthz` and `/metrics`.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use clap::Parser;
//! let config = csi_resizer::Config::parse_from(["csi-resizer", "--csi-address=/csi/csi.sock"]);
//! let client = sidecar_common::kube_client::client(None).await?;
//! let resizer = csi_resizer::Resizer::new(config, client).await?;
//! resizer.run(sidecar_common::shutdown::signal_received()).await?;
//! # Ok(()) }
//! ```

pub mod claim;
pub mod config;
pub mod error;

use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::Client;
use kube::api::Api;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::watcher;
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
    /// Events on claims.
    pub recorder: EventRecorder,
    /// Retry delays per claim.
    pub backoff: KeyedBackoff,
    /// CSI call metrics.
    pub metrics: Arc<Metrics>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("driver", &self.driver.info.name)
            .finish_non_exhaustive()
    }
}

impl Context {
    /// Runs one CSI call with `--timeout`, recording it in the metrics.
    pub async fn call<T>(
        &self,
        method: &'static str,
        future: impl Future<Output = std::result::Result<tonic::Response<T>, tonic::Status>>,
    ) -> Result<T> {
        let started = Instant::now();
        let outcome = match tokio::time::timeout(self.config.common.timeout, future).await {
            Ok(Ok(response)) => Ok(response.into_inner()),
            Ok(Err(status)) => Err(status),
            Err(_) => Err(tonic::Status::deadline_exceeded(format!(
                "no answer within {:?}",
                self.config.common.timeout
            ))),
        };
        let code = outcome
            .as_ref()
            .map_or_else(|s| s.code(), |_| tonic::Code::Ok);
        self.metrics.observe(
            &format!("/csi.v1.Controller/{method}"),
            code,
            started.elapsed(),
        );
        outcome.map_err(Error::Csi)
    }
}

/// An resizer connected to its driver, ready to run.
#[derive(Debug)]
pub struct Resizer {
    ctx: Arc<Context>,
    election: Option<LeaderElection>,
}

impl Resizer {
    /// Connects to the driver (waiting for Probe up to `--timeout`) and reads its name and
    /// capabilities.
    pub async fn new(config: Config, client: Client) -> sidecar_common::Result<Resizer> {
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
        let election = config.common.leader_election.then(|| {
            LeaderElection::from_flags(&config.common, lease_name("external-resizer-", &name))
        });
        let ctx = Context {
            recorder: EventRecorder::new(client.clone(), "external-resizer", host),
            backoff: KeyedBackoff::new(config.retry_interval_start, config.retry_interval_max),
            metrics: Arc::new(Metrics::default()),
            client,
            driver,
            config,
        };
        Ok(Resizer {
            ctx: Arc::new(ctx),
            election,
        })
    }

    /// The driver's name.
    pub fn driver_name(&self) -> &str {
        &self.ctx.driver.info.name
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
            |stop| run_controller(ctx.clone(), stop),
        )
        .await
    }
}

async fn run_controller(ctx: Arc<Context>, stop: tokio::sync::watch::Receiver<bool>) {
    tracing::info!(driver = %ctx.driver.info.name, "resizing");
    Controller::new(
        Api::<PersistentVolumeClaim>::all(ctx.client.clone()),
        watcher::Config::default(),
    )
    .with_config(controller::Config::default().concurrency(ctx.config.workers))
    .graceful_shutdown_on(stopped(stop))
    .run(claim::reconcile, claim_error, ctx.clone())
    .for_each(|outcome| async move {
        if let Err(error) = outcome {
            tracing::debug!(%error, "claim reconcile");
        }
    })
    .await;
    tracing::info!("controller stopped");
}

fn claim_error(pvc: Arc<PersistentVolumeClaim>, error: &Error, ctx: Arc<Context>) -> Action {
    let name = claim::claim_key(&pvc);
    let delay = ctx.backoff.failed(&name);
    tracing::warn!(claim = %name, %error, retry_in = ?delay, "resize failed");
    Action::requeue(delay)
}
