//! StorageClass parameters `groupID`, `affinity` and `antiAffinity`: the share is created in
//! the share group with the scheduler hints (microversion 2.65), all three land in the volume
//! context, the node stages such a volume, and bad values are refused with nothing created.
//! With `--pvc-annotations` the claim's hints join the class's and its group overrides it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;

use csi_proto::v1;
use csi_proto::v1::node_service_capability::rpc;
use csi_proto::v1::volume_capability::access_mode::Mode;
use fakes::config::{ShareGroupSeed, ShareGroupTypeSeed, ShareTypeSeed};
use fakes::{CloudConfig, FakeCloud};
use serde_json::{Value, json};
use support::partner::{Call, FakePartner};
use support::{ControllerEnv, GIB, RunningDriver, create_request, mount_capability};
use tonic::Code;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// The share group the tests use (type `default` only).
const GROUP: &str = "6a1f9c2e-3b4d-4e5f-8a6b-7c8d9e0f1a2b";
/// A second group of the same type, for the claim's annotation.
const CLAIM_GROUP: &str = "7b2e0d3f-4c5e-4f60-9b7c-8d9e0f1a2b3c";
/// A group in `error`.
const BROKEN_GROUP: &str = "8c3f1e40-5d6f-4071-8c8d-9e0f1a2b3c4d";
/// No group has this id.
const NO_GROUP: &str = "9d402f51-6e70-4182-9d9e-0f1a2b3c4d5e";

/// Share types `default` and `other`; group type `gt` holds `default`; three groups.
fn config() -> CloudConfig {
    let mut config = CloudConfig::default();
    config
        .manila
        .share_types
        .push(ShareTypeSeed::named("other"));
    config.manila.share_group_types = vec![ShareGroupTypeSeed {
        name: "gt".into(),
        share_types: vec!["default".into()],
        ..ShareGroupTypeSeed::default()
    }];
    let group = |id: &str, status: &str| ShareGroupSeed {
        id: Some(id.into()),
        name: Some(format!("group-{status}")),
        share_group_type: "gt".into(),
        status: status.into(),
        ..ShareGroupSeed::default()
    };
    config.manila.share_groups = vec![
        group(GROUP, "available"),
        group(CLAIM_GROUP, "available"),
        group(BROKEN_GROUP, "error"),
    ];
    config
}

/// The share as Manila shows it at 2.65 (group and hint metadata included).
async fn share(cloud: &FakeCloud, id: &str) -> Value {
    share_at(cloud, id, "2.65").await
}

/// The share as Manila shows it at `version`.
async fn share_at(cloud: &FakeCloud, id: &str, version: &str) -> Value {
    let http = reqwest::Client::new();
    let account = cloud.account();
    let auth = json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {
        "id": account.user_id, "password": account.password.expose()}}},
        "scope": {"project": {"id": account.project_id}}}});
    let response = http
        .post(format!("{}/auth/tokens", cloud.auth_url()))
        .json(&auth)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let token = response.headers()["X-Subject-Token"]
        .to_str()
        .unwrap()
        .to_string();
    let body: Value = http
        .get(format!("{}/shares/{id}", cloud.manila_url()))
        .header("X-Auth-Token", token)
        .header("X-OpenStack-Manila-API-Version", version)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    body["share"].clone()
}

async fn create(
    env: &mut ControllerEnv,
    name: &str,
    parameters: &[(&str, &str)],
) -> Result<v1::Volume, tonic::Status> {
    env.client
        .create_volume(create_request(name, GIB, &env.secrets, parameters))
        .await
        .map(|r| r.into_inner().volume.unwrap())
}

#[tokio::test]
async fn the_share_is_created_in_the_group_with_the_hints_and_they_reach_the_context() {
    let mut env = ControllerEnv::with_cloud(config(), &[]).await;
    let near = env.create("pvc-near-anchor", GIB).await.unwrap();
    let far = env.create("pvc-far-anchor", GIB).await.unwrap();
    let anti = format!("{}, {}", far.volume_id, near.volume_id);
    let volume = create(
        &mut env,
        "pvc-grouped",
        &[
            ("groupID", GROUP),
            ("affinity", &near.volume_id),
            ("antiAffinity", &anti),
        ],
    )
    .await
    .unwrap();

    let created = share(&env.cloud, &volume.volume_id).await;
    assert_eq!(created["share_group_id"], GROUP, "{created}");
    assert_eq!(
        created["metadata"]["__affinity_same_host"],
        near.volume_id.as_str()
    );
    assert_eq!(
        created["metadata"]["__affinity_different_host"],
        format!("{},{}", far.volume_id, near.volume_id)
    );
    let context = &volume.volume_context;
    assert_eq!(context["groupID"], GROUP);
    assert_eq!(context["affinity"], near.volume_id);
    assert_eq!(
        context["antiAffinity"],
        format!("{},{}", far.volume_id, near.volume_id)
    );
    assert_eq!(context["shareID"], volume.volume_id);

    // Idempotent: the same request finds the share; another group is AlreadyExists.
    let again = create(&mut env, "pvc-grouped", &[("groupID", GROUP)])
        .await
        .unwrap();
    assert_eq!(again.volume_id, volume.volume_id);
    let error = create(&mut env, "pvc-grouped", &[("groupID", CLAIM_GROUP)])
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::AlreadyExists, "{error:?}");
    assert!(error.message().contains(CLAIM_GROUP), "{}", error.message());

    // Without the parameters: no group, no hints, no such context keys.
    let plain = env.create("pvc-plain", GIB).await.unwrap();
    let created = share(&env.cloud, &plain.volume_id).await;
    assert!(created["share_group_id"].is_null(), "{created}");
    assert!(created["metadata"].get("__affinity_same_host").is_none());
    for key in ["groupID", "affinity", "antiAffinity"] {
        assert!(!plain.volume_context.contains_key(key), "{key}");
    }

    for v in [volume, plain, near, far] {
        env.delete(&v.volume_id).await.unwrap();
    }
    env.assert_no_leftovers();
}

