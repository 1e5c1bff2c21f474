//! Waiting for a component to answer its health endpoint.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use kube::Client;

use super::error::{Error, Result};
use super::process::{ComponentProcess, log_tail};

/// How often a health endpoint is polled while waiting.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// A health endpoint: a client for the component's address and the path to GET; it is
/// healthy when the request succeeds and the body is `ok` (or etcd's `"health":"true"`).
pub(crate) struct HealthCheck {
    pub(crate) client: Client,
    pub(crate) path: &'static str,
}

impl HealthCheck {
    /// A client for a component's own port: the server certificate is verified against the
    /// cluster CA (`ca_file`); no credentials (health paths are open to anyone).
    pub(crate) fn anonymous(
        url: &str,
        ca_file: Option<PathBuf>,
        path: &'static str,
    ) -> Result<Self> {
        let uri: http::Uri = url
            .parse()
            .map_err(|e: http::uri::InvalidUri| Error::Client {
                target: url.to_string(),
                source: Box::new(e),
            })?;
        let mut config = kube::Config::new(uri);
        config.root_cert_file = ca_file;
        config.connect_timeout = Some(Duration::from_secs(2));
        config.read_timeout = Some(Duration::from_secs(5));
        let client = Client::try_from(config).map_err(|e| Error::Client {
            target: url.to_string(),
            source: Box::new(e),
        })?;
        Ok(Self { client, path })
    }

    /// One probe: `Ok(())` if healthy, else what was seen.
    pub(crate) async fn probe(&self) -> std::result::Result<(), String> {
        let request = http::Request::get(self.path)
            .body(Vec::new())
            .map_err(|e| e.to_string())?;
        match self.client.request_text(request).await {
            Ok(body) if body.trim() == "ok" || body.contains("\"health\":\"true\"") => Ok(()),
            Ok(body) => Err(format!("GET {} answered {:?}", self.path, truncate(&body))),
            Err(e) => Err(format!("GET {}: {}", self.path, truncate(&e.to_string()))),
        }
    }
}

/// Polls `check` until it passes, failing early if the process exits, or with `NotReady`
/// (naming the component, the last probe result and the tail of its log) after `timeout`.
pub(crate) async fn wait_ready(
    process: &mut ComponentProcess,
    check: &HealthCheck,
    timeout: Duration,
) -> Result<Duration> {
    let start = Instant::now();
    loop {
        process.check_running()?;
        match check.probe().await {
            Ok(()) => {
                let took = start.elapsed();
                tracing::debug!(component = process.name(), ?took, "ready");
                return Ok(took);
            }
            Err(seen) if start.elapsed() >= timeout => {
                // It may have died while we probed: say so rather than "not ready".
                process.check_running()?;
                return Err(Error::NotReady {
                    component: process.name(),
                    timeout,
                    last_seen: seen,
                    log: process.log().to_path_buf(),
                    log_tail: log_tail(process.log()),
                });
            }
            Err(_) => {}
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

fn truncate(text: &str) -> String {
    const MAX: usize = 300;
    match text.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}
