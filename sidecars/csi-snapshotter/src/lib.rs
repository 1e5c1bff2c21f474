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
//! The sidecar skeleton (start-up, leader election, HTTP endpoint, the shared context) is
//! [`sidecar_common::sidecar`]; this crate is its one controller, [`content::reconcile`].
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use clap::Parser;
//! let config = csi_snapshotter::Config::parse_from(["csi-snapshotter", "--csi-address=/csi/csi.sock"]);
//! let client = kube_support::kube_client::client(None).await?;
//! let snapshotter = csi_snapshotter::Snapshotter::new(config, client).await?;
//! snapshotter.run(kube_support::shutdown::signal_received()).await?;
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

use csi_proto::v1::controller_service_capability::rpc;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::watcher;
use sidecar_common::context::SidecarContext;
use sidecar_common::driver::Driver;
use sidecar_common::run::{drain, stopped};
use sidecar_common::sidecar::{ControllerSidecar, Sidecar};
use snapshot_controller::VolumeSnapshotContent;
use tokio::sync::watch;

pub use config::Config;
pub use error::{Error, Result};

/// Prefix of the leader Lease name, as upstream's.
pub const LEASE_PREFIX: &str = "external-snapshotter-leader-";

/// Everything a reconcile needs.
pub type Context = SidecarContext<Config>;

/// A snapshotter connected to its driver, ready to run.
pub type Snapshotter = Sidecar<ExternalSnapshotter>;

/// The snapshotter as a controller sidecar: Lease [`LEASE_PREFIX`]`<driver>`, events from
/// `csi-snapshotter <driver>`, one content controller; a driver without
/// CREATE_DELETE_SNAPSHOT is refused at start.
#[derive(Debug)]
pub struct ExternalSnapshotter;

impl ControllerSidecar for ExternalSnapshotter {
    type Config = Config;
    const NAME: &'static str = "snapshotter";
    const LEASE_PREFIX: &'static str = LEASE_PREFIX;

    fn event_component(driver: &str, _host: &str) -> String {
        format!("csi-snapshotter {driver}")
    }

    fn check_driver(driver: &Driver, config: &Config) -> sidecar_common::Result<()> {
        if driver
            .info
            .has_controller_rpc(rpc::Type::CreateDeleteSnapshot)
        {
            return Ok(());
        }
        Err(sidecar_common::Error::InvalidFlag {
            flag: "--csi-address",
            reason: format!(
                "the driver {} at {} does not have the CREATE_DELETE_SNAPSHOT controller capability",
                driver.info.name, config.common.csi_address
            ),
        })
    }

    /// The content controller, until `stop`.
    async fn run_controllers(ctx: Arc<Context>, stop: watch::Receiver<bool>) {
        tracing::info!(driver = %ctx.driver_name(), "snapshotting");
        let settings = controller::Config::default().concurrency(ctx.config.worker_threads);
        let contents = Controller::new(
            Api::<VolumeSnapshotContent>::all(ctx.client.clone()),
            watcher::Config::default(),
        )
        .with_config(settings)
        .graceful_shutdown_on(stopped(stop))
        .run(content::reconcile, content_error, ctx.clone());
        drain(contents, "content reconcile").await;
        tracing::info!("controller stopped");
    }
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
