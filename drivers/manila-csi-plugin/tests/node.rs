//! Node-side forwarding: the driver resolves the share in the fake cloud and forwards to a
//! fake partner node plugin that records what it received.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;

use csi_proto::v1::node_service_capability::rpc;
use csi_proto::v1::volume_capability::access_mode::Mode;
use csi_proto::v1::{self, node_service_capability};
use fakes::config::ExportAddress;
use fakes::{CloudConfig, FakeCloud};
use support::partner::{Call, FakePartner};
use support::{GIB, RunningDriver, create_request, mount_capability, secrets};
use tonic::Code;

/// Fields drop in order: the servers before the directory holding their sockets.
struct NodeEnv {
    cloud: FakeCloud,
    partner: FakePartner,
    driver: RunningDriver,
    secrets: HashMap<String, String>,
    dir: tempfile::TempDir,
}

impl NodeEnv {
    async fn start(config: CloudConfig, partner_caps: Vec<rpc::Type>, extra: &[&str]) -> Self {
        let cloud = FakeCloud::start(config).await.unwrap();
        let mut args = vec!["--nodeid=node-1"];
        args.extend_from_slice(extra);
        Self::start_on(cloud, partner_caps, &args).await
    }

    /// The driver with `extra` flags (no `--nodeid` unless given) against `cloud`.
    async fn start_on(cloud: FakeCloud, partner_caps: Vec<rpc::Type>, extra: &[&str]) -> Self {
        let dir = tempfile::Builder::new().prefix("node-").tempdir().unwrap();
        let partner = FakePartner::start(&dir.path().join("partner.sock"), partner_caps).await;
        let fwd = format!("--fwdendpoint={}", partner.endpoint);
        let mut args = vec![
            "--share-protocol-selector=NFS",
            fwd.as_str(),
            "--share-wait-timeout=3s",
        ];
        args.extend_from_slice(extra);
        let driver = RunningDriver::start(dir.path(), "manila", &args)
            .await
            .unwrap();
        let secrets = secrets(&cloud);
        NodeEnv {
            cloud,
            dir,
            partner,
            driver,
            secrets,
        }
    }

    async fn create(&self, name: &str) -> v1::Volume {
        let mut client = self.driver.controller().await;
        client
            .create_volume(create_request(name, GIB, &self.secrets, &[]))
            .await
            .unwrap()
            .into_inner()
            .volume
            .unwrap()
    }

    fn stage_request(&self, volume: &v1::Volume) -> v1::NodeStageVolumeRequest {
        v1::NodeStageVolumeRequest {
            volume_id: volume.volume_id.clone(),
            staging_target_path: self.dir.path().join("staging").display().to_string(),
            volume_capability: Some(mount_capability(Mode::MultiNodeMultiWriter)),
            secrets: self.secrets.clone(),
            volume_context: volume.volume_context.clone(),
            publish_context: HashMap::new(),
        }
    }

    fn publish_request(&self, volume: &v1::Volume) -> v1::NodePublishVolumeRequest {
        v1::NodePublishVolumeRequest {
            volume_id: volume.volume_id.clone(),
            staging_target_path: self.dir.path().join("staging").display().to_string(),
            target_path: self.dir.path().join("target").display().to_string(),
            volume_capability: Some(mount_capability(Mode::MultiNodeMultiWriter)),
            readonly: false,
            secrets: self.secrets.clone(),
            volume_context: volume.volume_context.clone(),
            publish_context: HashMap::new(),
        }
    }

    async fn cleanup(&self, volume: &v1::Volume) {
        let mut client = self.driver.controller().await;
        client
            .delete_volume(v1::DeleteVolumeRequest {
                volume_id: volume.volume_id.clone(),
                secrets: self.secrets.clone(),
            })
            .await
            .unwrap();
        let leftovers = self.cloud.leftovers();
        assert!(leftovers.is_empty(), "{leftovers:#?}");
    }
}

fn caps(kinds: &[rpc::Type]) -> Vec<rpc::Type> {
    kinds.to_vec()
}

fn rpc_kinds(response: &v1::NodeGetCapabilitiesResponse) -> Vec<rpc::Type> {
    response
        .capabilities
        .iter()
        .filter_map(|c| match &c.r#type {
            Some(node_service_capability::Type::Rpc(r)) => rpc::Type::try_from(r.r#type).ok(),
            None => None,
        })
        .collect()
}