#[tokio::test]
async fn bad_values_are_refused_and_nothing_is_created() {
    let mut env = ControllerEnv::with_cloud(config(), &[]).await;
    let id = "0a1b2c3d-4e5f-4a6b-8c7d-8e9fa0b1c2d3";
    let empty_entry = format!("{id},,{id}");
    let cases: Vec<(Vec<(&str, &str)>, &str)> = vec![
        // Checked before the cloud is asked anything.
        (
            vec![("groupID", "my-group")],
            "parameter groupID: \"my-group\"",
        ),
        (vec![("affinity", &empty_entry)], "parameter affinity:"),
        (
            vec![("affinity", "pvc-near")],
            "\"pvc-near\" is not a Manila share id",
        ),
        (vec![("antiAffinity", ",")], "parameter antiAffinity:"),
        (
            vec![("antiAffinity", "../../shares")],
            "\"../../shares\" is not a Manila share id",
        ),
        // Refused by Manila: no such group, a group in error, a type the group lacks.
        (vec![("groupID", NO_GROUP)], NO_GROUP),
        (vec![("groupID", BROKEN_GROUP)], "status must be available"),
        (
            vec![("groupID", GROUP), ("type", "other")],
            "not supported by the specified share group",
        ),
    ];
    for (parameters, text) in cases {
        let error = create(&mut env, "pvc-bad", &parameters).await.unwrap_err();
        assert_eq!(
            error.code(),
            Code::InvalidArgument,
            "{parameters:?}: {error:?}"
        );
        assert!(
            error.message().contains(text),
            "{parameters:?}: {}",
            error.message()
        );
        assert!(
            error.message().contains("groupID") || error.message().contains("ffinity"),
            "{parameters:?}: the message names the parameter: {}",
            error.message()
        );
        env.assert_no_leftovers();
    }
}

#[tokio::test]
async fn hints_need_microversion_2_65() {
    let mut config = config();
    config.manila.max_microversion = "2.64".into();
    let mut env = ControllerEnv::with_cloud(config, &[]).await;
    let anchor = env.create("pvc-anchor", GIB).await.unwrap();
    let error = create(&mut env, "pvc-near", &[("affinity", &anchor.volume_id)])
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::FailedPrecondition, "{error:?}");
    assert!(error.message().contains("2.65"), "{}", error.message());
    // A group alone needs only 2.31.
    let grouped = create(&mut env, "pvc-grouped", &[("groupID", GROUP)])
        .await
        .unwrap();
    assert_eq!(
        share_at(&env.cloud, &grouped.volume_id, "2.64").await["share_group_id"],
        GROUP
    );
    for v in [anchor, grouped] {
        env.delete(&v.volume_id).await.unwrap();
    }
    env.assert_no_leftovers();
}

/// A fake API server answering for claim `ns1/<name>` with `annotations`.
async fn api_server(name: &str, annotations: Value) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!(
            "/api/v1/namespaces/ns1/persistentvolumeclaims/{name}"
        )))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "ns1", "annotations": annotations},
            "spec": {"accessModes": ["ReadWriteMany"]},
        })))
        .mount(&server)
        .await;
    server
}

