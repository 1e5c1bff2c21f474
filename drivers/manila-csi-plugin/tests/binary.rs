//! The real binary: serves over a unix socket, never logs secret values, and does not wait
//! for a hung cloud call when told to stop.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::{Command, Stdio};
use std::time::Duration;

use csi_proto::v1;
use csi_proto::v1::controller_client::ControllerClient;
use fakes::{CloudConfig, FakeCloud, FaultAction, FaultRule, Operation};
use support::{GIB, create_request, secrets};

#[tokio::test]
async fn the_binary_serves_and_keeps_secrets_out_of_its_logs() {
    let cloud = FakeCloud::start(CloudConfig::default()).await.unwrap();
    let dir = tempfile::Builder::new()
        .prefix("binary-")
        .tempdir()
        .unwrap();
    let (mut child, socket, log_path) = start_driver(dir.path()).await;
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

/// SIGTERM while a CreateVolume waits on a cloud that does not answer: the driver lets the
/// call run for its drain time, then exits instead of waiting for the cloud (which would
/// keep a controller pod until kubelet kills it); the caller sees the call fail.
#[tokio::test]
async fn sigterm_does_not_wait_for_a_hung_cloud_call() {
    let cloud = FakeCloud::start(CloudConfig::default()).await.unwrap();
    // The share is made at once, the answer held for two minutes.
    cloud
        .add_fault(FaultRule::new(
            Operation::ShareCreate,
            FaultAction::Latency { ms: 120_000 },
        ))
        .unwrap();
    let dir = tempfile::Builder::new()
        .prefix("binary-")
        .tempdir()
        .unwrap();
    let (mut child, socket, log_path) = start_driver(dir.path()).await;
    let endpoint = format!("unix://{}", socket.display()).parse().unwrap();
    let mut client = ControllerClient::new(csi_proto::connect(&endpoint).await.unwrap());
    let request = create_request("pvc-hung", GIB, &secrets(&cloud), &[]);
    let call = tokio::spawn(async move { client.create_volume(request).await });
    support::wait_until(
        "the share create to reach the cloud",
        Duration::from_secs(30),
        || {
            let shares = cloud.leftovers().shares;
            (!shares.is_empty(), shares)
        },
    )
    .await;

    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.0.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    // Well before the cloud would answer.
    let mut status = None;
    support::wait_until("the driver to exit", Duration::from_secs(60), || {
        status = child.0.try_wait().unwrap();
        (status.is_some(), status)
    })
    .await;
    assert!(status.unwrap().success(), "{status:?}");
    let answer = call.await.unwrap();
    assert!(answer.is_err(), "{answer:?}");
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(log.contains("calls still in flight"), "{log}");
}

/// Upstream's Helm chart and manifests start the controller with klog's `-v`/`--v`, the
/// PVC-annotation client's flags and a lower-case protocol in some set-ups: the binary takes
/// them all, serves, and `-v=5` turns debug logging on.
#[tokio::test]
async fn upstream_controller_arguments_start_the_binary() {
    let cloud = FakeCloud::start(CloudConfig::default()).await.unwrap();
    let dir = tempfile::Builder::new()
        .prefix("binary-")
        .tempdir()
        .unwrap();
    let socket = dir.path().join("csi.sock");
    // --pvc-annotations needs a Kubernetes client; nothing is asked of the API server unless
    // a request names a claim, so an address nobody serves will do.
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:9\n\
         users:\n- name: u\n  user: {}\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n\
         current-context: x\n",
    )
    .unwrap();
    let args = [
        "-v=5".to_string(),
        format!("--endpoint=unix://{}", socket.display()),
        "--drivername=manila.csi.openstack.org".into(),
        "--share-protocol-selector=nfs".into(),
        "--fwdendpoint=unix:///csi-fwd/csi.sock".into(),
        "--provide-node-service=false".into(),
        "--with-topology".into(),
        "--cluster-id=cluster-1".into(),
        "--pvc-annotations".into(),
        format!("--kubeconfig={}", kubeconfig.display()),
        "--master=http://127.0.0.1:9".into(),
        "--compatibility-settings=".into(),
        "--kube-api-qps=10".into(),
        "--kube-api-burst=20".into(),
        "--min-resync-period=12h0m0s".into(),
        "--logtostderr=true".into(),
        "--alsologtostderr".into(),
        "--vmodule=*=2".into(),
    ];
    let (mut child, socket, log_path) =
        start_driver_with(dir.path(), &socket, &args, None, &[]).await;
    let endpoint = format!("unix://{}", socket.display()).parse().unwrap();
    let channel = csi_proto::connect(&endpoint).await.unwrap();
    let mut identity = v1::identity_client::IdentityClient::new(channel.clone());
    let info = identity
        .get_plugin_info(v1::GetPluginInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.name, "manila.csi.openstack.org");
    let mut client = ControllerClient::new(channel);
    let secrets = secrets(&cloud);
    let id = client
        .create_volume(create_request("pvc-upstream", GIB, &secrets, &[]))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap()
        .volume_id;
    client
        .delete_volume(v1::DeleteVolumeRequest {
            volume_id: id,
            secrets,
        })
        .await
        .unwrap();
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(log.contains("DEBUG"), "-v=5 turns debug logging on: {log}");
    assert!(cloud.leftovers().is_empty(), "{:#?}", cloud.leftovers());
}

