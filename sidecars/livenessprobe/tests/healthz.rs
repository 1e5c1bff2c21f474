//! `/healthz` over real HTTP against real CSI drivers on unix sockets: the real
//! `manila-csi-plugin` process (200, then 500 once it is killed) and an in-test identity
//! service whose Probe answers ready, not ready or an error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Parser;
use csi_proto::v1::identity_server::{Identity, IdentityServer};
use csi_proto::v1::{
    GetPluginCapabilitiesRequest, GetPluginCapabilitiesResponse, GetPluginInfoRequest,
    GetPluginInfoResponse, ProbeRequest, ProbeResponse,
};
use livenessprobe::Config;
use testkit::drivers::{MANILA_DRIVER, ManilaController, TestIdentity, serve_on_socket};
use testkit::wait_for;
use tonic::{Request, Response, Status};

/// GET `/healthz`: (status, body).
async fn healthz(address: std::net::SocketAddr) -> (u16, String) {
    let answer = reqwest::get(format!("http://{address}/healthz"))
        .await
        .unwrap();
    let status = answer.status().as_u16();
    (status, answer.text().await.unwrap())
}

async fn start_probe(socket: &Path) -> std::net::SocketAddr {
    let config = Config::try_parse_from([
        "livenessprobe".to_string(),
        format!("--csi-address=unix://{}", socket.display()),
        "--http-endpoint=127.0.0.1:0".into(),
        "--probe-timeout=2s".into(),
    ])
    .unwrap();
    let (address, _task) = livenessprobe::serve(&config, std::future::pending())
        .await
        .unwrap();
    address
}

/// What the in-test driver's Probe answers.
#[derive(Clone, Debug)]
enum Answer {
    Ready,
    NotReady,
    Fails(String),
}

/// An in-test driver whose Probe answers what the test set; the rest of its Identity
/// service is the kit's.
struct SwitchableProbe {
    identity: TestIdentity,
    answer: Arc<Mutex<Answer>>,
}

#[tonic::async_trait]
impl Identity for SwitchableProbe {
    async fn get_plugin_info(
        &self,
        request: Request<GetPluginInfoRequest>,
    ) -> Result<Response<GetPluginInfoResponse>, Status> {
        self.identity.get_plugin_info(request).await
    }
    async fn get_plugin_capabilities(
        &self,
        request: Request<GetPluginCapabilitiesRequest>,
    ) -> Result<Response<GetPluginCapabilitiesResponse>, Status> {
        self.identity.get_plugin_capabilities(request).await
    }
    async fn probe(&self, _: Request<ProbeRequest>) -> Result<Response<ProbeResponse>, Status> {
        match self.answer.lock().unwrap().clone() {
            Answer::Ready => Ok(Response::new(ProbeResponse { ready: Some(true) })),
            Answer::NotReady => Ok(Response::new(ProbeResponse { ready: Some(false) })),
            Answer::Fails(message) => Err(Status::failed_precondition(message)),
        }
    }
}

#[tokio::test]
async fn probe_answers_follow_the_drivers_probe() {
    let dir = tempfile::Builder::new()
        .prefix("healthz-")
        .tempdir()
        .unwrap();
    let socket = dir.path().join("csi.sock");
    let answer = Arc::new(Mutex::new(Answer::Ready));
    let driver = SwitchableProbe {
        identity: TestIdentity::node_only("test.csi.example.org"),
        answer: answer.clone(),
    };
    let router = tonic::transport::Server::builder().add_service(IdentityServer::new(driver));
    serve_on_socket(router, &socket).await;
    let address = start_probe(&socket).await;

    assert_eq!(healthz(address).await, (200, "ok".into()));
    *answer.lock().unwrap() = Answer::NotReady;
    assert_eq!(
        healthz(address).await,
        (500, "driver responded but is not ready".into())
    );
    *answer.lock().unwrap() = Answer::Fails("the NFS partner plugin is gone".into());
    let (status, body) = healthz(address).await;
    assert_eq!(status, 500);
    assert!(
        body.contains("FailedPrecondition") && body.contains("the NFS partner plugin is gone"),
        "{body}"
    );
    *answer.lock().unwrap() = Answer::Ready;
    assert_eq!(healthz(address).await, (200, "ok".into()));
}

#[tokio::test]
async fn nothing_listening_is_a_500_naming_the_failure() {
    let dir = tempfile::Builder::new()
        .prefix("healthz-")
        .tempdir()
        .unwrap();
    let address = start_probe(&dir.path().join("absent.sock")).await;
    let (status, body) = healthz(address).await;
    assert_eq!(status, 500);
    assert!(body.starts_with("rpc error: code = Unavailable"), "{body}");
}

#[tokio::test]
async fn real_manila_driver_is_healthy_until_killed() {
    let dir = tempfile::Builder::new()
        .prefix("healthz-")
        .tempdir()
        .unwrap();
    let mut driver = ManilaController::start(dir.path(), MANILA_DRIVER, &[]);
    let address = start_probe(&driver.socket).await;

    // The driver needs a moment to bind its socket: wait for the first 200.
    wait_for("the driver healthy", Duration::from_secs(30), || async {
        match healthz(address).await {
            (200, body) => {
                assert_eq!(body, "ok");
                Ok(Some(()))
            }
            (status, body) => Err(format!("{status} {body}; driver log:\n{}", driver.log())),
        }
    })
    .await;

    driver.kill().await;
    let (status, body) = healthz(address).await;
    assert_eq!(status, 500, "{body}");
    assert!(body.contains("Unavailable"), "{body}");
}
