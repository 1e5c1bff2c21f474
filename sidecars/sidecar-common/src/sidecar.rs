//! The skeleton of a controller sidecar (provisioner, attacher, resizer, snapshotter).
//!
//! A sidecar describes itself by implementing [`ControllerSidecar`] on a marker type: its
//! flags, its Lease name prefix, the component its events name, and its kube-runtime
//! controllers (`reconcile` + `error_policy` + `Controller::new(..).run(..)` over an
//! `Arc<SidecarContext<Config>>`). [`Sidecar`] does the rest the same way for all of them:
//! validate the flags, connect to the driver (Probe until ready, GetPluginInfo,
//! capabilities), build the [`SidecarContext`], serve `/healthz` and `/metrics`, run the
//! controllers under leader election, stop on shutdown. [`main`] is a sidecar binary's
//! whole `main`.
//!
//! ```ignore
//! // src/main.rs of a sidecar
//! #[tokio::main]
//! async fn main() -> anyhow::Result<()> {
//!     Ok(sidecar_common::sidecar::main::<csi_provisioner::ExternalProvisioner>().await?)
//! }
//! ```

use std::sync::Arc;

use clap::Parser;
use kube::Client;
use kube_support::leader::{LeaderElection, lease_name};
use kube_support::{instance, kube_client, shutdown, telemetry};
use tokio::sync::watch;

use crate::context::{SidecarConfig, SidecarContext};
use crate::driver::Driver;
use crate::error::{Error, Result};
use crate::http::Metrics;
use crate::run;

/// What makes one controller sidecar different from another.
pub trait ControllerSidecar: Send + Sync + 'static {
    /// The sidecar's flags: [`crate::flags::CommonFlags`] and
    /// [`crate::flags::RetryFlags`] flattened into its own.
    type Config: Parser + SidecarConfig + Send + Sync + 'static;

    /// What the sidecar is called in start-up errors (`provisioner`).
    const NAME: &'static str;

    /// Prefix of its leader Lease's name, before the sanitised driver name
    /// (`external-attacher-leader-`).
    const LEASE_PREFIX: &'static str;

    /// The `source.component` of its events, for `driver` on `host`.
    fn event_component(driver: &str, host: &str) -> String;

    /// Refuses a driver the sidecar cannot work with (by default every driver will do).
    fn check_driver(driver: &Driver, config: &Self::Config) -> Result<()> {
        let _ = (driver, config);
        Ok(())
    }

    /// Runs the sidecar's controllers until `stop` is set (see [`run::stopped`]).
    fn run_controllers(
        ctx: Arc<SidecarContext<Self::Config>>,
        stop: watch::Receiver<bool>,
    ) -> impl Future<Output = ()> + Send;
}

/// A controller sidecar connected to its driver, ready to run.
pub struct Sidecar<S: ControllerSidecar> {
    ctx: Arc<SidecarContext<S::Config>>,
    election: Option<LeaderElection>,
}

impl<S: ControllerSidecar> std::fmt::Debug for Sidecar<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sidecar")
            .field("sidecar", &S::NAME)
            .field("ctx", &self.ctx)
            .field("election", &self.election)
            .finish()
    }
}

impl<S: ControllerSidecar> Sidecar<S> {
    /// Checks the flags, connects to the driver (waiting for Probe up to `--timeout`) and
    /// reads its name and capabilities.
    pub async fn new(config: S::Config, client: Client) -> Result<Self> {
        let flags = config.common();
        flags.validate()?;
        let driver = Driver::connect(&flags.csi_address, flags.timeout).await?;
        S::check_driver(&driver, &config)?;
        let election = flags
            .leader_election
            .then(|| flags.leader_election(lease_name(S::LEASE_PREFIX, &driver.info.name)));
        let host = instance::name("localhost");
        let component = S::event_component(&driver.info.name, &host);
        let ctx = SidecarContext::new(client, driver, config, host, component);
        Ok(Sidecar {
            ctx: Arc::new(ctx),
            election,
        })
    }

    /// The driver's name.
    pub fn driver_name(&self) -> &str {
        self.ctx.driver_name()
    }

    /// The leader-election identity, with `--leader-election`.
    pub fn leader_identity(&self) -> Option<&str> {
        self.election.as_ref().map(|e| e.identity.as_str())
    }

    /// The CSI call metrics (also served on `--http-endpoint`'s `/metrics`).
    pub fn metrics(&self) -> Arc<Metrics> {
        self.ctx.metrics.clone()
    }

    /// The context the controllers share.
    pub fn context(&self) -> &Arc<SidecarContext<S::Config>> {
        &self.ctx
    }

    /// Runs until `shutdown` resolves (with `--leader-election`, only while leading; losing
    /// the Lease is an error). Serves `--http-endpoint` meanwhile.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<()> {
        let ctx = self.ctx;
        run::run_sidecar(
            ctx.client.clone(),
            self.election.as_ref(),
            ctx.config.common().http_endpoint.as_deref(),
            ctx.metrics.clone(),
            ctx.driver.channel.clone(),
            shutdown,
            |stop| S::run_controllers(ctx.clone(), stop),
        )
        .await
    }
}

/// Why a sidecar binary stopped with an error: what it was doing, and the cause.
#[derive(Debug, thiserror::Error)]
#[error("{doing}")]
pub struct Stopped {
    /// `Kubernetes client`, `starting the provisioner`, `provisioner`.
    pub doing: String,
    /// Why.
    #[source]
    pub source: Error,
}

/// A controller sidecar binary: parse the flags, set up logging (`-v`), build the
/// Kubernetes client (`--kubeconfig`), connect, and run until SIGTERM/SIGINT.
pub async fn main<S: ControllerSidecar>() -> std::result::Result<(), Stopped> {
    let config = S::Config::parse();
    telemetry::init(config.common().verbosity);
    let stopped = |doing: String| move |source| Stopped { doing, source };
    let client = kube_client::client(config.common().kubeconfig.as_deref())
        .await
        .map_err(Error::from)
        .map_err(stopped("Kubernetes client".into()))?;
    let sidecar = Sidecar::<S>::new(config, client)
        .await
        .map_err(stopped(format!("starting the {}", S::NAME)))?;
    sidecar
        .run(shutdown::signal_received())
        .await
        .map_err(stopped(S::NAME.into()))
}
