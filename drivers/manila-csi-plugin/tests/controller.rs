//! Controller behaviour against the fake cloud over real HTTP, with the driver served on a
//! unix socket.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use csi_proto::v1::{self, volume_content_source};
use fakes::Delays;
use support::{ControllerEnv, GIB, create_request, share_json};
use tonic::Code;

#[tokio::test]
async fn create_volume_is_idempotent_by_name_and_rounds_sizes_up() {
    let mut env = ControllerEnv::start(&[]).await;
    let first = env.create("pvc-idem", GIB + 1).await.unwrap();
    assert_eq!(first.capacity_bytes, 2 * GIB);
    let second = env.create("pvc-idem", 2 * GIB).await.unwrap();
    assert_eq!(first.volume_id, second.volume_id);
    let creates = env
        .cloud
        .journal()
        .iter()
        .filter(|e| e.method == "POST" && e.path.ends_with("/shares"))
        .count();
    assert_eq!(creates, 1, "the second call must reuse the share");
    env.delete(&first.volume_id).await.unwrap();
    env.assert_no_leftovers();
}

#[tokio::test]
async fn zero_size_becomes_one_gib() {
    let mut env = ControllerEnv::start(&[]).await;
    let volume = env.create("pvc-zero", 0).await.unwrap();
    assert_eq!(volume.capacity_bytes, GIB);
    env.delete(&volume.volume_id).await.unwrap();
    env.assert_no_leftovers();
}

#[tokio::test]
async fn create_volume_response_shape() {
    let mut env = ControllerEnv::start(&["--cluster-id=cluster-a"]).await;
    let volume = env.create("pvc-shape", GIB).await.unwrap();
    insta::assert_yaml_snapshot!(shape(&volume), {
        ".volume_id" => "[share id]",
        ".volume_context.shareID" => "[share id]",
        ".volume_context.shareAccessIDs" => "[access rule id]",
    });
    env.delete(&volume.volume_id).await.unwrap();
}

fn shape(volume: &v1::Volume) -> serde_json::Value {
    let context: std::collections::BTreeMap<_, _> = volume.volume_context.iter().collect();
    serde_json::json!({
        "volume_id": volume.volume_id,
        "capacity_bytes": volume.capacity_bytes,
        "volume_context": context,
        "accessible_topology": volume.accessible_topology.iter().map(|t| t.segments.iter().collect::<std::collections::BTreeMap<_, _>>()).collect::<Vec<_>>(),
        "content_source": volume.content_source.is_some(),
    })
}

#[tokio::test]
async fn a_mismatching_existing_share_is_already_exists() {
    let mut env = ControllerEnv::start(&[]).await;
    let volume = env.create("pvc-size", GIB).await.unwrap();
    let error = env.create("pvc-size", 3 * GIB).await.unwrap_err();
    assert_eq!(error.code(), Code::AlreadyExists, "{error:?}");
    assert!(
        error.message().contains("pvc-size") && error.message().contains("size 1 GiB"),
        "{}",
        error.message()
    );
    env.delete(&volume.volume_id).await.unwrap();
    env.assert_no_leftovers();
}

#[tokio::test]
async fn a_concurrent_request_for_the_same_name_is_aborted() {
    let mut env = ControllerEnv::start(&[]).await;
    env.cloud.set_delays(Delays {
        share_create_ms: 400,
        ..Delays::none()
    });
    let mut other = env.client.clone();
    let request = create_request("pvc-race", GIB, &env.secrets, &[]);
    let first = tokio::spawn({
        let request = request.clone();
        let mut client = env.client.clone();
        async move { client.create_volume(request).await }
    });
    // Wait until the first request has reached the cloud (the share exists, creating).
    let cloud = &env.cloud;
    support::wait_until(
        "the first share to be created",
        std::time::Duration::from_secs(5),
        || {
            let shares = cloud.leftovers().shares;
            (!shares.is_empty(), shares)
        },
    )
    .await;
    let error = other.create_volume(request).await.unwrap_err();
    assert_eq!(error.code(), Code::Aborted, "{error:?}");
    assert!(error.message().contains("pvc-race"), "{}", error.message());
    let volume = first.await.unwrap().unwrap().into_inner().volume.unwrap();
    env.delete(&volume.volume_id).await.unwrap();
    env.assert_no_leftovers();
}

