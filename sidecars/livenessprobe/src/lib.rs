//! A CSI livenessprobe in Rust, behaving as upstream's `livenessprobe` sidecar: an HTTP
//! endpoint (`--http-endpoint`, default `:9808`; legacy `--health-port`) whose `GET /healthz`
//! calls the driver's Probe over `--csi-address` with `--probe-timeout` and answers
//! `200 ok` when the driver is ready, `500` with the reason otherwise.
//!
//! The driver is connected lazily, so the probe starts (and reports 500) while the driver
//! is not up yet, and recovers when it comes back.
//!
//! ```no_run
//! # async fn demo() -> livenessprobe::Result<()> {
//! use clap::Parser;
//! let config = livenessprobe::Config::parse_from(["livenessprobe", "--csi-address=/csi/csi.sock"]);
//! let (address, task) = livenessprobe::serve(&config, std::future::pending()).await?;
//! println!("serving on {address}");
//! # let _ = task; Ok(()) }
//! ```

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use clap::Parser;
use csi_proto::Endpoint;
use csi_proto::v1::ProbeRequest;
use csi_proto::v1::identity_client::IdentityClient;
use kube_support::go_duration::parse_go_duration as parse_duration;
use sidecar_common::CsiCallError;
use tonic::transport::Channel;

/// What can stop the probe from serving.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `--csi-address` is not a usable endpoint.
    #[error("--csi-address {address:?}")]
    Endpoint {
        /// The address as given.
        address: String,
        /// Why.
        #[source]
        source: csi_proto::Error,
    },
    /// The HTTP endpoint is invalid or cannot be bound.
    #[error(transparent)]
    Http(#[from] sidecar_common::Error),
    /// Binding the HTTP listener failed.
    #[error("cannot listen on {address}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `livenessprobe` flags (names and defaults as upstream).
#[derive(Clone, Debug, Parser)]
#[command(name = "livenessprobe", version, about = "CSI liveness probe")]
pub struct Config {
    /// The CSI driver's socket: a path or `unix:///path`.
    #[arg(
        long = "csi-address",
        env = "ADDRESS",
        default_value = "/run/csi/socket"
    )]
    pub csi_address: String,

    /// `host:port` or `:port` serving `/healthz`.
    #[arg(long = "http-endpoint", default_value = ":9808")]
    pub http_endpoint: String,

    /// Deprecated: the port to serve on (all interfaces); wins over `--http-endpoint`.
    #[arg(long = "health-port")]
    pub health_port: Option<u16>,

    /// How long one Probe may take.
    #[arg(long = "probe-timeout", default_value = "1s", value_parser = parse_duration)]
    pub probe_timeout: Duration,

    /// Share the HTTP endpoint's port with other probes listening on it (`SO_REUSEPORT`;
    /// an addition, off by default). For clusters whose pods share one network namespace
    /// (the harness's embedded cluster sets the variable in every pod), where two replicas'
    /// probes would otherwise collide; where each pod has its own network, as on a real
    /// cluster, it changes nothing.
    #[arg(long = "http-endpoint-reuse-port", env = "LIVENESSPROBE_HTTP_ENDPOINT_REUSE_PORT",
          num_args = 0..=1, default_missing_value = "true", default_value_t = false,
          action = clap::ArgAction::Set)]
    pub reuse_port: bool,

    /// Log verbosity as klog's `-v`. `RUST_LOG` wins.
    #[arg(short = 'v', long = "v", default_value_t = 2)]
    pub verbosity: u8,
}

impl Config {
    /// The address to listen on: `--health-port` if given, else `--http-endpoint`.
    pub fn listen_address(&self) -> Result<SocketAddr> {
        match self.health_port {
            Some(port) => Ok(SocketAddr::from(([0, 0, 0, 0], port))),
            None => Ok(sidecar_common::http::parse_address(&self.http_endpoint)?),
        }
    }
}

#[derive(Clone)]
struct Probe {
    channel: Channel,
    timeout: Duration,
}

