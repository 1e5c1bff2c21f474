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
//! The sidecar skeleton (start-up, leader election, HTTP endpoint, the shared context) is
//! [`sidecar_common::sidecar`]; this crate is its one controller, [`claim::reconcile`].
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use clap::Parser;
//! let config = csi_resizer::Config::parse_from(["csi-resizer", "--csi-address=/csi/csi.sock"]);
//! let client = kube_support::kube_client::client(None).await?;
//! let resizer = csi_resizer::Resizer::new(config, client).await?;
//! resizer.run(kube_support::shutdown::signal_received()).await?;
//! # Ok(()) }
//! ```

pub mod claim;
pub mod config;

use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
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

/// A resizer connected to its driver, ready to run.
pub type Resizer = Sidecar<ExternalResizer>;

/// The resizer as a controller sidecar: Lease `external-resizer-<driver>`, events from
/// `external-resizer`, one claim controller.
#[derive(Debug)]
pub struct ExternalResizer;

impl ControllerSidecar for ExternalResizer {
    type Config = Config;
    const NAME: &'static str = "resizer";
    const LEASE_PREFIX: &'static str = "external-resizer-";

    fn event_component(_driver: &str, _host: &str) -> String {
        "external-resizer".into()
    }

    async fn run_controllers(ctx: Arc<Context>, stop: watch::Receiver<bool>) {
        tracing::info!(driver = %ctx.driver_name(), "resizing");
        let claims = Controller::new(
            Api::<PersistentVolumeClaim>::all(ctx.client.clone()),
            watcher::Config::default(),
        )
        .with_config(controller::Config::default().concurrency(ctx.config.workers))
        .graceful_shutdown_on(stopped(stop))
        .run(claim::reconcile, claim_error, ctx.clone());
        drain(claims, "claim reconcile").await;
        tracing::info!("controller stopped");
    }
}

fn claim_error(pvc: Arc<PersistentVolumeClaim>, error: &Error, ctx: Arc<Context>) -> Action {
    let name = object_key(pvc.as_ref());
    let delay = ctx.backoff.failed(&name);
    tracing::warn!(claim = %name, %error, retry_in = ?delay, "resize failed");
    Action::requeue(delay)
}