#[tokio::test]
async fn claim_annotations_join_the_class_hints_and_override_its_group() {
    let mut env = ControllerEnv::with_cloud(config(), &[]).await;
    let by_class = env.create("pvc-by-class", GIB).await.unwrap();
    let by_claim = env.create("pvc-by-claim", GIB).await.unwrap();
    let server = api_server(
        "claim",
        json!({
            "manila.csi.openstack.org/affinity": format!("pvc-by-claim,{}", by_class.volume_id),
            "manila.csi.openstack.org/group-id": CLAIM_GROUP,
        }),
    )
    .await;
    let kubeconfig = env.dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n\
             users:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n\
             current-context: x\n",
            server.uri()
        ),
    )
    .unwrap();
    let flag = format!("--kubeconfig={}", kubeconfig.display());
    let annotated = RunningDriver::start(
        env.dir.path(),
        "annotated",
        &[
            "--share-protocol-selector=NFS",
            "--provide-node-service=false",
            "--pvc-annotations",
            flag.as_str(),
        ],
    )
    .await
    .unwrap();
    let volume = annotated
        .controller()
        .await
        .create_volume(create_request(
            "pvc-claimed",
            GIB,
            &env.secrets,
            &[
                ("groupID", GROUP),
                ("affinity", &by_class.volume_id),
                ("csi.storage.k8s.io/pvc/name", "claim"),
                ("csi.storage.k8s.io/pvc/namespace", "ns1"),
            ],
        ))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    let created = share(&env.cloud, &volume.volume_id).await;
    assert_eq!(created["share_group_id"], CLAIM_GROUP, "{created}");
    // The class's share first, then the claim's (its name resolved), each once.
    let same_host = format!("{},{}", by_class.volume_id, by_claim.volume_id);
    assert_eq!(
        created["metadata"]["__affinity_same_host"],
        same_host.as_str()
    );
    assert_eq!(volume.volume_context["affinity"], same_host);
    assert_eq!(volume.volume_context["groupID"], CLAIM_GROUP);
    drop(annotated);
    for v in [volume, by_class, by_claim] {
        env.delete(&v.volume_id).await.unwrap();
    }
    env.assert_no_leftovers();
}

#[tokio::test]
async fn a_volume_whose_context_carries_the_group_and_hints_stages_and_publishes() {
    let cloud = FakeCloud::start(config()).await.unwrap();
    let dir = tempfile::Builder::new()
        .prefix("groups-")
        .tempdir()
        .unwrap();
    let partner = FakePartner::start(
        &dir.path().join("partner.sock"),
        vec![rpc::Type::StageUnstageVolume],
    )
    .await;
    let fwd = format!("--fwdendpoint={}", partner.endpoint);
    let driver = RunningDriver::start(
        dir.path(),
        "manila",
        &[
            "--share-protocol-selector=NFS",
            fwd.as_str(),
            "--nodeid=node-1",
            "--share-wait-timeout=3s",
        ],
    )
    .await
    .unwrap();
    let secrets = support::secrets(&cloud);
    let mut controller = driver.controller().await;
    let create =
        |name: &str, parameters: &[(&str, &str)]| create_request(name, GIB, &secrets, parameters);
    let anchor = controller
        .create_volume(create("pvc-anchor", &[]))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    let volume = controller
        .create_volume(create(
            "pvc-staged",
            &[
                ("groupID", GROUP),
                ("affinity", &anchor.volume_id),
                ("antiAffinity", &anchor.volume_id),
            ],
        ))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    for key in ["groupID", "affinity", "antiAffinity"] {
        assert!(volume.volume_context.contains_key(key), "{key}");
    }

    let staging = dir.path().join("staging").display().to_string();
    let mut node = driver.node().await;
    node.node_stage_volume(v1::NodeStageVolumeRequest {
        volume_id: volume.volume_id.clone(),
        staging_target_path: staging.clone(),
        volume_capability: Some(mount_capability(Mode::MultiNodeMultiWriter)),
        secrets: secrets.clone(),
        volume_context: volume.volume_context.clone(),
        publish_context: HashMap::new(),
    })
    .await
    .unwrap();
    node.node_publish_volume(v1::NodePublishVolumeRequest {
        volume_id: volume.volume_id.clone(),
        staging_target_path: staging.clone(),
        target_path: dir.path().join("target").display().to_string(),
        volume_capability: Some(mount_capability(Mode::MultiNodeMultiWriter)),
        readonly: false,
        secrets: secrets.clone(),
        volume_context: volume.volume_context.clone(),
        publish_context: HashMap::new(),
    })
    .await
    .unwrap();
    let calls = partner.calls();
    let [Call::Stage(stage), Call::Publish(publish)] = calls.as_slice() else {
        panic!("expected stage then publish, got {calls:#?}");
    };
    // The partner gets the NFS context only: the creation-time keys stay with the driver.
    for context in [&stage.volume_context, &publish.volume_context] {
        let mut keys: Vec<_> = context.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["server", "share"], "{context:?}");
    }
    node.node_unpublish_volume(v1::NodeUnpublishVolumeRequest {
        volume_id: volume.volume_id.clone(),
        target_path: dir.path().join("target").display().to_string(),
    })
    .await
    .unwrap();
    node.node_unstage_volume(v1::NodeUnstageVolumeRequest {
        volume_id: volume.volume_id.clone(),
        staging_target_path: staging,
    })
    .await
    .unwrap();

    for v in [volume, anchor] {
        controller
            .delete_volume(v1::DeleteVolumeRequest {
                volume_id: v.volume_id.clone(),
                secrets: secrets.clone(),
            })
            .await
            .unwrap();
    }
    let leftovers = cloud.leftovers();
    assert!(leftovers.is_empty(), "{leftovers:#?}");
    drop(driver);
    drop(partner);
}
