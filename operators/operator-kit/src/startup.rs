//! The pieces every operator binary starts with: the flags they share ([`CommonFlags`]:
//! leader election, metrics, verbosity), logging whose level `spec.operatorLogLevel` changes
//! at run time ([`init_logging`], on kube-support's stderr layer), the `/metrics` server
//! ([`serve_metrics`]) and running the controller while holding the leader Lease
//! ([`run_controller`]); [`serve_and_run`] is all of a binary's `main` after its controller's
//! context is built.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use clap::{ArgAction, Args};
use kube::Client;
use kube_support::go_duration::parse_go_duration;
use kube_support::leader::{LeaderElection, LeaderError};
use kube_support::telemetry::level_for;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::api::LogLevel;
use crate::identity::OperatorIdentity;
use crate::metrics::Metrics;

/// Starting or running the operator failed.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    /// The metrics address cannot be listened on.
    #[error("listening for metrics on {address}")]
    Listen {
        /// The address.
        address: SocketAddr,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// Leader election failed, or the Lease was lost.
    #[error("leader election")]
    LeaderElection(#[from] LeaderError),
}

/// The flags every operator has (`#[command(flatten)]` them into its own).
#[derive(Clone, Debug, Args)]
pub struct CommonFlags {
    /// Act only while holding the leader Lease (safe with several replicas).
    #[arg(long = "leader-election", num_args = 0..=1, default_missing_value = "true",
          default_value_t = true, action = ArgAction::Set)]
    pub leader_election: bool,
    /// Validity of the leader Lease after its last renewal.
    #[arg(long, default_value = "15s", value_parser = parse_go_duration)]
    pub leader_election_lease_duration: Duration,
    /// Renew the Lease this long before it expires at the latest.
    #[arg(long, default_value = "10s", value_parser = parse_go_duration)]
    pub leader_election_renew_deadline: Duration,
    /// `host:port` serving Prometheus `/metrics` (off when absent).
    #[arg(long)]
    pub metrics_address: Option<SocketAddr>,
    /// Verbosity as klog's `-v` (spec.operatorLogLevel overrides it; RUST_LOG wins over both).
    #[arg(short = 'v', long = "v", default_value_t = 2)]
    pub verbosity: u8,
}

/// Called with the operator's own log level when `spec.operatorLogLevel` changes.
pub type LogLevelHook = Box<dyn Fn(LogLevel) + Send + Sync>;

/// Installs the log subscriber at `verbosity`; the returned hook changes the level at run
/// time (spec.operatorLogLevel), unless `RUST_LOG` is set.
pub fn init_logging(verbosity: u8) -> LogLevelHook {
    let from_env = EnvFilter::try_from_default_env().ok();
    let fixed = from_env.is_some();
    let filter = from_env.unwrap_or_else(|| EnvFilter::new(level_for(verbosity)));
    let (filter, handle) = tracing_subscriber::reload::Layer::new(filter);
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(kube_support::telemetry::stderr_layer())
        .try_init();
    let current = std::sync::Mutex::new(None::<LogLevel>);
    Box::new(move |level: LogLevel| {
        if fixed {
            return;
        }
        let mut current = current.lock().unwrap_or_else(|e| e.into_inner());
        if *current == Some(level) {
            return;
        }
        *current = Some(level);
        if let Err(error) = handle.reload(EnvFilter::new(level_for(level.verbosity()))) {
            tracing::warn!(error = %error, "cannot change the log level");
        } else {
            tracing::info!(?level, "operator log level changed");
        }
    })
}

/// Serves `metrics` at `http://<address>/metrics` in the background; the address bound (a
/// port 0 becomes the one chosen).
pub async fn serve_metrics(
    address: SocketAddr,
    metrics: Arc<Metrics>,
) -> Result<SocketAddr, StartupError> {
    use axum::routing::get;
    let listen = |source| StartupError::Listen { address, source };
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(listen)?;
    let bound = listener.local_addr().map_err(listen)?;
    let app = axum::Router::new().route(
        "/metrics",
        get(move || {
            let metrics = metrics.clone();
            async move { metrics.render() }
        }),
    );
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app).await {
            tracing::warn!(error = %error, "metrics server stopped");
        }
    });
    Ok(bound)
}

/// A future that resolves when the controller must stop.
pub type Shutdown = Pin<Box<dyn Future<Output = ()> + Send + Sync>>;

