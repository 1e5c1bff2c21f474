//! The real binary with `os-useClouds` and no `os-cloudsFile`: clouds.yaml and the cloud are
//! found through its environment (`OS_CLIENT_CONFIG_FILE`, else `~/.config/openstack/`;
//! `OS_CLOUD`), and trustee keys in the secret override the file's password user.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use csi_proto::v1;
use csi_proto::v1::controller_client::ControllerClient;
use fakes::{CloudConfig, FakeCloud, SecretKind};
use support::{GIB, create_request};

/// Kills the driver when the test ends, passed or not.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The controller-only binary on `<dir>/<name>.sock` with `env` over a cleared OpenStack
/// environment, its working directory `cwd`; the process, a client and its log file.
async fn start(
    dir: &Path,
    name: &str,
    cwd: &Path,
    env: &[(&str, &Path)],
    cloud: &str,
) -> (
    KillOnDrop,
    ControllerClient<tonic::transport::Channel>,
    std::path::PathBuf,
) {
    let socket = dir.join(format!("{name}.sock"));
    let log = dir.join(format!("{name}.log"));
    let mut command = Command::new(env!("CARGO_BIN_EXE_manila-csi-plugin"));
    command
        .args([
            "--endpoint",
            &socket.display().to_string(),
            "--share-protocol-selector=NFS",
            "--provide-node-service=false",
        ])
        .current_dir(cwd)
        .env_remove("OS_CLIENT_CONFIG_FILE")
        .env_remove("NODE_ID")
        .env_remove("OS_METADATA_URL")
        .env("RUST_LOG", "debug")
        .env("OS_CLOUD", cloud)
        .envs(env.iter().map(|(k, v)| (*k, v.as_os_str())))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    let mut child = KillOnDrop(command.spawn().unwrap());
    support::wait_until("the driver socket", Duration::from_secs(10), || {
        let exited = child.0.try_wait().unwrap();
        assert!(exited.is_none(), "the driver exited: {exited:?}");
        (socket.exists(), socket.clone())
    })
    .await;
    let endpoint = format!("unix://{}", socket.display()).parse().unwrap();
    let client = ControllerClient::new(csi_proto::connect(&endpoint).await.unwrap());
    (child, client, log)
}

async fn provision_and_delete(
    client: &mut ControllerClient<tonic::transport::Channel>,
    name: &str,
    secrets: &HashMap<String, String>,
) -> Result<(), tonic::Status> {
    let volume = client
        .create_volume(create_request(name, GIB, secrets, &[]))
        .await?
        .into_inner()
        .volume
        .unwrap();
    client
        .delete_volume(v1::DeleteVolumeRequest {
            volume_id: volume.volume_id,
            secrets: secrets.clone(),
        })
        .await?;
    Ok(())
}

#[tokio::test]
async fn the_binary_finds_clouds_yaml_through_its_environment() {
    let cloud = FakeCloud::start(CloudConfig::default()).await.unwrap();
    let dir = tempfile::Builder::new()
        .prefix("binary-clouds-")
        .tempdir()
        .unwrap();
    let cwd = dir.path().join("cwd");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::create_dir_all(home.join(".config/openstack")).unwrap();
    std::fs::write(
        home.join(".config/openstack/clouds.yaml"),
        cloud.clouds_yaml("from-home"),
    )
    .unwrap();
    let explicit = dir.path().join("explicit.yaml");
    std::fs::write(&explicit, cloud.clouds_yaml("from-env")).unwrap();
    let only_clouds: HashMap<String, String> = [("os-useClouds".to_string(), "true".to_string())]
        .into_iter()
        .collect();

    // ~/.config/openstack/clouds.yaml, the cloud from OS_CLOUD.
    let (_home_driver, mut client, _) =
        start(dir.path(), "home", &cwd, &[("HOME", &home)], "from-home").await;
    provision_and_delete(&mut client, "pvc-home", &only_clouds)
        .await
        .unwrap();

    // OS_CLIENT_CONFIG_FILE wins over the home directory; the trustee keys of the secret
    // override the file's user.
    let (_env_driver, mut client, log) = start(
        dir.path(),
        "env",
        &cwd,
        &[("HOME", &home), ("OS_CLIENT_CONFIG_FILE", &explicit)],
        "from-env",
    )
    .await;
    let error = provision_and_delete(&mut client, "pvc-env-wrong-cloud", &{
        let mut s = only_clouds.clone();
        s.insert("os-cloud".into(), "from-home".into());
        s
    })
    .await
    .unwrap_err();
    assert_eq!(error.code(), tonic::Code::InvalidArgument);
    assert!(
        error.message().contains("\"from-home\"") && error.message().contains("explicit.yaml"),
        "{error:?}"
    );
    let mut trustee = only_clouds.clone();
    for (key, value) in cloud.secret(SecretKind::Trustee) {
        if key.starts_with("os-trust") {
            trustee.insert(key, value);
        }
    }
    provision_and_delete(&mut client, "pvc-env-trustee", &trustee)
        .await
        .unwrap();
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(
        !log.contains(trustee["os-trusteePassword"].as_str()),
        "the trustee password leaked into the log"
    );
    assert!(cloud.leftovers().is_empty(), "{:#?}", cloud.leftovers());
}
