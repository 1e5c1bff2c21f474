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
//! The sidecar skeleton (start-up, leader election, HTTP endpoint, the shared context) is
//! [`sidecar_common::sidecar`]; this crate is its two controllers:
//! [`attachment::reconcile`] (attach/detach) and [`persistent_volume::reconcile`] (the PV
//! finalizer). `attachment` uses `persistent_volume` (to protect a PV it publishes), not
//! the other way round; both name the finalizer with [`finalizer`].
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use clap::Parser;
//! let config = csi_attacher::Config::parse_from(["csi-attacher", "--csi-address=/csi/csi.sock"]);
//! let client = kube_support::kube_client::client(None).await?;
//! let attacher = csi_attacher::Attacher::new(config, client).await?;
//! attacher.run(kube_support::shutdown::signal_received()).await?;
//! # Ok(()) }
//! ```

pub mod attachment;
pub mod config;
pub mod persistent_volume;
pub mod volume;

use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
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

/// An attacher connected to its driver, ready to run.
pub type Attacher = Sidecar<ExternalAttacher>;

/// Upstream's finalizer, on attachments and on the PVs they publish:
/// `external-attacher/<driver, '/' → '-'>`.
pub fn finalizer(driver: &str) -> String {
    format!("external-attacher/{}", driver.replace('/', "-"))
}

/// The attacher as a controller sidecar: Lease `external-attacher-leader-<driver>`, events
/// from `csi-attacher <driver>`, an attachment controller and a PV controller.
#[derive(Debug)]
pub struct ExternalAttacher;

impl ControllerSidecar for ExternalAttacher {
    type Config = Config;
    const NAME: &'static str = "attacher";
    const LEASE_PREFIX: &'static str = "external-attacher-leader-";

    fn event_component(driver: &str, _host: &str) -> String {
        format!("csi-attacher {driver}")
    }

    async fn run_controllers(ctx: Arc<Context>, stop: watch::Receiver<bool>) {
        tracing::info!(driver = %ctx.driver_name(), "attaching");
        let settings = controller::Config::default().concurrency(ctx.config.worker_threads);
        let attachments = Controller::new(
            Api::<VolumeAttachment>::all(ctx.client.clone()),
            watcher::Config::default(),
        )
        .with_config(settings.clone())
        .graceful_shutdown_on(stopped(stop.clone()))
        .run(attachment::reconcile, attachment_error, ctx.clone());
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
                    .map(ObjectRef::<PersistentVolume>::new)
            },
        )
        .with_config(settings)
        .graceful_shutdown_on(stopped(stop))
        .run(persistent_volume::reconcile, volume_error, ctx.clone());
        tokio::join!(
            drain(attachments, "attachment reconcile"),
            drain(volumes, "volume reconcile")
        );
        tracing::info!("controller stopped");
    }
}

fn attachment_error(va: Arc<VolumeAttachment>, error: &Error, ctx: Arc<Context>) -> Action {
    let name = va.name_any();
    let delay = ctx.backoff.failed(&name);
    tracing::warn!(attachment = %name, %error, retry_in = ?delay, "attach/detach failed");
    Action::requeue(delay)
}

fn volume_error(pv: Arc<PersistentVolume>, error: &Error, ctx: Arc<Context>) -> Action {
    let name = persistent_volume::backoff_key(&pv);
    let delay = ctx.backoff.failed(&name);
    tracing::warn!(volume = %name, %error, retry_in = ?delay, "removing the PV finalizer failed");
    Action::requeue(delay)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finalizer_names_follow_upstream() {
        assert_eq!(
            finalizer("manila.csi.openstack.org"),
            "external-attacher/manila.csi.openstack.org"
        );
        assert_eq!(
            finalizer("example.com/x"),
            "external-attacher/example.com-x"
        );
    }
}