/// Runs `controller` (given the future that tells it to stop) until SIGTERM/SIGINT: with
/// leader election (`flags.leader_election`), only while this replica (`instance`) holds
/// the Lease `<operator_name>-lock` in `namespace`, which it releases on shutdown for the
/// next replica.
pub async fn run_controller<F, Fut>(
    client: Client,
    identity: &OperatorIdentity,
    namespace: &str,
    instance: &str,
    flags: &CommonFlags,
    controller: F,
) -> Result<(), StartupError>
where
    F: FnOnce(Shutdown) -> Fut,
    Fut: Future<Output = ()>,
{
    if !flags.leader_election {
        controller(Box::pin(kube_support::shutdown::signal_received())).await;
        return Ok(());
    }
    let election = LeaderElection {
        lease_name: identity.lease_name(),
        namespace: namespace.to_string(),
        identity: format!("{instance}_{}", std::process::id()),
        lease_duration: flags.leader_election_lease_duration,
        renew_deadline: flags.leader_election_renew_deadline,
    };
    // The controller stops when the signal arrives; so does the election, which then
    // releases the Lease for the next replica.
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let stop: Shutdown = Box::pin(async move {
        let _ = stop_rx.wait_for(|stop| *stop).await;
    });
    let work = async move {
        controller(stop).await;
        Ok(())
    };
    let shutdown = async move {
        kube_support::shutdown::signal_received().await;
        let _ = stop_tx.send(true);
    };
    election.run(client, work, shutdown).await?;
    Ok(())
}

/// What an operator says when it starts: its driver's namespace, its version and release.
#[derive(Clone, Copy, Debug)]
pub struct Starting<'a> {
    /// The namespace of its driver.
    pub namespace: &'a str,
    /// The version it runs.
    pub version: &'a str,
    /// The release it installs (`current`, `previous`).
    pub release: &'a str,
}

/// The rest of an operator binary's `main` once its controller's context is built: serves
/// `metrics` at `flags.metrics_address` (when set), says it is `starting`, runs `controller`
/// as [`run_controller`] does until SIGTERM/SIGINT, and says it stopped.
pub async fn serve_and_run<F, Fut>(
    client: Client,
    identity: &OperatorIdentity,
    instance: &str,
    flags: &CommonFlags,
    metrics: Arc<Metrics>,
    starting: Starting<'_>,
    controller: F,
) -> Result<(), StartupError>
where
    F: FnOnce(Shutdown) -> Fut,
    Fut: Future<Output = ()>,
{
    if let Some(address) = flags.metrics_address {
        let bound = serve_metrics(address, metrics).await?;
        tracing::info!(%bound, "serving /metrics");
    }
    let Starting {
        namespace,
        version,
        release,
    } = starting;
    tracing::info!(namespace, version, release, "starting");
    run_controller(client, identity, namespace, instance, flags, controller).await?;
    tracing::info!("stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Flags {
        #[command(flatten)]
        common: CommonFlags,
    }

    #[test]
    fn the_common_flags_default_to_leader_election_without_metrics() {
        let flags = Flags::parse_from(["op"]).common;
        assert!(flags.leader_election);
        assert_eq!(
            flags.leader_election_lease_duration,
            Duration::from_secs(15)
        );
        assert_eq!(
            flags.leader_election_renew_deadline,
            Duration::from_secs(10)
        );
        assert_eq!(flags.metrics_address, None);
        assert_eq!(flags.verbosity, 2);
        let flags = Flags::parse_from([
            "op",
            "--leader-election=false",
            "--metrics-address",
            "127.0.0.1:0",
            "-v",
            "5",
        ])
        .common;
        assert!(!flags.leader_election);
        assert_eq!(flags.metrics_address, Some("127.0.0.1:0".parse().unwrap()));
        assert_eq!(flags.verbosity, 5);
    }

    #[tokio::test]
    async fn metrics_are_served_at_the_bound_address() {
        let metrics = Arc::new(Metrics::new(&crate::identity::TEST_IDENTITY, &[]));
        metrics.reconcile();
        let bound = serve_metrics("127.0.0.1:0".parse().unwrap(), metrics)
            .await
            .unwrap();
        assert_ne!(bound.port(), 0);
        let mut stream = tokio::net::TcpStream::connect(bound).await.unwrap();
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(
            answer.contains("example_operator_reconciles_total 1\n"),
            "{answer}"
        );
    }
}
