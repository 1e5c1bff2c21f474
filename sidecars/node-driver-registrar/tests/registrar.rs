//! The real `node-driver-registrar` binary against an in-test CSI Identity server, with the
//! test playing kubelet on the registration socket.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use csi_proto::Endpoint;
use csi_proto::registration::v1::registration_client::RegistrationClient;
use csi_proto::registration::v1::{InfoRequest, RegistrationStatus};
use testkit::drivers::{TestIdentity, TestProcess, serve_on_socket};
use testkit::wait::wait_until_true;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

const DRIVER: &str = "registrar-test.csi.example.com";
const WAIT: Duration = Duration::from_secs(20);

/// Fields drop in order: the registrar before the directory it writes in.
struct Setup {
    registry: PathBuf,
    kubelet_path: PathBuf,
    registrar: TestProcess,
    http_port: u16,
    _dir: tempfile::TempDir,
}

/// A node-only in-test driver and the registrar for it, with its health endpoint on a free
/// port.
async fn start() -> Setup {
    let dir = tempfile::Builder::new()
        .prefix("registrar-")
        .tempdir()
        .unwrap();
    let driver_socket = dir.path().join("csi.sock");
    let router =
        tonic::transport::Server::builder().add_service(TestIdentity::node_only(DRIVER).service());
    serve_on_socket(router, &driver_socket).await;
    let registry = dir.path().join("plugins_registry");
    std::fs::create_dir(&registry).unwrap();
    let plugin_dir = dir.path().join("plugins").join(DRIVER);
    std::fs::create_dir_all(&plugin_dir).unwrap();
    let kubelet_path = plugin_dir.join("csi.sock");
    let http_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut command = Command::new(env!("CARGO_BIN_EXE_node-driver-registrar"));
    command
        .arg(format!("--csi-address=unix://{}", driver_socket.display()))
        .arg(format!(
            "--kubelet-registration-path={}",
            kubelet_path.display()
        ))
        .arg(format!("--plugin-registration-path={}", registry.display()))
        .arg(format!("--http-endpoint=127.0.0.1:{http_port}"));
    let registrar = TestProcess::spawn(command, &dir.path().join("registrar.log"));
    Setup {
        registry,
        kubelet_path,
        registrar,
        http_port,
        _dir: dir,
    }
}

impl Setup {
    /// Waits until `path` exists.
    async fn wait_exists(&self, what: &str, path: &Path) {
        let describe = || format!("{} absent; log:\n{}", path.display(), self.registrar.log());
        wait_until_true(what, WAIT, || path.exists(), describe).await
    }
}

async fn kubelet(socket: &Path) -> RegistrationClient<tonic::transport::Channel> {
    let channel = csi_proto::connect(&Endpoint::Unix(socket.to_owned()))
        .await
        .unwrap();
    RegistrationClient::new(channel)
}

async fn healthz(port: u16) -> String {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    answer
}

#[tokio::test]
async fn get_info_answers_and_sigterm_removes_the_socket() {
    let mut setup = start().await;
    let socket = setup.registry.join(format!("{DRIVER}-reg.sock"));
    setup.wait_exists("the registration socket", &socket).await;

    let mut client = kubelet(&socket).await;
    let info = client.get_info(InfoRequest {}).await.unwrap().into_inner();
    assert_eq!(info.r#type, "CSIPlugin");
    assert_eq!(info.name, DRIVER);
    assert_eq!(info.endpoint, setup.kubelet_path.display().to_string());
    assert_eq!(info.supported_versions, vec!["1.0.0".to_string()]);

    let before = healthz(setup.http_port).await;
    assert!(
        before.starts_with("HTTP/1.1 500") && before.contains("not registered the plugin yet"),
        "{before}"
    );
    client
        .notify_registration_status(RegistrationStatus {
            plugin_registered: true,
            error: String::new(),
        })
        .await
        .unwrap();
    let marker = setup.kubelet_path.with_file_name("registration");
    setup.wait_exists("the registration marker", &marker).await;
    let after = healthz(setup.http_port).await;
    assert!(after.starts_with("HTTP/1.1 200"), "{after}");

    let pid = nix::unistd::Pid::from_raw(setup.registrar.id().unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = tokio::time::timeout(WAIT, setup.registrar.child().wait())
        .await
        .unwrap()
        .unwrap();
    let log = setup.registrar.log();
    assert!(status.success(), "exit {status:?}; log:\n{log}");
    assert!(!socket.exists(), "the socket outlived SIGTERM; log:\n{log}");
}

#[tokio::test]
async fn a_refused_registration_ends_the_process_with_the_error() {
    let mut setup = start().await;
    let socket = setup.registry.join(format!("{DRIVER}-reg.sock"));
    setup.wait_exists("the registration socket", &socket).await;
    let mut client = kubelet(&socket).await;
    client
        .notify_registration_status(RegistrationStatus {
            plugin_registered: false,
            error: "no such CSI version".into(),
        })
        .await
        .unwrap();
    let status = tokio::time::timeout(WAIT, setup.registrar.child().wait())
        .await
        .unwrap()
        .unwrap();
    let log = setup.registrar.log();
    assert_eq!(status.code(), Some(1), "log:\n{log}");
    assert!(log.contains("no such CSI version"), "{log}");
    assert!(!socket.exists(), "the socket outlived the exit");
}

#[tokio::test]
async fn probe_mode_passes_only_once_registered() {
    let dir = tempfile::Builder::new()
        .prefix("registrar-")
        .tempdir()
        .unwrap();
    let kubelet_path = dir.path().join("csi.sock");
    let probe = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_node-driver-registrar"))
            .arg(format!(
                "--kubelet-registration-path={}",
                kubelet_path.display()
            ))
            .arg("--mode=kubelet-registration-probe")
            .output()
            .unwrap()
    };
    let failing = probe();
    assert!(!failing.status.success());
    assert!(
        String::from_utf8_lossy(&failing.stderr).contains("has not registered"),
        "{failing:?}"
    );
    std::fs::write(dir.path().join("registration"), b"").unwrap();
    assert!(probe().status.success());
}

#[test]
fn a_relative_kubelet_registration_path_is_refused_by_name() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_node-driver-registrar"))
        .arg("--kubelet-registration-path=plugins/x/csi.sock")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--kubelet-registration-path") && stderr.contains("plugins/x/csi.sock"),
        "{stderr}"
    );
}