/// Upstream's chart starts the node plugin with `-v`, `--with-topology` and neither
/// `--nodeid` nor `--nodeaz` (both deprecated upstream): the binary takes its node id and
/// zone from the metadata service (here the fake's, through `OS_METADATA_URL`) and serves
/// them in NodeGetInfo. Before, it refused to start without `--nodeaz`.
#[tokio::test]
async fn upstream_node_plugin_arguments_take_id_and_zone_from_the_metadata_service() {
    let cloud = FakeCloud::start(CloudConfig::default()).await.unwrap();
    cloud
        .set_node_metadata(
            "worker-1",
            fakes::NodeMetadata {
                uuid: "0f6b7c52-8a3e-4b61-9d1e-7c2a5b4e3d21".into(),
                availability_zone: "zone-b".into(),
                name: None,
            },
        )
        .unwrap();
    let dir = tempfile::Builder::new()
        .prefix("binary-")
        .tempdir()
        .unwrap();
    let partner =
        support::partner::FakePartner::start(&dir.path().join("partner.sock"), vec![]).await;
    let socket = dir.path().join("csi.sock");
    let args = [
        "-v=2".to_string(),
        format!("--endpoint=unix://{}", socket.display()),
        "--drivername=manila.csi.openstack.org".into(),
        "--share-protocol-selector=NFS".into(),
        format!("--fwdendpoint={}", partner.endpoint),
        "--with-topology".into(),
        "--provide-controller-service=false".into(),
    ];
    let (mut child, socket, _log) = start_driver_with(
        dir.path(),
        &socket,
        &args,
        None,
        &[("OS_METADATA_URL", &cloud.metadata_url("worker-1"))],
    )
    .await;
    let endpoint = format!("unix://{}", socket.display()).parse().unwrap();
    let channel = csi_proto::connect(&endpoint).await.unwrap();
    let info = v1::node_client::NodeClient::new(channel)
        .node_get_info(v1::NodeGetInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.node_id, "0f6b7c52-8a3e-4b61-9d1e-7c2a5b4e3d21");
    assert_eq!(
        info.accessible_topology.unwrap().segments["topology.manila.csi.openstack.org/zone"],
        "zone-b"
    );
    child.0.kill().unwrap();
    child.0.wait().unwrap();
}

/// Starts the driver binary (controller only) on a socket in `dir` and waits for the socket;
/// the process, the socket, and its log file.
async fn start_driver(
    dir: &std::path::Path,
) -> (KillOnDrop, std::path::PathBuf, std::path::PathBuf) {
    let socket = dir.join("csi.sock");
    let args = [
        "--endpoint".to_string(),
        socket.display().to_string(),
        "--share-protocol-selector".into(),
        "NFS".into(),
        "--provide-node-service=false".into(),
    ];
    start_driver_with(dir, &socket, &args, Some("debug"), &[]).await
}

/// Starts the driver binary with `args` and `env` (`RUST_LOG` set to `rust_log`, else unset)
/// and waits for `socket`; the process, the socket, and its log file.
async fn start_driver_with(
    dir: &std::path::Path,
    socket: &std::path::Path,
    args: &[String],
    rust_log: Option<&str>,
    env: &[(&str, &str)],
) -> (KillOnDrop, std::path::PathBuf, std::path::PathBuf) {
    let log_path = dir.join("driver.log");
    let mut command = Command::new(env!("CARGO_BIN_EXE_manila-csi-plugin"));
    command
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("NODE_ID")
        .env_remove("OS_METADATA_URL")
        .envs(env.iter().copied());
    if let Some(filter) = rust_log {
        command.env("RUST_LOG", filter);
    }
    let child = KillOnDrop(
        command
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log_path).unwrap())
            .spawn()
            .unwrap(),
    );
    let path = socket.to_path_buf();
    let mut early_exit = None;
    let mut child = child;
    support::wait_until("the driver socket", Duration::from_secs(10), || {
        early_exit = child.0.try_wait().unwrap();
        (path.exists() || early_exit.is_some(), path.clone())
    })
    .await;
    assert!(
        early_exit.is_none(),
        "the driver exited with {early_exit:?}: {}",
        std::fs::read_to_string(&log_path).unwrap_or_default()
    );
    (child, socket.to_path_buf(), log_path)
}

/// Kills the driver if the test fails before stopping it.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
