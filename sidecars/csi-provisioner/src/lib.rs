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
//! The sidecar skeleton (start-up, leader election, HTTP endpoint, the shared context) is
//! [`sidecar_common::sidecar`]; this crate is its two controllers: [`claim::reconcile`]
//! and [`deleter::reconcile`].
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use clap::Parser;
//! let config = csi_provisioner::Config::parse_from(["csi-provisioner", "--csi-address=/csi/csi.sock"]);
//! let client = kube_support::kube_client::client(None).await?;
//! let provisioner = csi_provisioner::Provisioner::new(config, client).await?;
//! provisioner.run(kube_support::shutdown::signal_received()).await?;
//! # Ok(()) }
//! ```

pub mod claim;
pub mod config;
pub mod data_source;
pub mod deleter;
pub mod request;
pub mod topology;
pub mod volume;

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::watcher;
use kube_support::backoff::object_key;
use sidecar_common::context::SidecarContext;
use sidecar_common::run::{drain, stopped};
use sidecar_common::sidecar::{ControllerSidecar, Sidecar};
use tokio::sync::watch;

pub use config::Config;
pub use sidecar_common::ReconcileError as Error;

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything a reconcile needs.
pub type Context = SidecarContext<Config>;

/// A provisioner connected to its driver, ready to run.
pub type Provisioner = Sidecar<ExternalProvisioner>;

/// The provisioner as a controller sidecar: Lease `<driver>`, events from
/// `<driver>_<host>`, a claim controller and a volume controller.
#[derive(Debug)]
pub struct ExternalProvisioner;

impl ControllerSidecar for ExternalProvisioner {
    type Config = Config;
    const NAME: &'static str = "provisioner";
    const LEASE_PREFIX: &'static str = "";

    fn event_component(driver: &str, host: &str) -> String {
        format!("{driver}_{host}")
    }

    /// The claim and volume controllers, until `stop`.
    async fn run_controllers(ctx: Arc<Context>, stop: watch::Receiver<bool>) {
        tracing::info!(driver = %ctx.driver_name(), "provisioning");
        let settings = controller::Config::default().concurrency(ctx.config.worker_threads);
        let claims = Controller::new(
            Api::<PersistentVolumeClaim>::all(ctx.client.clone()),
            watcher::Config::default(),
        )
        .with_config(settings.clone())
        .graceful_shutdown_on(stopped(stop.clone()))
        .run(claim::reconcile, claim_error, ctx.clone());
        let volumes = Controller::new(
            Api::<PersistentVolume>::all(ctx.client.clone()),
            watcher::Config::default(),
        )
        .with_config(settings)
        .graceful_shutdown_on(stopped(stop))
        .run(deleter::reconcile, volume_error, ctx.clone());
        tokio::join!(
            drain(claims, "claim reconcile"),
            drain(volumes, "volume reconcile")
        );
        tracing::info!("controllers stopped");
    }
}

fn claim_error(claim: Arc<PersistentVolumeClaim>, error: &Error, ctx: Arc<Context>) -> Action {
    let key = object_key(claim.as_ref());
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

/// This instance's `storage.kubernetes.io/csiProvisionerIdentity`, as upstream's:
/// `<start in Unix milliseconds>-<four pseudo-random digits>-<driver>`.
pub fn identity(ctx: &Context) -> String {
    let since_epoch = ctx
        .started
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    let digits = (since_epoch.subsec_nanos() ^ std::process::id()) % 10_000;
    format!("{}-{digits}-{}", since_epoch.as_millis(), ctx.driver_name())
}
