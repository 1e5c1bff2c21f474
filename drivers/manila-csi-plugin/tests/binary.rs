//! The real binary: serves over a unix socket, and never logs secret values.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::{Command, Stdio};
use std::time::Duration;

use csi_proto::v1;
use csi_proto::v1::controller_client::ControllerClient;
use fakes::{CloudConfig, FakeCloud};
use support::{GIB, create_request, secrets};

#[tokio::test]
async fn the_binary_serves_and_keeps_secrets_out_of_its_logs() {
    let cloud = FakeCloud::start(CloudConfig::default()).await.unwrap();
    let dir = tempfile::Builder::new()
        .prefix("binary-")
        .tempdir()
        .unwrap();
    let socket = dir.path().join("csi.sock");
    let log_path = dir.path().join("driver.log");
    let mut child = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_manila-csi-plugin"))
            .args(["--endpoint", &socket.display().to_string()])
            .args([
                "--share-protocol-selector",
                "NFS",
                "--provide-node-service=false",
            ])
            .env("RUST_LOG", "debug")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log_path).unwrap())
            .spawn()
            .unwrap(),
    );
    let path = socket.clone();
    support::wait_until("the driver socket", Duration::from_secs(10), || {
        (path.exists(), path.clone())
    })
    .await;

    let endpoint = format!("unix://{}", socket.display()).parse().unwrap();
    let mut client = ControllerClient::new(csi_proto::connect(&endpoint).await.unwrap());
    let secrets = secrets(&cloud);
    let volume = client
        .create_volume(create_request("pvc-bin", GIB, &secrets, &[]))
        .await
        .unwrap();
    let id = volume.into_inner().volume.unwrap().volume_id;
    client
        .delete_volume(v1::DeleteVolumeRequest {
            volume_id: id,
            secrets: secrets.clone(),
        })
        .await
        .unwrap();

    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(log.contains("CreateVolume"), "the call is logged: {log}");
    assert!(
        log.contains("[redacted]"),
        "secret values are replaced: {log}"
    );
    let password = &secrets["os-password"];
    assert!(
        !log.contains(password.as_str()),
        "the password leaked into the log"
    );
    assert!(cloud.leftovers().is_empty(), "{:#?}", cloud.leftovers());
}

/// Kills the driver if the test fails before stopping it.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