#[tokio::test]
async fn stage_and_publish_forward_the_nfs_server_and_share() {
    let env = NodeEnv::start(
        CloudConfig::default(),
        caps(&[rpc::Type::StageUnstageVolume, rpc::Type::GetVolumeStats]),
        &[],
    )
    .await;
    let volume = env.create("pvc-node").await;
    let mut node = env.driver.node().await;
    node.node_stage_volume(env.stage_request(&volume))
        .await
        .unwrap();
    // Publish without secrets: the stage cache has everything.
    let mut publish = env.publish_request(&volume);
    publish.secrets.clear();
    node.node_publish_volume(publish).await.unwrap();

    let share_dir = env.cloud.share_dir(&volume.volume_id).display().to_string();
    let calls = env.partner.calls();
    let [Call::Stage(stage), Call::Publish(publish)] = calls.as_slice() else {
        panic!("expected stage then publish, got {calls:#?}");
    };
    let expected: HashMap<String, String> = [
        ("server".to_string(), "127.0.0.1".to_string()),
        ("share".to_string(), share_dir),
    ]
    .into();
    assert_eq!(stage.volume_context, expected);
    assert!(
        stage.secrets.is_empty(),
        "OpenStack secrets must not reach the partner"
    );
    assert_eq!(publish.volume_context, expected);
    assert!(publish.secrets.is_empty());
    assert!(!publish.staging_target_path.is_empty());

    let stats = node
        .node_get_volume_stats(v1::NodeGetVolumeStatsRequest {
            volume_id: volume.volume_id.clone(),
            volume_path: env.publish_request(&volume).target_path,
            staging_target_path: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(stats.usage.len(), 1);

    node.node_unpublish_volume(v1::NodeUnpublishVolumeRequest {
        volume_id: volume.volume_id.clone(),
        target_path: env.publish_request(&volume).target_path,
    })
    .await
    .unwrap();
    node.node_unstage_volume(v1::NodeUnstageVolumeRequest {
        volume_id: volume.volume_id.clone(),
        staging_target_path: env.stage_request(&volume).staging_target_path,
    })
    .await
    .unwrap();
    let kinds: Vec<&str> = env
        .partner
        .calls()
        .iter()
        .map(|c| match c {
            Call::Stage(_) => "stage",
            Call::Unstage(_) => "unstage",
            Call::Publish(_) => "publish",
            Call::Unpublish(_) => "unpublish",
            Call::Stats(_) => "stats",
        })
        .collect();
    assert_eq!(kinds, ["stage", "publish", "stats", "unpublish", "unstage"]);
    env.cleanup(&volume).await;
}

#[tokio::test]
async fn a_partner_without_staging_only_gets_publish() {
    let env = NodeEnv::start(CloudConfig::default(), vec![], &[]).await;
    let volume = env.create("pvc-nostage").await;
    let mut node = env.driver.node().await;
    let capabilities = node
        .node_get_capabilities(v1::NodeGetCapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(rpc_kinds(&capabilities), [rpc::Type::StageUnstageVolume]);
    node.node_stage_volume(env.stage_request(&volume))
        .await
        .unwrap();
    node.node_publish_volume(env.publish_request(&volume))
        .await
        .unwrap();
    let calls = env.partner.calls();
    let [Call::Publish(publish)] = calls.as_slice() else {
        panic!("expected only publish, got {calls:#?}");
    };
    assert!(publish.staging_target_path.is_empty());
    let error = node
        .node_get_volume_stats(v1::NodeGetVolumeStatsRequest {
            volume_id: volume.volume_id.clone(),
            volume_path: "/x".into(),
            staging_target_path: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::Unimplemented);
    env.cleanup(&volume).await;
}

#[tokio::test]
async fn capabilities_mirror_the_partner_without_node_expansion() {
    let env = NodeEnv::start(
        CloudConfig::default(),
        caps(&[
            rpc::Type::GetVolumeStats,
            rpc::Type::ExpandVolume,
            rpc::Type::StageUnstageVolume,
        ]),
        &[],
    )
    .await;
    let mut node = env.driver.node().await;
    let capabilities = node
        .node_get_capabilities(v1::NodeGetCapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        rpc_kinds(&capabilities),
        [rpc::Type::StageUnstageVolume, rpc::Type::GetVolumeStats]
    );
    let error = node
        .node_expand_volume(v1::NodeExpandVolumeRequest::default())
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::Unimplemented);
}

#[tokio::test]
async fn node_get_info_reports_the_zone_with_topology() {
    let env = NodeEnv::start(
        CloudConfig::default(),
        vec![],
        &["--with-topology", "--nodeaz=zone-a"],
    )
    .await;
    let mut node = env.driver.node().await;
    let info = node
        .node_get_info(v1::NodeGetInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    insta::assert_debug_snapshot!(info);
    let mut identity = env.driver.identity().await;
    let capabilities = identity
        .get_plugin_capabilities(v1::GetPluginCapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner();
    insta::assert_debug_snapshot!(capabilities);
}

const WORKER_UUID: &str = "5d1c6d0e-3a43-4c0b-9a8f-0c3b1b0f4e11";

/// A cloud whose metadata service knows `worker-1` (zone `zone-b`).
async fn cloud_with_worker() -> FakeCloud {
    let cloud = FakeCloud::start(CloudConfig::default()).await.unwrap();
    cloud
        .set_node_metadata(
            "worker-1",
            fakes::NodeMetadata {
                uuid: WORKER_UUID.into(),
                availability_zone: "zone-b".into(),
                name: None,
            },
        )
        .unwrap();
    cloud
}

async fn node_info(env: &NodeEnv) -> (String, Option<HashMap<String, String>>) {
    let info = env
        .driver
        .node()
        .await
        .node_get_info(v1::NodeGetInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    (info.node_id, info.accessible_topology.map(|t| t.segments))
}

fn metadata_requests(cloud: &FakeCloud) -> usize {
    cloud
        .journal()
        .iter()
        .filter(|e| e.path.ends_with("/meta_data.json"))
        .count()
}

/// Upstream's chart starts the node plugin with `--with-topology` and neither `--nodeid` nor
/// `--nodeaz`: the id and zone are the metadata service's `uuid` and `availability_zone`.
#[tokio::test]
async fn node_id_and_zone_come_from_the_metadata_service() {
    let cloud = cloud_with_worker().await;
    let url = format!("--metadata-url={}", cloud.metadata_url("worker-1"));
    let env = NodeEnv::start_on(cloud, vec![], &["--with-topology", url.as_str()]).await;
    let (node_id, topology) = node_info(&env).await;
    assert_eq!(node_id, WORKER_UUID);
    assert_eq!(
        topology,
        Some(HashMap::from([(
            "topology.manila.csi.openstack.org/zone".to_string(),
            "zone-b".to_string()
        )]))
    );
    assert_eq!(metadata_requests(&env.cloud), 1);

    // Without topology only the id is taken from it, and no zone is reported.
    let cloud = cloud_with_worker().await;
    let url = format!("--metadata-url={}", cloud.metadata_url("worker-1"));
    let env = NodeEnv::start_on(cloud, vec![], &[url.as_str()]).await;
    assert_eq!(node_info(&env).await, (WORKER_UUID.to_string(), None));
}

/// `--nodeid`/`--nodeaz` still win (deprecated upstream, but honoured): with both the
/// metadata service is not asked at all; with `--nodeid` alone it gives only the zone.
#[tokio::test]
async fn node_flags_win_over_the_metadata_service() {
    let cloud = cloud_with_worker().await;
    let url = format!("--metadata-url={}", cloud.metadata_url("worker-1"));
    let env = NodeEnv::start_on(
        cloud,
        vec![],
        &["--with-topology", "--nodeid=node-1", url.as_str()],
    )
    .await;
    let (node_id, topology) = node_info(&env).await;
    assert_eq!(node_id, "node-1");
    assert_eq!(
        topology.unwrap()["topology.manila.csi.openstack.org/zone"],
        "zone-b"
    );

    let cloud = cloud_with_worker().await;
    let url = format!("--metadata-url={}", cloud.metadata_url("worker-1"));
    let env = NodeEnv::start_on(
        cloud,
        vec![],
        &[
            "--with-topology",
            "--nodeid=node-1",
            "--nodeaz=zone-a",
            url.as_str(),
        ],
    )
    .await;
    let (node_id, topology) = node_info(&env).await;
    assert_eq!(node_id, "node-1");
    assert_eq!(
        topology.unwrap()["topology.manila.csi.openstack.org/zone"],
        "zone-a"
    );
    assert_eq!(metadata_requests(&env.cloud), 0);
}

/// No document for the node (an instance without a metadata service): start-up fails
/// naming the URL, as upstream's driver exits.
#[tokio::test]
async fn start_up_fails_clearly_without_metadata() {
    let cloud = FakeCloud::start(CloudConfig::default()).await.unwrap();
    let dir = tempfile::Builder::new().prefix("node-").tempdir().unwrap();
    let partner = FakePartner::start(&dir.path().join("partner.sock"), vec![]).await;
    let fwd = format!("--fwdendpoint={}", partner.endpoint);
    let metadata_url = cloud.metadata_url("nobody");
    let url = format!("--metadata-url={metadata_url}");
    let error = RunningDriver::start(
        dir.path(),
        "manila",
        &[
            "--share-protocol-selector=NFS",
            fwd.as_str(),
            "--with-topology",
            url.as_str(),
        ],
    )
    .await
    .err()
    .expect("start-up must fail");
    let message = error.to_string();
    assert!(
        message.contains(&metadata_url) && message.contains("HTTP 404"),
        "{message}"
    );
}

#[tokio::test]
async fn probe_follows_the_partner() {
    let mut env = NodeEnv::start(CloudConfig::default(), vec![], &[]).await;
    let mut identity = env.driver.identity().await;
    let ready = identity
        .probe(v1::ProbeRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ready.ready, Some(true));
    let info = identity
        .get_plugin_info(v1::GetPluginInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.name, "manila.csi.openstack.org");
    env.partner.stop();
    let socket = env.dir.path().join("partner.sock");
    support::wait_until(
        "the partner socket to be removed",
        std::time::Duration::from_secs(5),
        || (!socket.exists(), socket.clone()),
    )
    .await;
    let error = identity.probe(v1::ProbeRequest {}).await.unwrap_err();
    assert_eq!(error.code(), Code::FailedPrecondition, "{error:?}");
    assert!(
        error.message().contains("partner.sock"),
        "{}",
        error.message()
    );
}

#[tokio::test]
async fn the_runtime_config_filter_is_reread_on_every_stage() {
    let mut config = CloudConfig::default();
    config.manila.export_locations = vec![
        ExportAddress {
            address: [127, 0, 0, 1].into(),
            preferred: true,
            admin_only: false,
        },
        ExportAddress {
            address: [127, 0, 0, 3].into(),
            preferred: false,
            admin_only: false,
        },
    ];
    let runtime = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        runtime.path(),
        r#"{"nfs":{"matchExportLocationAddress":"127.0.0.3"}}"#,
    )
    .unwrap();
    let flag = format!("--runtime-config-file={}", runtime.path().display());
    let env = NodeEnv::start(
        config,
        caps(&[rpc::Type::StageUnstageVolume]),
        &[flag.as_str()],
    )
    .await;
    let volume = env.create("pvc-filter").await;
    let mut node = env.driver.node().await;
    node.node_stage_volume(env.stage_request(&volume))
        .await
        .unwrap();
    std::fs::write(
        runtime.path(),
        r#"{"nfs":{"matchExportLocationAddress":"127.0.0.0/30"}}"#,
    )
    .unwrap();
    node.node_stage_volume(env.stage_request(&volume))
        .await
        .unwrap();
    std::fs::write(
        runtime.path(),
        r#"{"nfs":{"matchExportLocationAddress":"10.0.0.0/8"}}"#,
    )
    .unwrap();
    let error = node
        .node_stage_volume(env.stage_request(&volume))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::FailedPrecondition, "{error:?}");
    assert!(
        error.message().contains("10.0.0.0/8"),
        "{}",
        error.message()
    );
    let servers: Vec<String> = env
        .partner
        .calls()
        .iter()
        .filter_map(|c| match c {
            Call::Stage(s) => Some(s.volume_context["server"].clone()),
            _ => None,
        })
        .collect();
    assert_eq!(servers, ["127.0.0.3", "127.0.0.1"]);
    env.cleanup(&volume).await;
}

#[tokio::test]
async fn pre_provisioned_volumes_are_found_by_name_or_id() {
    let env = NodeEnv::start(
        CloudConfig::default(),
        caps(&[rpc::Type::StageUnstageVolume]),
        &[],
    )
    .await;
    let volume = env.create("pvc-static").await;
    let access = volume.volume_context["shareAccessIDs"].clone();
    let mut node = env.driver.node().await;
    let mut by_name = env.stage_request(&volume);
    by_name.volume_context = [
        ("shareName".to_string(), "pvc-static".to_string()),
        ("shareAccessIDs".to_string(), access.clone()),
    ]
    .into();
    node.node_stage_volume(by_name.clone()).await.unwrap();

    let mut both = by_name.clone();
    both.volume_context
        .insert("shareID".into(), volume.volume_id.clone());
    let error = node.node_stage_volume(both).await.unwrap_err();
    assert_eq!(error.code(), Code::InvalidArgument);
    assert!(
        error.message().contains("shareID and shareName"),
        "{}",
        error.message()
    );

    let mut wrong_rule = by_name.clone();
    wrong_rule
        .volume_context
        .insert("shareAccessIDs".into(), "no-such-rule".into());
    let error = node.node_stage_volume(wrong_rule).await.unwrap_err();
    assert_eq!(error.code(), Code::NotFound);
    assert!(
        error.message().contains("no-such-rule"),
        "{}",
        error.message()
    );

    let mut no_secrets = by_name;
    no_secrets.secrets.clear();
    let error = node.node_stage_volume(no_secrets).await.unwrap_err();
    assert_eq!(error.code(), Code::InvalidArgument);
    env.cleanup(&volume).await;
}

#[tokio::test]
async fn start_up_fails_clearly_when_the_partner_never_answers() {
    let dir = tempfile::Builder::new().prefix("node-").tempdir().unwrap();
    let missing = dir.path().join("absent.sock");
    let fwd = format!("--fwdendpoint=unix://{}", missing.display());
    let error = RunningDriver::start(
        dir.path(),
        "manila",
        &[
            "--share-protocol-selector=NFS",
            "--nodeid=node-1",
            fwd.as_str(),
            "--partner-probe-timeout=300ms",
        ],
    )
    .await
    .err()
    .expect("start-up must fail");
    let message = error.to_string();
    assert!(
        message.contains("absent.sock") && message.contains("never became ready"),
        "{message}"
    );
}

#[tokio::test]
async fn the_binary_exits_non_zero_when_the_partner_never_answers() {
    let dir = tempfile::Builder::new().prefix("node-").tempdir().unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_manila-csi-plugin"))
        .arg(format!(
            "--endpoint=unix://{}",
            dir.path().join("csi.sock").display()
        ))
        .arg("--share-protocol-selector=NFS")
        .arg("--nodeid=node-1")
        .arg(format!(
            "--fwdendpoint=unix://{}",
            dir.path().join("nfs.sock").display()
        ))
        .arg("--partner-probe-timeout=300ms")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("nfs.sock") && stderr.contains("never became ready"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_share_id_attribute_that_is_not_a_manila_id_is_refused_before_any_lookup() {
    let env = NodeEnv::start(
        CloudConfig::default(),
        caps(&[rpc::Type::StageUnstageVolume]),
        &[],
    )
    .await;
    let volume = env.create("pvc-climb").await;
    let mut node = env.driver.node().await;
    let mut request = env.stage_request(&volume);
    // Would resolve to the real share's URL if it reached the cloud.
    let climbing = format!("x/../{}", volume.volume_id);
    request
        .volume_context
        .insert("shareID".into(), climbing.clone());
    env.cloud.clear_journal();
    let error = node.node_stage_volume(request).await.unwrap_err();
    assert_eq!(error.code(), Code::InvalidArgument, "{error:?}");
    assert!(
        error.message().contains(&format!(
            "volume attribute shareID: {climbing:?} is not a Manila share id"
        )),
        "{}",
        error.message()
    );
    assert!(env.partner.calls().is_empty(), "{:?}", env.partner.calls());
    let manila_calls: Vec<_> = env
        .cloud
        .journal()
        .into_iter()
        .filter(|e| e.path.contains("/shares"))
        .collect();
    assert!(manila_calls.is_empty(), "{manila_calls:#?}");
    env.cleanup(&volume).await;
}
