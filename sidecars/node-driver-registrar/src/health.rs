//! `--http-endpoint`: `/healthz` answers 200 only while the registration socket exists and
//! kubelet has reported the plugin registered (upstream's check).

use std::path::PathBuf;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use tokio::sync::watch;

use crate::registration::Verdict;

#[derive(Clone)]
struct Health {
    socket: PathBuf,
    verdict: watch::Receiver<Verdict>,
}

/// Binds `address` (`host:port` or `:port`) and serves `/healthz` until `shutdown`.
pub async fn serve(
    address: &str,
    socket: PathBuf,
    verdict: watch::Receiver<Verdict>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let bind = sidecar_common::http::parse_address(address)?;
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on --http-endpoint {address:?}: {e}"))?;
    let app = Router::new()
        .route("/healthz", get(healthz))
        .with_state(Health { socket, verdict });
    tracing::info!(address = %bind, "serving /healthz");
    Ok(tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await
        {
            tracing::warn!(%error, "HTTP endpoint stopped");
        }
    }))
}

async fn healthz(State(health): State<Health>) -> (StatusCode, String) {
    if !health.socket.exists() {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "registration socket {} does not exist",
                health.socket.display()
            ),
        );
    }
    match &*health.verdict.borrow() {
        Verdict::Registered => (StatusCode::OK, "ok".to_owned()),
        Verdict::Pending => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "kubelet has not registered the plugin yet".to_owned(),
        ),
        Verdict::Refused(error) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("kubelet refused the plugin: {error}"),
        ),
    }
}
