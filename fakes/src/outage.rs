//! The cloud's HTTP server, which can be taken off the network for a while: while it is
//! unreachable nothing listens on its address, so clients see what a network outage looks
//! like to them (new connections refused; with TLS, the front's connections closed before an
//! answer), not an HTTP error. The state (shares, tokens, faults, journal) stays, and the
//! server comes back on the same address.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use wiremock::matchers::any;
use wiremock::{Mock, MockServer};

use crate::error::{Error, Result};
use crate::router::Router;
use crate::state::CloudState;

/// How long taking the server off or bringing it back may take (its listener closing, the
/// address becoming free again).
const SWITCH_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the switch checks the listener.
const SWITCH_POLL: Duration = Duration::from_millis(20);

/// The wiremock server answering every request of one cloud, on a fixed address.
pub(crate) struct Server {
    addr: SocketAddr,
    state: Arc<Mutex<CloudState>>,
    // `None` while the cloud is unreachable.
    running: Mutex<Option<MockServer>>,
}

impl Server {
    /// Serves the cloud's `state` on `listener` (already bound).
    pub(crate) async fn start(
        listener: TcpListener,
        state: Arc<Mutex<CloudState>>,
    ) -> Result<Server> {
        let addr = listener.local_addr().map_err(|source| Error::Bind {
            addr: "the cloud's listener".into(),
            source,
        })?;
        let server = serve(listener, &state).await;
        Ok(Server {
            addr,
            state,
            running: Mutex::new(Some(server)),
        })
    }

    fn running(&self) -> MutexGuard<'_, Option<MockServer>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the server is listening.
    pub(crate) fn is_reachable(&self) -> bool {
        self.running().is_some()
    }

    /// Stops listening (requests being answered get their answer; idle connections close)
    /// and returns once connections to the address are refused; nothing when already off.
    pub(crate) async fn take_offline(&self) -> Result<()> {
        let Some(server) = self.running().take() else {
            return Ok(());
        };
        // Dropping it signals the server's thread to stop accepting and close connections.
        drop(server);
        let addr = self.addr;
        poll(
            &format!("the cloud to stop listening on {addr}"),
            || match TcpStream::connect_timeout(&addr, SWITCH_POLL) {
                Ok(_) => Err("a connection was still accepted".to_string()),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => Ok(()),
                Err(e) => Err(format!("connecting: {e}")),
            },
        )
        .await
    }

    /// Listens again on the same address, serving the same state; nothing when listening.
    pub(crate) async fn bring_online(&self) -> Result<()> {
        if self.is_reachable() {
            return Ok(());
        }
        let addr = self.addr;
        // The old listener is closed (take_offline saw connections refused); binding can
        // still fail for a moment while its socket is released.
        let listener = poll(&format!("the cloud's address {addr} to be free"), || {
            TcpListener::bind(addr).map_err(|e| format!("binding: {e}"))
        })
        .await?;
        let server = serve(listener, &self.state).await;
        let mut running = self.running();
        if running.is_none() {
            *running = Some(server);
        }
        Ok(())
    }
}

/// A wiremock server on `listener` routing every request to the cloud's `state`.
async fn serve(listener: TcpListener, state: &Arc<Mutex<CloudState>>) -> MockServer {
    let server = MockServer::builder()
        .listener(listener)
        .disable_request_recording()
        .start()
        .await;
    Mock::given(any())
        .respond_with(Router {
            state: Arc::clone(state),
        })
        .mount(&server)
        .await;
    server
}

/// Runs `check` every [`SWITCH_POLL`] until it succeeds, for at most [`SWITCH_TIMEOUT`]; the
/// error names `what` and the last failure.
async fn poll<T>(what: &str, mut check: impl FnMut() -> Result<T, String>) -> Result<T> {
    let deadline = Instant::now() + SWITCH_TIMEOUT;
    loop {
        let last = match check() {
            Ok(value) => return Ok(value),
            Err(last) => last,
        };
        if Instant::now() >= deadline {
            return Err(Error::Control(format!(
                "timed out after {SWITCH_TIMEOUT:?} waiting for {what}; last: {last}"
            )));
        }
        tokio::time::sleep(SWITCH_POLL).await;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use crate::{CloudConfig, FakeCloud, Operation, Service};

    async fn versions(cloud: &FakeCloud) -> Result<reqwest::StatusCode, reqwest::Error> {
        reqwest::Client::new()
            .get(cloud.manila_url())
            .send()
            .await
            .map(|r| r.status())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unreachable_cloud_refuses_connections_then_comes_back_with_its_state() {
        let cloud = FakeCloud::start(CloudConfig::default()).await.unwrap();
        assert!(versions(&cloud).await.unwrap().is_success());
        cloud
            .add_fault(crate::FaultRule::new(
                Operation::ShareCreate,
                crate::FaultAction::Latency { ms: 1 },
            ))
            .unwrap();

        cloud.set_reachable(false).await.unwrap();
        assert!(!cloud.is_reachable());
        let refused = versions(&cloud).await.unwrap_err();
        assert!(refused.is_connect(), "{refused:?}");
        // Idempotent.
        cloud.set_reachable(false).await.unwrap();

        cloud.set_reachable(true).await.unwrap();
        assert!(cloud.is_reachable());
        assert!(versions(&cloud).await.unwrap().is_success());
        // Same state: the fault rule is still there, and the journal saw the requests
        // before and after but nothing while it was off.
        assert_eq!(cloud.faults().len(), 1);
        let manila: Vec<_> = cloud
            .journal()
            .into_iter()
            .filter(|e| e.service == Service::Manila)
            .collect();
        assert_eq!(manila.len(), 2, "{manila:?}");
        cloud.set_reachable(true).await.unwrap();
        assert!(versions(&cloud).await.unwrap().is_success());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn behind_tls_the_front_closes_connections_while_the_cloud_is_off() {
        let cloud = FakeCloud::builder(CloudConfig::default())
            .tls(true)
            .start()
            .await
            .unwrap();
        let ca = reqwest::Certificate::from_pem(cloud.ca_pem().unwrap().as_bytes()).unwrap();
        let client = reqwest::Client::builder()
            .use_rustls_tls()
            .add_root_certificate(ca)
            .build()
            .unwrap();
        let get = || client.get(cloud.manila_url()).send();
        assert!(get().await.unwrap().status().is_success());
        cloud.set_reachable(false).await.unwrap();
        let failed = get().await.unwrap_err();
        assert!(failed.status().is_none(), "no HTTP answer: {failed:?}");
        cloud.set_reachable(true).await.unwrap();
        assert!(get().await.unwrap().status().is_success());
    }
}
