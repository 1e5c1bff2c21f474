//! A CSI external-attacher in Rust, behaving as upstream's `csi-attacher`:
//!
//! - `storage.k8s.io/v1` VolumeAttachments whose `spec.attacher` is the driver get the
//!   finalizer `external-attacher/<driver>` and, when the driver has the
//!   PUBLISH_UNPUBLISH_VOLUME capability, a ControllerPublishVolume (volume handle from the
//!   PV, node id from the node's CSINode entry or the legacy `csi.volume.kubernetes.io/nodeid`
//!   annotation, capability from the PV's access modes / fsType / mount options, read-only,
//!   `controllerPublishSecretRef`, volume attributes) whose publish context becomes
//!   `status.attachmentMetadata`; without the capability they are marked attached without a
//!   call, as upstream does;
//! - deleted attachments get ControllerUnpublishVolume (when capable), `attached: false`,
//!   and lose the finalizer;
//! - failures go to `status.attachError` / `status.detachError` and a Warning event
//!   (AttachFailed / DetachFailed), with per-attachment exponential retry; leader election
//!   by Lease, `/healthz` and `/metrics`.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use clap::Parser;
//! let config = csi_attacher::Config::parse_from(["csi-attacher", "--csi-address=/csi/csi.sock"]);
//! let client = sidecar_common::kube_client::client(None).await?;
//! let attacher = csi_attacher::Attacher::new(config, client).await?;
//! attacher.run(sidecar_common::shutdown::signal_received()).await?;
//! # Ok(()) }
//! ```

pub mod attachment;
pub mod config;
pub mod error;
pub mod persistent_volume;
pub mod volume;

use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::VolumeAttachment;
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
    /// Events on attachments.
    pub recorder: EventRecorder,
    /// Retry delays per attachment.
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

/// An attacher connected to its driver, ready to run.
#[derive(Debug)]
pub struct Attacher {
    ctx: Arc<Context>,
    election: Option<LeaderElection>,
}

impl Attacher {
    /// Connects to the driver (waiting for Probe up to `--timeout`) and reads its name and
    /// capabilities.
    pub async fn new(config: Config, client: Client) -> sidecar_common::Result<Attacher> {
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
            LeaderElection::from_flags(
                &config.common,
                lease_name("external-attacher-leader-", &name),
            )
        });
        let ctx = Context {
            recorder: EventRecorder::new(client.clone(), format!("csi-attacher {name}"), host),
            backoff: KeyedBackoff::new(config.retry_interval_start, config.retry_interval_max),
            metrics: Arc::new(Metrics::default()),
            client,
            driver,
            config,
        };
        Ok(Attacher {
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
    tracing::info!(driver = %ctx.driver.info.name, "attaching");
    let settings = controller::Config::default().concurrency(ctx.config.worker_threads);
    let attachments = Controller::new(
        Api::<VolumeAttachment>::all(ctx.client.clone()),
        watcher::Config::default(),
    )
    .with_config(settings.clone())
    .graceful_shutdown_on(stopped(stop.clone()))
    .run(attachment::reconcile, attachment_error, ctx.clone())
    .for_each(|outcome| async move {
        if let Err(error) = outcome {
            tracing::debug!(%error, "attachment reconcile");
        }
    });
    // PVs are revisited when an attachment naming them changes (e.g. is deleted).
    let volumes = Controller::new(
        Api::<PersistentVolume>::all(ctx.client.clone()),
        watcher::Config::default(),
    )
    .watches(
        Api::<VolumeAttachment>::all(ctx.client.clone()),
        watcher::Config::default(),
        |va| {
            va.spec
                .source
                .persistent_volume_name
                .as_deref()
                .map(kube::runtime::reflector::ObjectRef::<PersistentVolume>::new)
        },
    )
    .with_config(settings)
    .graceful_shutdown_on(stopped(stop))
    .run(persistent_volume::reconcile, volume_error, ctx.clone())
    .for_each(|outcome| async move {
        if let Err(error) = outcome {
            tracing::debug!(%error, "volume reconcile");
        }
    });
    tokio::join!(attachments, volumes);
    tracing::info!("controller stopped");
}

fn attachment_error(va: Arc<VolumeAttachment>, error: &Error, ctx: Arc<Context>) -> Action {
    let name = va.name_any();
    let delay = ctx.backoff.failed(&name);
    tracing::warn!(attachment = %name, %error, retry_in = ?delay, "attach/detach failed");
    Action::requeue(delay)
}

fn volume_error(pv: Arc<PersistentVolume>, error: &Error, ctx: Arc<Context>) -> Action {
    let name = format!("pv/{}", pv.name_any());
    let delay = ctx.backoff.failed(&name);
    tracing::warn!(volume = %name, %error, retry_in = ?delay, "removing the PV finalizer failed");
    Action::requeue(delay)
}
