//! The skeleton every Rust CSI sidecar of this workspace shares, on top of the
//! workspace's Kubernetes layer, [`kube_support`] (client, events, back-off, leader
//! election, finalizers, quantities, logging set-up, shutdown).
//!
//! The controller sidecars (provisioner, attacher, resizer, snapshotter) share one
//! skeleton, [`sidecar`]: each implements [`sidecar::ControllerSidecar`] (flags, Lease
//! prefix, event component, its kube-runtime controllers) and gets start-up, leader
//! election, `/healthz` + `/metrics` and shutdown from [`sidecar::Sidecar`], and its whole
//! `main` from [`sidecar::main`]. Their reconciles get a [`context::SidecarContext`]
//! (client, driver, flags, event recorder, back-off, metrics, and the one timed and
//! metered CSI call, [`context::SidecarContext::call`]) and return a [`ReconcileError`].
//!
//! The pieces:
//!
//! - [`flags::CommonFlags`]: the flags the upstream sidecars share (`--csi-address`,
//!   `--timeout`, `--kubeconfig`, leader election, `--http-endpoint`, `-v`), to
//!   `#[command(flatten)]` into a sidecar's own clap struct, and [`flags::RetryFlags`];
//! - [`driver`]: connecting to the CSI driver with a wait-for-ready Probe loop, reading
//!   GetPluginInfo and the plugin/controller capabilities, and timing one CSI call;
//! - [`secrets`]: the `csi.storage.k8s.io/*-secret-name/namespace` StorageClass parameters,
//!   their `${pvc.name}`-style templates, and reading a Secret's data;
//! - [`http`]: `/healthz` and `/metrics` on `--http-endpoint`;
//! - [`volume`]: a PersistentVolume's CSI source and volume capability;
//! - [`run`]: the run wiring (stop flag, HTTP endpoint, leader election, controller streams).
//!
//! ```no_run
//! use clap::Parser;
//! use kube_support::{kube_client, telemetry};
//! use sidecar_common::{driver, flags::CommonFlags};
//!
//! #[derive(Parser)]
//! struct Flags {
//!     #[command(flatten)]
//!     common: CommonFlags,
//! }
//!
//! # async fn demo() -> sidecar_common::Result<()> {
//! let flags = Flags::parse();
//! telemetry::init(flags.common.verbosity);
//! let driver = driver::Driver::connect(&flags.common.csi_address, flags.common.timeout).await?;
//! let client = kube_client::client(flags.common.kubeconfig.as_deref()).await?;
//! println!("driver {} on {}", driver.info.name, flags.common.csi_address);
//! # let _ = client; Ok(()) }
//! ```

pub mod context;
pub mod driver;
pub mod error;
pub mod flags;
pub mod http;
pub mod run;
pub mod secrets;
pub mod sidecar;
pub mod volume;

pub use error::{CsiCallError, Error, ReconcileError, Result};
