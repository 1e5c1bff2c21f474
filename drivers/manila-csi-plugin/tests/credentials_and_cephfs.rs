//! Credential modes (clouds.yaml, application credentials, CA bundle errors) and the CephFS
//! protocol path (cephx rule with its key, forwarded as partner secrets).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;

use csi_proto::v1;
use csi_proto::v1::node_service_capability::rpc;
use csi_proto::v1::volume_capability::access_mode::Mode;
use fakes::{CloudConfig, FakeCloud, SecretKind};
use support::partner::{Call, FakePartner};
use support::{ControllerEnv, GIB, RunningDriver, create_request, mount_capability};
use tonic::Code;

#[tokio::test]
async fn clouds_yaml_mode_provisions() {
    let mut env = ControllerEnv::start(&[]).await;
    let clouds = env.dir.path().join("clouds.yaml");
    std::fs::write(&clouds, env.cloud.clouds_yaml("fake")).unwrap();
    let secrets: HashMap<String, String> = [
        ("os-useClouds", "true"),
        ("os-cloudsFile", clouds.to_str().unwrap()),
        ("os-cloud", "fake"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let volume = env
        .client
        .create_volume(create_request("pvc-clouds", GIB, &secrets, &[]))
        .await
        .unwrap();
    let id = volume.into_inner().volume.unwrap().volume_id;
    let mut wrong = secrets.clone();
    wrong.insert("os-cloud".into(), "other".into());
    let error = env
        .client
        .create_volume(create_request("pvc-clouds", GIB, &wrong, &[]))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::InvalidArgument);
    assert!(error.message().contains("\"other\""), "{}", error.message());
    env.client
        .delete_volume(v1::DeleteVolumeRequest {
            volume_id: id,
            secrets,
        })
        .await
        .unwrap();
    env.assert_no_leftovers();
}

#[tokio::test]
async fn application_credentials_provision() {
    let mut env = ControllerEnv::start(&[]).await;
    let secrets: HashMap<String, String> = env
        .cloud
        .secret(SecretKind::ApplicationCredential)
        .into_iter()
        .collect();
    let volume = env
        .client
        .create_volume(create_request("pvc-appcred", GIB, &secrets, &[]))
        .await
        .unwrap();
    let id = volume.into_inner().volume.unwrap().volume_id;
    env.client
        .delete_volume(v1::DeleteVolumeRequest {
            volume_id: id,
            secrets,
        })
        .await
        .unwrap();
    env.assert_no_leftovers();
}

#[tokio::test]
async fn a_bad_ca_bundle_is_invalid_argument_naming_the_secret() {
    let mut env = ControllerEnv::start(&[]).await;
    let mut secrets = env.secrets.clone();
    secrets.insert(
        "os-certAuthority".into(),
        "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n".into(),
    );
    let error = env
        .client
        .create_volume(create_request("pvc-ca", GIB, &secrets, &[]))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::InvalidArgument, "{error:?}");
    assert!(
        error.message().contains("os-certAuthority"),
        "{}",
        error.message()
    );
    let mut secrets = env.secrets.clone();
    secrets.insert("os-certAuthorityPath".into(), "/nonexistent/ca.pem".into());
    let error = env
        .client
        .create_volume(create_request("pvc-ca", GIB, &secrets, &[]))
        .await
        .unwrap_err();
    assert!(
        error.message().contains("os-certAuthorityPath"),
        "{}",
        error.message()
    );
    env.assert_no_leftovers();
}

