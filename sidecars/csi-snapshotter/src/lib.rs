//! A CSI external-snapshotter sidecar in Rust, behaving as upstream's `csi-snapshotter`
//! (the sidecar half of kubernetes-csi/external-snapshotter; the
//! [`snapshot_controller`] crate is the other half):
//!
//! - VolumeSnapshotContents whose `spec.driver` is the driver's GetPluginInfo name are
//!   watched; a dynamic one (`source.volumeHandle`) gets a snapshot by CreateSnapshot named
//!   `<--snapshot-name-prefix>-<VolumeSnapshot uid>`, with the class's parameters (minus the
//!   `csi.storage.k8s.io/` ones, plus the `--extra-create-metadata` keys) and the snapshotter
//!   secret; its status (`snapshotHandle`, `readyToUse`, `restoreSize`, `creationTime`) is
//!   written and CreateSnapshot repeated with back-off until the snapshot is ready;
//! - a pre-provisioned one (`source.snapshotHandle`) is marked ready with its handle (the
//!   Manila driver has no ListSnapshots; upstream assumes the handle valid then);
//! - a content the snapshot controller marks `volumesnapshot-being-deleted` and deletes is,
//!   with the `Delete` policy, deleted by DeleteSnapshot; with either policy the
//!   `volumesnapshotcontent-bound-protection` finalizer is then removed;
//! - failures land in `status.error` and Warning events on the content; leader election by
//!   Lease (`external-snapshotter-leader-<driver>`), `/healthz` and `/metrics`.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use clap::Parser;
//! let config = csi_snapshotter::Config::parse_from(["csi-snapshotter", "--csi-address=/csi/csi.sock"]);
//! let client = sidecar_common::kube_client::client(None).await?;
//! let snapshotter = csi_snapshotter::Snapshotter::new(config, client).await?;
//! snapshotter.run(sidecar_common::shutdown::signal_received()).await?;
//! # Ok(()) }
//! ```

pub mod config;
pub mod content;
pub mod create;
pub mod deletion;
pub mod error;
pub mod request;
pub mod status;

use std::sync::Arc;

use futures::StreamExt;
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
use snapshot_controller::VolumeSnapshotContent;

pub use config::Config;
pub use error::{Error, Result};

/// Prefix of the leader Lease name, as upstream's.
pub const LEASE_PREFIX: &str = "external-snapshotter-leader-";

/// Everything a reconcile needs.
pub struct Context {
    /// Kubernetes client.
    pub client: Client,
    /// The driver (channel, name, capabilities).
    pub driver: Driver,
    /// Flags.
    pub config: Config,
    /// Events on contents.
    pub recorder: EventRecorder,
    /// Retry delays per content.
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

/// A snapshotter connected to its driver, ready to run.
#[derive(Debug)]
pub struct Snapshotter {
    ctx: Arc<Context>,
    election: Option<LeaderElection>,
}

impl Snapshotter {
    /// Connects to the driver (waiting for Probe up to `--timeout`), reads its name and
    /// checks it can create and delete snapshots.
    pub async fn new(config: Config, client: Client) -> sidecar_common::Result<Snapshotter> {
        config.common.validate()?;
        let driver = Driver::connect(&config.common.csi_address, config.common.timeout).await?;
        use csi_proto::v1::controller_service_capability::rpc::Type;
        if !driver.info.has_controller_rpc(Type::CreateDeleteSnapshot) {
            return Err(sidecar_common::Error::InvalidFlag {
                flag: "--csi-address",
                reason: format!(
                    "the driver {} at {} does not have the CREATE_DELETE_SNAPSHOT controller capability",
                    driver.info.name, config.common.csi_address
                ),
            });
        }
        let name = driver.info.name.clone();
        let host = std::env::var("POD_NAME")
            .ok()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| {
                std::fs::read_to_string("/proc/sys/kernel/hostname")
                    .map(|h| h.trim().to_string())
                    .unwrap_or_else(|_| "localhost".into())
            });
        let election = config
            .common
            .leader_election
            .then(|| LeaderElection::from_flags(&config.common, lease_name(LEASE_PREFIX, &name)));
        let ctx = Context {
            recorder: EventRecorder::new(client.clone(), format!("csi-snapshotter {name}"), host),
            backoff: KeyedBackoff::new(config.retry_interval_start, config.retry_interval_max),
            metrics: Arc::new(Metrics::default()),
            client,
            driver,
            config,
        };
        Ok(Snapshotter {
            ctx: Arc::new(ctx),
            election,
        })
    }

    /// The driver's name.
    pub fn driver_name(&self) -> &str {
        &self.ctx.driver.info.name
    }

    /// The CSI call metrics (also served on `--http-endpoint`'s `/metrics`).
    pub fn metrics(&self) -> Arc<Metrics> {
        self.ctx.metrics.clone()
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
            |stop| run_controller(ctx.clone(), stop),
        )
        .await
    }
}

/// The content controller, until `stop`.
async fn run_controller(ctx: Arc<Context>, stop: tokio::sync::watch::Receiver<bool>) {
    tracing::info!(driver = %ctx.driver.info.name, "snapshotting");
    let settings = controller::Config::default().concurrency(ctx.config.worker_threads);
    Controller::new(
        Api::<VolumeSnapshotContent>::all(ctx.client.clone()),
        watcher::Config::default(),
    )
    .with_config(settings)
    .graceful_shutdown_on(stopped(stop))
    .run(content::reconcile, content_error, ctx.clone())
    .for_each(|outcome| async move {
        if let Err(error) = outcome {
            tracing::debug!(%error, "content reconcile");
        }
    })
    .await;
    tracing::info!("controller stopped");
}

fn content_error(content: Arc<VolumeSnapshotContent>, error: &Error, ctx: Arc<Context>) -> Action {
    let name = content.name_any();
    let delay = ctx.backoff.failed(&name);
    if error.is_conflict() {
        tracing::debug!(content = %name, %error, retry_in = ?delay, "stale view, retrying");
    } else {
        tracing::warn!(content = %name, %error, retry_in = ?delay, "snapshot operation failed");
    }
    Action::requeue(delay)
}