/// Binds the HTTP endpoint and serves `/healthz` until `shutdown` resolves; returns the
/// bound address and the serving task.
pub async fn serve(
    config: &Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let endpoint = Endpoint::parse(&config.csi_address).map_err(|source| Error::Endpoint {
        address: config.csi_address.clone(),
        source,
    })?;
    let channel = csi_proto::connect_lazy(&endpoint).map_err(|source| Error::Endpoint {
        address: config.csi_address.clone(),
        source,
    })?;
    let address = config.listen_address()?;
    let listener = listen(address, config.reuse_port)
        .await
        .map_err(|source| Error::Bind { address, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| Error::Bind { address, source })?;
    let app = Router::new()
        .route("/healthz", get(healthz))
        .with_state(Probe {
            channel,
            timeout: config.probe_timeout,
        });
    let task = tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await
        {
            tracing::warn!(%error, "HTTP endpoint stopped");
        }
    });
    tracing::info!(address = %bound, csi = %endpoint, "serving /healthz");
    Ok((bound, task))
}

/// A listener on `address`; with `reuse_port`, one that other `SO_REUSEPORT` listeners may
/// share.
async fn listen(address: SocketAddr, reuse_port: bool) -> std::io::Result<tokio::net::TcpListener> {
    if !reuse_port {
        return tokio::net::TcpListener::bind(address).await;
    }
    let socket = if address.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.set_reuseport(true)?;
    socket.bind(address)?;
    socket.listen(128)
}

/// One Probe of the driver: `Ok` when ready, else why not.
pub async fn probe(channel: Channel, timeout: Duration) -> std::result::Result<(), String> {
    let mut identity = IdentityClient::new(channel);
    match tokio::time::timeout(timeout, identity.probe(ProbeRequest {})).await {
        Ok(Ok(answer)) if answer.get_ref().ready.unwrap_or(true) => Ok(()),
        Ok(Ok(_)) => Err("driver responded but is not ready".into()),
        Ok(Err(status)) => Err(CsiCallError {
            call: "Probe",
            status,
        }
        .to_string()),
        Err(_) => Err(format!("driver did not answer Probe within {timeout:?}")),
    }
}

async fn healthz(State(state): State<Probe>) -> (StatusCode, String) {
    match probe(state.channel, state.timeout).await {
        Ok(()) => {
            tracing::debug!("health check succeeded");
            (StatusCode::OK, "ok".into())
        }
        Err(reason) => {
            tracing::warn!(%reason, "health check failed");
            (StatusCode::INTERNAL_SERVER_ERROR, reason)
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn parse(args: &[&str]) -> Config {
        Config::try_parse_from(std::iter::once("livenessprobe").chain(args.iter().copied()))
            .unwrap()
    }

    #[tokio::test]
    async fn only_probes_that_reuse_the_port_share_it() {
        let first = parse(&[
            "--csi-address=/nonexistent/csi.sock",
            "--http-endpoint=127.0.0.1:0",
            "--http-endpoint-reuse-port",
        ]);
        let (address, task) = serve(&first, std::future::pending()).await.unwrap();
        let endpoint = format!("--http-endpoint={address}");
        let second = parse(&[
            "--csi-address=/nonexistent/csi.sock",
            &endpoint,
            "--http-endpoint-reuse-port",
        ]);
        let (shared, second_task) = serve(&second, std::future::pending()).await.unwrap();
        assert_eq!(shared, address);
        let plain = parse(&["--csi-address=/nonexistent/csi.sock", &endpoint]);
        let error = serve(&plain, std::future::pending()).await.unwrap_err();
        assert!(matches!(error, Error::Bind { .. }), "{error}");
        task.abort();
        second_task.abort();
    }

    #[test]
    fn defaults_match_upstream() {
        let config = parse(&[]);
        assert!(!config.reuse_port);
        assert_eq!(config.listen_address().unwrap().port(), 9808);
        assert_eq!(config.probe_timeout, Duration::from_secs(1));
    }

    #[test]
    fn health_port_wins_over_http_endpoint() {
        let config = parse(&["--health-port=9999", "--http-endpoint=127.0.0.1:1234"]);
        assert_eq!(
            config.listen_address().unwrap(),
            "0.0.0.0:9999".parse().unwrap()
        );
        let config = parse(&["--http-endpoint=127.0.0.1:1234", "--probe-timeout=3s"]);
        assert_eq!(
            config.listen_address().unwrap(),
            "127.0.0.1:1234".parse().unwrap()
        );
        assert_eq!(config.probe_timeout, Duration::from_secs(3));
    }

    #[test]
    fn a_bad_endpoint_is_named() {
        let error = parse(&["--http-endpoint=nowhere"])
            .listen_address()
            .unwrap_err()
            .to_string();
        assert!(error.contains("nowhere"), "{error}");
    }
}