#[tokio::test]
async fn cephfs_grants_cephx_and_forwards_the_key_as_partner_secrets() {
    let cloud = FakeCloud::start(CloudConfig::default()).await.unwrap();
    let dir = tempfile::Builder::new()
        .prefix("credentials-and-cephfs-")
        .tempdir()
        .unwrap();
    let partner = FakePartner::start(
        &dir.path().join("ceph.sock"),
        vec![rpc::Type::StageUnstageVolume],
    )
    .await;
    let fwd = format!("--fwdendpoint={}", partner.endpoint);
    let driver = RunningDriver::start(
        dir.path(),
        "manila",
        &[
            "--share-protocol-selector=CEPHFS",
            fwd.as_str(),
            "--nodeid=n1",
            "--share-wait-timeout=3s",
        ],
    )
    .await
    .unwrap();
    let secrets = support::secrets(&cloud);
    let mut controller = driver.controller().await;
    let volume = controller
        .create_volume(create_request(
            "pvc-ceph",
            GIB,
            &secrets,
            &[("cephfs-mounter", "kernel"), ("cephfs-clientID", "alice")],
        ))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    assert_eq!(volume.volume_context["cephfs-mounter"], "kernel");
    let rules = cloud.leftovers().access_rules;
    assert_eq!(
        rules
            .iter()
            .filter_map(|r| r.name.as_deref())
            .collect::<Vec<_>>(),
        ["cephx:alice"]
    );

    let mut node = driver.node().await;
    node.node_stage_volume(v1::NodeStageVolumeRequest {
        volume_id: volume.volume_id.clone(),
        staging_target_path: dir.path().join("staging").display().to_string(),
        volume_capability: Some(mount_capability(Mode::MultiNodeMultiWriter)),
        secrets: secrets.clone(),
        volume_context: volume.volume_context.clone(),
        publish_context: HashMap::new(),
    })
    .await
    .unwrap();
    let calls = partner.calls();
    let [Call::Stage(stage)] = calls.as_slice() else {
        panic!("{calls:#?}")
    };
    assert_eq!(stage.volume_context["mounter"], "kernel");
    assert_eq!(stage.volume_context["provisionVolume"], "false");
    assert_eq!(stage.volume_context["monitors"], "127.0.0.1");
    assert!(stage.volume_context["rootPath"].starts_with('/'));
    assert_eq!(stage.secrets["userID"], "alice");
    assert!(!stage.secrets["userKey"].is_empty());
    assert!(!stage.secrets.contains_key("os-password"));

    controller
        .delete_volume(v1::DeleteVolumeRequest {
            volume_id: volume.volume_id,
            secrets,
        })
        .await
        .unwrap();
    assert!(cloud.leftovers().is_empty(), "{:#?}", cloud.leftovers());
}

/// A CephFS share on another file system than the cluster's default carries
/// `__mount_options: fs=<name>` in its metadata (Manila's CephFS driver puts it there); as
/// upstream, NodeStage gives it to the partner as `fsName` (it used to be dropped, so the
/// partner looked for the share on the default file system).
#[tokio::test]
async fn cephfs_file_system_name_comes_from_the_share_metadata() {
    let mut config = CloudConfig::default();
    config.manila.cephfs_filesystem_name = Some("fs-b".into());
    let cloud = FakeCloud::start(config).await.unwrap();
    let dir = tempfile::Builder::new()
        .prefix("credentials-and-cephfs-")
        .tempdir()
        .unwrap();
    let partner = FakePartner::start(
        &dir.path().join("ceph.sock"),
        vec![rpc::Type::StageUnstageVolume],
    )
    .await;
    let fwd = format!("--fwdendpoint={}", partner.endpoint);
    let driver = RunningDriver::start(
        dir.path(),
        "manila",
        &[
            "--share-protocol-selector=CEPHFS",
            fwd.as_str(),
            "--nodeid=n1",
            "--share-wait-timeout=3s",
        ],
    )
    .await
    .unwrap();
    let secrets = support::secrets(&cloud);
    let mut controller = driver.controller().await;
    let volume = controller
        .create_volume(create_request("pvc-fs-b", GIB, &secrets, &[]))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    let mut node = driver.node().await;
    node.node_stage_volume(v1::NodeStageVolumeRequest {
        volume_id: volume.volume_id.clone(),
        staging_target_path: dir.path().join("staging").display().to_string(),
        volume_capability: Some(mount_capability(Mode::MultiNodeMultiWriter)),
        secrets: secrets.clone(),
        volume_context: volume.volume_context.clone(),
        publish_context: HashMap::new(),
    })
    .await
    .unwrap();
    let calls = partner.calls();
    let [Call::Stage(stage)] = calls.as_slice() else {
        panic!("{calls:#?}")
    };
    assert_eq!(stage.volume_context["fsName"], "fs-b", "{stage:#?}");
    assert_eq!(stage.volume_context["mounter"], "fuse");

    controller
        .delete_volume(v1::DeleteVolumeRequest {
            volume_id: volume.volume_id,
            secrets,
        })
        .await
        .unwrap();
    assert!(cloud.leftovers().is_empty(), "{:#?}", cloud.leftovers());
}