#[tokio::test]
async fn share_metadata_carries_pvc_info_appended_metadata_and_cluster_id() {
    let mut env = ControllerEnv::start(&["--cluster-id=cl-1"]).await;
    let request = create_request(
        "pvc-meta",
        GIB,
        &env.secrets,
        &[
            ("csi.storage.k8s.io/pvc/name", "data"),
            ("csi.storage.k8s.io/pvc/namespace", "apps"),
            ("csi.storage.k8s.io/pv/name", "pvc-meta"),
            ("appendShareMetadata", r#"{"team":"storage"}"#),
        ],
    );
    let volume = env
        .client
        .create_volume(request)
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    let share = share_json(&env, &volume.volume_id).await;
    let metadata = &share["share"]["metadata"];
    assert_eq!(metadata["csi.storage.k8s.io/pvc/name"], "data");
    assert_eq!(metadata["csi.storage.k8s.io/pvc/namespace"], "apps");
    assert_eq!(metadata["team"], "storage");
    assert_eq!(metadata["manila.csi.openstack.org/cluster"], "cl-1");
    assert_eq!(
        share["share"]["description"],
        "provisioned-by=manila.csi.openstack.org"
    );
    env.delete(&volume.volume_id).await.unwrap();
    env.assert_no_leftovers();
}

#[tokio::test]
async fn nfs_share_clients_become_ip_rules() {
    let mut env = ControllerEnv::start(&[]).await;
    let request = create_request(
        "pvc-rules",
        GIB,
        &env.secrets,
        &[("nfs-shareClient", "10.0.0.0/8,192.168.1.5")],
    );
    let volume = env
        .client
        .create_volume(request.clone())
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    let ids: Vec<&str> = volume.volume_context["shareAccessIDs"].split(',').collect();
    assert_eq!(ids.len(), 2, "{:?}", volume.volume_context);
    let rules = env.cloud.leftovers().access_rules;
    let mut names: Vec<_> = rules.iter().filter_map(|r| r.name.clone()).collect();
    names.sort();
    assert_eq!(names, vec!["ip:10.0.0.0/8", "ip:192.168.1.5"]);
    // Repeating the call does not duplicate rules.
    env.client.create_volume(request).await.unwrap();
    assert_eq!(env.cloud.leftovers().access_rules.len(), 2);
    env.delete(&volume.volume_id).await.unwrap();
    env.assert_no_leftovers();
}

#[tokio::test]
async fn delete_volume_of_an_unknown_id_succeeds() {
    let mut env = ControllerEnv::start(&[]).await;
    env.delete("00000000-0000-0000-0000-000000000000")
        .await
        .unwrap();
    let error = env.delete("").await.unwrap_err();
    assert_eq!(error.code(), Code::InvalidArgument);
}

#[tokio::test]
async fn expand_volume_extends_the_share() {
    let mut env = ControllerEnv::start(&[]).await;
    let volume = env.create("pvc-grow", GIB).await.unwrap();
    let response = env
        .client
        .controller_expand_volume(v1::ControllerExpandVolumeRequest {
            volume_id: volume.volume_id.clone(),
            capacity_range: Some(v1::CapacityRange {
                required_bytes: 3 * GIB - 5,
                limit_bytes: 0,
            }),
            secrets: env.secrets.clone(),
            volume_capability: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(response.capacity_bytes, 3 * GIB);
    assert!(!response.node_expansion_required);
    let share = share_json(&env, &volume.volume_id).await;
    assert_eq!(share["share"]["size"], 3);
    env.delete(&volume.volume_id).await.unwrap();
    env.assert_no_leftovers();
}

#[tokio::test]
async fn capabilities_and_unsupported_rpcs() {
    let mut env = ControllerEnv::start(&[]).await;
    let capabilities = env
        .client
        .controller_get_capabilities(v1::ControllerGetCapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner();
    insta::assert_debug_snapshot!(capabilities);
    let error = env
        .client
        .list_volumes(v1::ListVolumesRequest::default())
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::Unimplemented);
    let error = env
        .client
        .get_capacity(v1::GetCapacityRequest::default())
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::Unimplemented);
    let error = env
        .client
        .list_snapshots(v1::ListSnapshotsRequest::default())
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::Unimplemented);
    let error = env
        .client
        .controller_publish_volume(v1::ControllerPublishVolumeRequest::default())
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::Unimplemented);
    let mut clone = create_request("pvc-clone", GIB, &env.secrets, &[]);
    clone.volume_content_source = Some(v1::VolumeContentSource {
        r#type: Some(volume_content_source::Type::Volume(
            volume_content_source::VolumeSource {
                volume_id: "x".into(),
            },
        )),
    });
    let error = env.client.create_volume(clone).await.unwrap_err();
    assert_eq!(error.code(), Code::Unimplemented);
    env.assert_no_leftovers();
}
