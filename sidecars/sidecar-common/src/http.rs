//! `--http-endpoint`: `/healthz` (Probe of the driver) and `/metrics` (Prometheus text
//! format: CSI operation counts and durations per method and gRPC code, as upstream's
//! `csi_sidecar_operations_seconds`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use csi_proto::v1::ProbeRequest;
use csi_proto::v1::identity_client::IdentityClient;
use tonic::transport::Channel;

use crate::error::{Error, Result};

/// Counts and total seconds of CSI calls, keyed by (method, gRPC code).
#[derive(Debug, Default)]
pub struct Metrics {
    operations: Mutex<BTreeMap<(String, String), (u64, f64)>>,
}

impl Metrics {
    /// Records one CSI call.
    pub fn observe(&self, method: &str, code: tonic::Code, took: Duration) {
        let mut operations = self.operations.lock().unwrap_or_else(|e| e.into_inner());
        let entry = operations
            .entry((method.to_string(), format!("{code:?}")))
            .or_insert((0, 0.0));
        entry.0 += 1;
        entry.1 += took.as_secs_f64();
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let operations = self.operations.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = String::from(
            "# HELP csi_sidecar_operations_seconds Duration of CSI operations\n\
             # TYPE csi_sidecar_operations_seconds summary\n",
        );
        for ((method, code), (count, sum)) in operations.iter() {
            let labels = format!("method_name=\"{method}\",grpc_status_code=\"{code}\"");
            out.push_str(&format!(
                "csi_sidecar_operations_seconds_count{{{labels}}} {count}\n"
            ));
            out.push_str(&format!(
                "csi_sidecar_operations_seconds_sum{{{labels}}} {sum}\n"
            ));
        }
        out
    }
}

#[derive(Clone)]
struct HttpState {
    metrics: Arc<Metrics>,
    driver: Option<Channel>,
}

/// Parses `host:port` or `:port` (all interfaces).
pub fn parse_address(address: &str) -> Result<SocketAddr> {
    let full = if address.starts_with(':') {
        format!("0.0.0.0{address}")
    } else {
        address.to_string()
    };
    full.parse()
        .map_err(|e: std::net::AddrParseError| Error::InvalidFlag {
            flag: "--http-endpoint",
            reason: format!("{address:?}: {e} (expected host:port or :port)"),
        })
}

/// Binds `address` and serves until `shutdown` resolves; returns the bound address and
/// the serving task. `/healthz` answers 200 when `driver` (if any) answers Probe.
pub async fn serve(
    address: &str,
    metrics: Arc<Metrics>,
    driver: Option<Channel>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let socket = parse_address(address)?;
    let listener = tokio::net::TcpListener::bind(socket)
        .await
        .map_err(|source| Error::Http {
            address: address.into(),
            source,
        })?;
    let bound = listener.local_addr().map_err(|source| Error::Http {
        address: address.into(),
        source,
    })?;
    let app = Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics_text))
        .with_state(HttpState { metrics, driver });
    let task = tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await
        {
            tracing::warn!(%error, "HTTP endpoint stopped");
        }
    });
    tracing::info!(address = %bound, "serving /healthz and /metrics");
    Ok((bound, task))
}

async fn healthz(State(state): State<HttpState>) -> (StatusCode, String) {
    let Some(channel) = state.driver else {
        return (StatusCode::OK, "ok".into());
    };
    match IdentityClient::new(channel).probe(ProbeRequest {}).await {
        Ok(r) if r.get_ref().ready.unwrap_or(true) => (StatusCode::OK, "ok".into()),
        Ok(_) => (StatusCode::INTERNAL_SERVER_ERROR, "driver not ready".into()),
        Err(status) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("driver probe failed: {}", status.message()),
        ),
    }
}

async fn metrics_text(State(state): State<HttpState>) -> String {
    state.metrics.render()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn metrics_render_counts_and_sums() {
        let metrics = Metrics::default();
        metrics.observe(
            "/csi.v1.Controller/CreateVolume",
            tonic::Code::Ok,
            Duration::from_millis(500),
        );
        metrics.observe(
            "/csi.v1.Controller/CreateVolume",
            tonic::Code::Ok,
            Duration::from_millis(500),
        );
        let text = metrics.render();
        assert!(
            text.contains("csi_sidecar_operations_seconds_count{method_name=\"/csi.v1.Controller/CreateVolume\",grpc_status_code=\"Ok\"} 2"),
            "{text}"
        );
        assert!(
            text.contains(
                "_sum{method_name=\"/csi.v1.Controller/CreateVolume\",grpc_status_code=\"Ok\"} 1"
            ),
            "{text}"
        );
    }

    #[test]
    fn addresses_parse_and_bad_ones_are_named() {
        assert_eq!(parse_address(":8080").unwrap().port(), 8080);
        assert_eq!(parse_address("127.0.0.1:0").unwrap().port(), 0);
        let error = parse_address("nonsense").unwrap_err().to_string();
        assert!(
            error.contains("--http-endpoint") && error.contains("nonsense"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn serves_healthz_and_metrics() {
        let metrics = Arc::new(Metrics::default());
        metrics.observe(
            "/csi.v1.Identity/Probe",
            tonic::Code::Ok,
            Duration::from_millis(1),
        );
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let (bound, task) = serve("127.0.0.1:0", metrics, None, async {
            let _ = rx.await;
        })
        .await
        .unwrap();
        let get = |path: &str| {
            let path = path.to_string();
            async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut stream = tokio::net::TcpStream::connect(bound).await.unwrap();
                stream
                    .write_all(
                        format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                            .as_bytes(),
                    )
                    .await
                    .unwrap();
                let mut answer = String::new();
                stream.read_to_string(&mut answer).await.unwrap();
                answer
            }
        };
        let health = get("/healthz").await;
        assert!(
            health.starts_with("HTTP/1.1 200") && health.ends_with("ok"),
            "{health}"
        );
        let text = get("/metrics").await;
        assert!(text.contains("/csi.v1.Identity/Probe"), "{text}");
        tx.send(()).unwrap();
        task.await.unwrap();
    }
}
