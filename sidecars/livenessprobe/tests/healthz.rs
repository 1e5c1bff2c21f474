//! `/healthz` over real HTTP against real CSI drivers on unix sockets: the real
//! `manila-csi-plugin` process (200, then 500 once it is killed) and an in-test identity
//! service whose Probe answers ready, not ready or an error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use csi_proto::v1::identity_server::{Identity, IdentityServer};
use csi_proto::v1::{
    GetPluginCapabilitiesRequest, GetPluginCapabilitiesResponse, GetPluginInfoRequest,
    GetPluginInfoResponse, ProbeRequest, ProbeResponse,
};
use csi_proto::{Endpoint, Listener};
use livenessprobe::Config;
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

struct TestIdentity(Arc<Mutex<Answer>>);

#[tonic::async_trait]
impl Identity for TestIdentity {
    async fn get_plugin_info(
        &self,
        _: Request<GetPluginInfoRequest>,
    ) -> Result<Response<GetPluginInfoResponse>, Status> {
        Ok(Response::new(GetPluginInfoResponse {
            name: "test.csi.example.org".into(),
            vendor_version: "1".into(),
            manifest: Default::default(),
        }))
    }
    async fn get_plugin_capabilities(
        &self,
        _: Request<GetPluginCapabilitiesRequest>,
    ) -> Result<Response<GetPluginCapabilitiesResponse>, Status> {
        Ok(Response::new(GetPluginCapabilitiesResponse::default()))
    }
    async fn probe(&self, _: Request<ProbeRequest>) -> Result<Response<ProbeResponse>, Status> {
        match self.0.lock().unwrap().clone() {
            Answer::Ready => Ok(Response::new(ProbeResponse { ready: Some(true) })),
            Answer::NotReady => Ok(Response::new(ProbeResponse { ready: Some(false) })),
            Answer::Fails(message) => Err(Status::failed_precondition(message)),
        }
    }
}

#[tokio::test]
async fn probe_answers_follow_the_drivers_probe() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("csi.sock");
    let answer = Arc::new(Mutex::new(Answer::Ready));
    let listener = Listener::bind(&Endpoint::Unix(socket.clone()))
        .await
        .unwrap();
    let router = tonic::transport::Server::builder()
        .add_service(IdentityServer::new(TestIdentity(answer.clone())));
    tokio::spawn(csi_proto::serve(router, listener, std::future::pending()));
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
    let dir = tempfile::tempdir().unwrap();
    let address = start_probe(&dir.path().join("absent.sock")).await;
    let (status, body) = healthz(address).await;
    assert_eq!(status, 500);
    assert!(body.starts_with("rpc error: code = Unavailable"), "{body}");
}

#[tokio::test]
async fn real_manila_driver_is_healthy_until_killed() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("manila.sock");
    let log = dir.path().join("manila.log");
    let mut driver = Command::new(manila_binary())
        .arg(format!("--endpoint=unix://{}", socket.display()))
        .args([
            "--drivername=manila.csi.openstack.org",
            "--share-protocol-selector=NFS",
            "--provide-node-service=false",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let address = start_probe(&socket).await;

    // The driver needs a moment to bind its socket: wait for the first 200.
    let started = Instant::now();
    loop {
        let (status, body) = healthz(address).await;
        if status == 200 {
            assert_eq!(body, "ok");
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the driver never became healthy; last answer {status} {body}; driver log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    driver.kill().unwrap();
    driver.wait().unwrap();
    let (status, body) = healthz(address).await;
    assert_eq!(status, 500, "{body}");
    assert!(body.contains("Unavailable"), "{body}");
}

/// The `manila-csi-plugin` binary, built if missing or stale.
fn manila_binary() -> PathBuf {
    harness::workspace::binary("manila-csi-plugin", "manila-csi-plugin").unwrap()
}
