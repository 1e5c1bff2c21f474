//! The `cinder-csi-plugin` binary as a pod runs it: upstream's arguments, a cloud config
//! file, the node id and zone from a metadata document; and start-up refusals that name the
//! file and key.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use csi_proto::v1::identity_client::IdentityClient;
use csi_proto::v1::node_client::NodeClient;
use csi_proto::v1::{self};
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

type TestResult = Result<(), Box<dyn std::error::Error>>;

const BINARY: &str = env!("CARGO_BIN_EXE_cinder-csi-plugin");

/// The plugin process; killed (by its own id) on drop.
struct Plugin(Child);

impl Drop for Plugin {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn write_config(dir: &Path, extra: &str) -> Result<std::path::PathBuf, std::io::Error> {
    let file = dir.join("cloud.conf");
    std::fs::write(
        &file,
        format!(
            "[Global]\nauth-url = http://127.0.0.1:9/v3\nusername = csi\npassword = \"hunter2-secret\"\ntenant-name = demo\n{extra}"
        ),
    )?;
    Ok(file)
}

/// Waits (bounded) until the plugin answers Probe on `socket`, or it exits.
async fn connect(
    plugin: &mut Plugin,
    socket: &str,
) -> Result<tonic::transport::Channel, Box<dyn std::error::Error>> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = plugin.0.try_wait()? {
            return Err(format!("the plugin exited: {status}").into());
        }
        if let Ok(channel) = csi_proto::connect(&socket.parse()?).await
            && IdentityClient::new(channel.clone())
                .probe(v1::ProbeRequest {})
                .await
                .is_ok()
        {
            return Ok(channel);
        }
        if Instant::now() > deadline {
            return Err("the plugin did not answer Probe within 20 s".into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn node_plugin_takes_its_id_and_zone_from_the_metadata_service() -> TestResult {
    let metadata = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/openstack/latest/meta_data.json"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "uuid": "3f1e0c2a-instance", "availability_zone": "zone-c", "name": "node-a"
        })))
        .mount(&metadata)
        .await;
    let dir = tempfile::tempdir()?;
    let config = write_config(
        dir.path(),
        "[BlockStorage]\nnode-volume-attach-limit = 17\n[Metadata]\nsearch-order = metadataService\n",
    )?;
    let socket = format!("unix://{}", dir.path().join("csi.sock").display());
    let mut plugin = Plugin(
        Command::new(BINARY)
            .arg(format!("--endpoint={socket}"))
            .arg(format!("--cloud-config={}", config.display()))
            .args([
                "--provide-controller-service=false",
                "--v=4",
                "--logtostderr",
            ])
            .env(
                "OS_METADATA_URL",
                format!("{}/openstack/latest/meta_data.json", metadata.uri()),
            )
            .env("CINDER_CSI_DISK_BY_ID_DIR", dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?,
    );
    let channel = connect(&mut plugin, &socket).await?;
    let info = NodeClient::new(channel.clone())
        .node_get_info(v1::NodeGetInfoRequest {})
        .await?
        .into_inner();
    assert_eq!(info.node_id, "3f1e0c2a-instance");
    assert_eq!(info.max_volumes_per_node, 17);
    assert_eq!(
        info.accessible_topology.map(|t| t.segments),
        Some(HashMap::from([(
            "topology.cinder.csi.openstack.org/zone".to_string(),
            "zone-c".to_string()
        )]))
    );
    let capabilities = IdentityClient::new(channel)
        .get_plugin_capabilities(v1::GetPluginCapabilitiesRequest {})
        .await?
        .into_inner()
        .capabilities;
    assert_eq!(
        capabilities.len(),
        2,
        "expansion and topology, no controller: {capabilities:?}"
    );
    let mut stderr = plugin.0.stderr.take().ok_or("no stderr")?;
    plugin.0.kill()?;
    plugin.0.wait()?;
    let mut logs = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut logs)?;
    assert!(logs.contains("node identity"), "{logs}");
    assert!(!logs.contains("hunter2-secret"), "the password was logged");
    Ok(())
}

fn run_to_exit(args: &[String]) -> Result<(bool, String), Box<dyn std::error::Error>> {
    let output = Command::new(BINARY)
        .args(args)
        .env("OS_METADATA_URL", "http://127.0.0.1:9/nothing")
        .output()?;
    Ok((
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    ))
}

#[test]
fn a_bad_config_value_stops_start_up_naming_file_and_key() -> TestResult {
    let dir = tempfile::tempdir()?;
    let config = write_config(dir.path(), "[BlockStorage]\nrescan-on-resize = sometimes\n")?;
    let (ok, stderr) = run_to_exit(&[
        format!(
            "--endpoint=unix://{}",
            dir.path().join("csi.sock").display()
        ),
        format!("--cloud-config={}", config.display()),
        "--nodeid=n1".into(),
        "--with-topology=false".into(),
    ])?;
    assert!(!ok);
    assert!(
        stderr.contains("rescan-on-resize") && stderr.contains(&config.display().to_string()),
        "{stderr}"
    );
    assert!(!stderr.contains("hunter2-secret"), "{stderr}");
    Ok(())
}

#[test]
fn a_config_drive_only_search_order_is_reported_as_unsupported() -> TestResult {
    let dir = tempfile::tempdir()?;
    let config = write_config(dir.path(), "[Metadata]\nsearch-order = configDrive\n")?;
    let (ok, stderr) = run_to_exit(&[
        format!(
            "--endpoint=unix://{}",
            dir.path().join("csi.sock").display()
        ),
        format!("--cloud-config={}", config.display()),
        "--provide-controller-service=false".into(),
    ])?;
    assert!(!ok);
    assert!(stderr.contains("config drive is not supported"), "{stderr}");
    Ok(())
}