/// `cephfs-clientID` takes a comma list of cephx users: each gets its `cephx` rule (spaces
/// around entries and repeats ignored), `shareAccessIDs` lists the rules in that order, and
/// the node mounts with the first user's key (a list used to be one user named
/// "bob, alice,bob", refused as InvalidArgument).
#[tokio::test]
async fn cephfs_client_id_takes_a_list_of_users() {
    let cloud = FakeCloud::start(CloudConfig::default()).await.unwrap();
    let dir = tempfile::Builder::new()
        .prefix("credentials-and-cephfs-")
        .tempdir()
        .unwrap();
    let partner = FakePartner::start(
        &dir.path().join("ceph.sock"),
        vec![rpc::Type::StageUnstageVolume],
    )
    .await;
    let fwd = format!("--fwdendpoint={}", partner.endpoint);
    let driver = RunningDriver::start(
        dir.path(),
        "manila",
        &[
            "--share-protocol-selector=CEPHFS",
            fwd.as_str(),
            "--nodeid=n1",
            "--share-wait-timeout=3s",
        ],
    )
    .await
    .unwrap();
    let secrets = support::secrets(&cloud);
    let mut controller = driver.controller().await;
    let volume = controller
        .create_volume(create_request(
            "pvc-shared-users",
            GIB,
            &secrets,
            &[("cephfs-clientID", "bob, alice,bob")],
        ))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    let mut rules: Vec<String> = cloud
        .leftovers()
        .access_rules
        .iter()
        .filter_map(|r| r.name.clone())
        .collect();
    rules.sort();
    assert_eq!(rules, ["cephx:alice", "cephx:bob"]);
    let access_ids: Vec<&str> = volume.volume_context["shareAccessIDs"].split(',').collect();
    assert_eq!(access_ids.len(), 2, "{:?}", volume.volume_context);

    let mut node = driver.node().await;
    node.node_stage_volume(v1::NodeStageVolumeRequest {
        volume_id: volume.volume_id.clone(),
        staging_target_path: dir.path().join("staging").display().to_string(),
        volume_capability: Some(mount_capability(Mode::MultiNodeMultiWriter)),
        secrets: secrets.clone(),
        volume_context: volume.volume_context.clone(),
        publish_context: HashMap::new(),
    })
    .await
    .unwrap();
    let calls = partner.calls();
    let [Call::Stage(stage)] = calls.as_slice() else {
        panic!("{calls:#?}")
    };
    assert_eq!(stage.secrets["userID"], "bob", "the first user listed");
    assert!(!stage.secrets["userKey"].is_empty());

    // Asking again finds both rules and grants nothing more.
    let again = controller
        .create_volume(create_request(
            "pvc-shared-users",
            GIB,
            &secrets,
            &[("cephfs-clientID", "bob, alice,bob")],
        ))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    assert_eq!(
        again.volume_context["shareAccessIDs"],
        volume.volume_context["shareAccessIDs"]
    );
    assert_eq!(cloud.leftovers().access_rules.len(), 2);

    controller
        .delete_volume(v1::DeleteVolumeRequest {
            volume_id: volume.volume_id,
            secrets,
        })
        .await
        .unwrap();
    assert!(cloud.leftovers().is_empty(), "{:#?}", cloud.leftovers());
}
