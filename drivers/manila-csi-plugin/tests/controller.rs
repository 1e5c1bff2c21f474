//! Controller behaviour against the fake cloud over real HTTP, with the driver served on a
//! unix socket.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use csi_proto::v1::volume_capability::access_mode::Mode;
use csi_proto::v1::{self, volume_content_source};
use fakes::{CloudConfig, Delays, ShareTypeSeed};
use support::{ControllerEnv, GIB, create_request, mount_capability, snapshot_until_ready};
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

/// Reads a share straight from the fake's API (as an admin client would).
async fn share_json(env: &ControllerEnv, id: &str) -> serde_json::Value {
    let http = reqwest::Client::new();
    let account = env.cloud.account();
    let auth = serde_json::json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {
        "id": account.user_id, "password": account.password.expose()}}},
        "scope": {"project": {"id": account.project_id}}}});
    let response = http
        .post(format!("{}/auth/tokens", env.cloud.auth_url()))
        .json(&auth)
        .send()
        .await
        .unwrap();
    let token = response.headers()["X-Subject-Token"]
        .to_str()
        .unwrap()
        .to_string();
    http.get(format!("{}/shares/{id}", env.cloud.manila_url()))
        .header("X-Auth-Token", token)
        .header("X-OpenStack-Manila-API-Version", "2.45")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
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
async fn snapshots_are_created_restored_and_deleted() {
    let mut env = ControllerEnv::start(&[]).await;
    let volume = env.create("pvc-src", GIB).await.unwrap();
    let request = v1::CreateSnapshotRequest {
        source_volume_id: volume.volume_id.clone(),
        name: "snap-1".into(),
        secrets: env.secrets.clone(),
        parameters: Default::default(),
    };
    let snapshot = snapshot_until_ready(&mut env.client, request.clone())
        .await
        .unwrap();
    assert!(snapshot.ready_to_use);
    assert_eq!(snapshot.source_volume_id, volume.volume_id);
    assert_eq!(snapshot.size_bytes, GIB);
    let again = snapshot_until_ready(&mut env.client, request)
        .await
        .unwrap();
    assert_eq!(again.snapshot_id, snapshot.snapshot_id);

    let mut restore = create_request("pvc-restored", GIB, &env.secrets, &[]);
    restore.volume_content_source = Some(v1::VolumeContentSource {
        r#type: Some(volume_content_source::Type::Snapshot(
            volume_content_source::SnapshotSource {
                snapshot_id: snapshot.snapshot_id.clone(),
            },
        )),
    });
    let restored = env
        .client
        .create_volume(restore)
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    assert!(restored.content_source.is_some());

    env.delete(&restored.volume_id).await.unwrap();
    let delete = v1::DeleteSnapshotRequest {
        snapshot_id: snapshot.snapshot_id.clone(),
        secrets: env.secrets.clone(),
    };
    env.client.delete_snapshot(delete.clone()).await.unwrap();
    env.client.delete_snapshot(delete).await.unwrap();
    env.delete(&volume.volume_id).await.unwrap();
    env.assert_no_leftovers();
}

#[tokio::test]
async fn restoring_needs_create_share_from_snapshot_support() {
    let mut config = CloudConfig::default();
    config.manila.share_types = vec![ShareTypeSeed {
        create_share_from_snapshot_support: false,
        ..ShareTypeSeed::named("default")
    }];
    let mut env = ControllerEnv::with_cloud(config, &[]).await;
    let volume = env.create("pvc-src", GIB).await.unwrap();
    let snapshot = snapshot_until_ready(
        &mut env.client,
        v1::CreateSnapshotRequest {
            source_volume_id: volume.volume_id.clone(),
            name: "snap-x".into(),
            secrets: env.secrets.clone(),
            parameters: Default::default(),
        },
    )
    .await
    .unwrap();
    let mut restore = create_request("pvc-restored", GIB, &env.secrets, &[]);
    restore.volume_content_source = Some(v1::VolumeContentSource {
        r#type: Some(volume_content_source::Type::Snapshot(
            volume_content_source::SnapshotSource {
                snapshot_id: snapshot.snapshot_id.clone(),
            },
        )),
    });
    let error = env.client.create_volume(restore).await.unwrap_err();
    assert_eq!(error.code(), Code::InvalidArgument, "{error:?}");
    assert!(
        error
            .message()
            .contains("create_share_from_snapshot_support"),
        "{}",
        error.message()
    );
    env.client
        .delete_snapshot(v1::DeleteSnapshotRequest {
            snapshot_id: snapshot.snapshot_id,
            secrets: env.secrets.clone(),
        })
        .await
        .unwrap();
    env.delete(&volume.volume_id).await.unwrap();
    env.assert_no_leftovers();
}

#[tokio::test]
async fn snapshots_need_snapshot_support() {
    let mut config = CloudConfig::default();
    config.manila.share_types = vec![ShareTypeSeed {
        snapshot_support: false,
        ..ShareTypeSeed::named("default")
    }];
    let mut env = ControllerEnv::with_cloud(config, &[]).await;
    let volume = env.create("pvc-nosnap", GIB).await.unwrap();
    let error = env
        .client
        .create_snapshot(v1::CreateSnapshotRequest {
            source_volume_id: volume.volume_id.clone(),
            name: "snap-no".into(),
            secrets: env.secrets.clone(),
            parameters: Default::default(),
        })
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::InvalidArgument, "{error:?}");
    assert!(
        error.message().contains("snapshot_support"),
        "{}",
        error.message()
    );
    env.delete(&volume.volume_id).await.unwrap();
    env.assert_no_leftovers();
}

#[tokio::test]
async fn restoring_from_a_snapshot_still_creating_is_unavailable() {
    let mut env = ControllerEnv::start(&["--share-wait-timeout=300ms"]).await;
    let volume = env.create("pvc-src", GIB).await.unwrap();
    env.cloud.set_delays(Delays {
        snapshot_create_ms: 1500,
        ..Delays::none()
    });
    let snapshot_request = v1::CreateSnapshotRequest {
        source_volume_id: volume.volume_id.clone(),
        name: "snap-slow".into(),
        secrets: env.secrets.clone(),
        parameters: Default::default(),
    };
    // CreateSnapshot does not wait: a snapshot still `creating` comes back not ready.
    let first = env
        .client
        .create_snapshot(snapshot_request.clone())
        .await
        .unwrap()
        .into_inner()
        .snapshot
        .unwrap();
    assert!(!first.ready_to_use, "{first:?}");
    let snapshot_id = env.cloud.leftovers().snapshots[0].id.clone();
    let mut restore = create_request("pvc-restored", GIB, &env.secrets, &[]);
    restore.volume_content_source = Some(v1::VolumeContentSource {
        r#type: Some(volume_content_source::Type::Snapshot(
            volume_content_source::SnapshotSource {
                snapshot_id: snapshot_id.clone(),
            },
        )),
    });
    let error = env.client.create_volume(restore).await.unwrap_err();
    assert_eq!(error.code(), Code::Unavailable, "{error:?}");
    assert!(
        error.message().contains(&snapshot_id),
        "{}",
        error.message()
    );
    // Retrying CreateSnapshot (as the snapshotter does) returns the same snapshot, and
    // eventually reports it ready.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let snapshot = env
            .client
            .create_snapshot(snapshot_request.clone())
            .await
            .unwrap()
            .into_inner()
            .snapshot
            .unwrap();
        assert_eq!(snapshot.snapshot_id, snapshot_id);
        if snapshot.ready_to_use {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "snapshot never became ready: {snapshot:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    env.client
        .delete_snapshot(v1::DeleteSnapshotRequest {
            snapshot_id,
            secrets: env.secrets.clone(),
        })
        .await
        .unwrap();
    env.delete(&volume.volume_id).await.unwrap();
    env.assert_no_leftovers();
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
async fn validate_volume_capabilities_confirms_mount_and_rejects_block() {
    let mut env = ControllerEnv::start(&[]).await;
    let volume = env.create("pvc-validate", GIB).await.unwrap();
    let mut request = v1::ValidateVolumeCapabilitiesRequest {
        volume_id: volume.volume_id.clone(),
        volume_capabilities: vec![mount_capability(Mode::MultiNodeMultiWriter)],
        secrets: env.secrets.clone(),
        ..Default::default()
    };
    let ok = env
        .client
        .validate_volume_capabilities(request.clone())
        .await
        .unwrap()
        .into_inner();
    assert!(ok.confirmed.is_some(), "{ok:?}");
    request.volume_capabilities = vec![v1::VolumeCapability {
        access_mode: Some(v1::volume_capability::AccessMode {
            mode: Mode::SingleNodeWriter as i32,
        }),
        access_type: Some(v1::volume_capability::AccessType::Block(Default::default())),
    }];
    let rejected = env
        .client
        .validate_volume_capabilities(request.clone())
        .await
        .unwrap()
        .into_inner();
    assert!(
        rejected.confirmed.is_none() && rejected.message.contains("block"),
        "{rejected:?}"
    );
    request.volume_id = "00000000-0000-0000-0000-000000000000".into();
    let error = env
        .client
        .validate_volume_capabilities(request)
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::NotFound);
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

#[tokio::test]
async fn auto_topology_takes_the_zone_from_accessibility_requirements() {
    let mut config = CloudConfig::default();
    config.manila.availability_zones = vec!["nova".into(), "zone-b".into()];
    let mut env = ControllerEnv::with_cloud(config, &["--with-topology"]).await;
    let mut request = create_request("pvc-topo", GIB, &env.secrets, &[("autoTopology", "true")]);
    request.accessibility_requirements = Some(v1::TopologyRequirement {
        requisite: vec![],
        preferred: vec![v1::Topology {
            segments: [(
                "topology.manila.csi.openstack.org/zone".to_string(),
                "zone-b".to_string(),
            )]
            .into(),
        }],
    });
    let volume = env
        .client
        .create_volume(request)
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    assert_eq!(
        volume.accessible_topology[0].segments["topology.manila.csi.openstack.org/zone"],
        "zone-b"
    );
    let share = share_json(&env, &volume.volume_id).await;
    assert_eq!(share["share"]["availability_zone"], "zone-b");
    env.delete(&volume.volume_id).await.unwrap();
    env.assert_no_leftovers();
}

fn zone_segment(zone: &str) -> v1::Topology {
    v1::Topology {
        segments: [(
            "topology.manila.csi.openstack.org/zone".to_string(),
            zone.to_string(),
        )]
        .into(),
    }
}

fn accessible_zones(volume: &v1::Volume) -> Vec<std::collections::BTreeMap<String, String>> {
    volume
        .accessible_topology
        .iter()
        .map(|t| t.segments.clone().into_iter().collect())
        .collect()
}

/// With topology, a share placed in a Manila zone (`availability: nova`) is accessible from
/// the compute zones the request prefers, as given: the Manila zone is not a compute zone
/// and never appears as one (it was reported as `zone: nova` before).
#[tokio::test]
async fn accessible_topology_is_the_preferred_topology_not_the_manila_zone() {
    let mut config = CloudConfig::default();
    config.manila.availability_zones = vec!["nova".into(), "zone-b".into()];
    let mut env = ControllerEnv::with_cloud(config, &["--with-topology"]).await;
    let mut request = create_request("pvc-pref", GIB, &env.secrets, &[("availability", "nova")]);
    request.accessibility_requirements = Some(v1::TopologyRequirement {
        requisite: vec![
            zone_segment("compute-1"),
            zone_segment("compute-2"),
            zone_segment("compute-3"),
        ],
        preferred: vec![zone_segment("compute-2"), zone_segment("compute-1")],
    });
    let volume = env
        .client
        .create_volume(request)
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    let key = "topology.manila.csi.openstack.org/zone";
    assert_eq!(
        accessible_zones(&volume),
        vec![
            [(key.to_string(), "compute-2".to_string())].into(),
            [(key.to_string(), "compute-1".to_string())].into(),
        ]
    );
    let share = share_json(&env, &volume.volume_id).await;
    assert_eq!(share["share"]["availability_zone"], "nova");
    env.delete(&volume.volume_id).await.unwrap();

    // No accessibility requirements (Immediate binding): no accessible topology, even though
    // the share has a Manila zone.
    let volume = env
        .client
        .create_volume(create_request("pvc-none", GIB, &env.secrets, &[]))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    assert!(volume.accessible_topology.is_empty(), "{volume:?}");
    let share = share_json(&env, &volume.volume_id).await;
    assert!(share["share"]["availability_zone"].is_string(), "{share}");
    env.delete(&volume.volume_id).await.unwrap();
    env.assert_no_leftovers();
}

/// `autoTopology` only applies without `availability` (as upstream): with both, the share
/// goes to `availability` and the volume is accessible from the preferred topology. Before,
/// the zone came from the topology and `availability` was ignored.
#[tokio::test]
async fn availability_wins_over_auto_topology() {
    let mut config = CloudConfig::default();
    config.manila.availability_zones = vec!["nova".into(), "zone-b".into()];
    let mut env = ControllerEnv::with_cloud(config, &["--with-topology"]).await;
    let mut request = create_request(
        "pvc-both",
        GIB,
        &env.secrets,
        &[("autoTopology", "true"), ("availability", "nova")],
    );
    request.accessibility_requirements = Some(v1::TopologyRequirement {
        requisite: vec![],
        preferred: vec![zone_segment("zone-b")],
    });
    let volume = env
        .client
        .create_volume(request)
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    let share = share_json(&env, &volume.volume_id).await;
    assert_eq!(share["share"]["availability_zone"], "nova");
    assert_eq!(
        accessible_zones(&volume),
        vec![
            [(
                "topology.manila.csi.openstack.org/zone".to_string(),
                "zone-b".to_string()
            )]
            .into()
        ]
    );
    env.delete(&volume.volume_id).await.unwrap();
    env.assert_no_leftovers();
}

/// Without `--with-topology` no accessible topology is reported, whatever the request says.
#[tokio::test]
async fn no_accessible_topology_without_the_flag() {
    let mut env = ControllerEnv::start(&[]).await;
    let mut request = create_request("pvc-flat", GIB, &env.secrets, &[("autoTopology", "true")]);
    request.accessibility_requirements = Some(v1::TopologyRequirement {
        requisite: vec![],
        preferred: vec![zone_segment("zone-b")],
    });
    let volume = env
        .client
        .create_volume(request)
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    assert!(volume.accessible_topology.is_empty(), "{volume:?}");
    env.delete(&volume.volume_id).await.unwrap();
    env.assert_no_leftovers();
}

fn restore_request(
    name: &str,
    snapshot_id: &str,
    secrets: &std::collections::HashMap<String, String>,
) -> v1::CreateVolumeRequest {
    let mut restore = create_request(name, GIB, secrets, &[]);
    restore.volume_content_source = Some(v1::VolumeContentSource {
        r#type: Some(volume_content_source::Type::Snapshot(
            volume_content_source::SnapshotSource {
                snapshot_id: snapshot_id.into(),
            },
        )),
    });
    restore
}

fn snapshot_request(
    name: &str,
    volume_id: &str,
    secrets: &std::collections::HashMap<String, String>,
) -> v1::CreateSnapshotRequest {
    v1::CreateSnapshotRequest {
        source_volume_id: volume_id.into(),
        name: name.into(),
        secrets: secrets.clone(),
        parameters: Default::default(),
    }
}

/// Snapshot and restore support are the share's own fields (`snapshot_support`,
/// `create_share_from_snapshot_support` on the share): the driver needs no share type for
/// them, so a member whom the cloud's policy does not let read share types snapshots and
/// restores as Manila lets them (the driver used to look the type up and failed with 403).
#[tokio::test]
async fn snapshot_support_is_read_from_the_share_not_its_type() {
    let mut env = ControllerEnv::start(&[]).await;
    let volume = env.create("pvc-src", GIB).await.unwrap();
    env.cloud.set_types_forbidden(true);
    let snapshot = snapshot_until_ready(
        &mut env.client,
        snapshot_request("snap-own", &volume.volume_id, &env.secrets),
    )
    .await
    .unwrap();
    assert!(snapshot.ready_to_use, "{snapshot:?}");
    let restored = env
        .client
        .create_volume(restore_request(
            "pvc-restored",
            &snapshot.snapshot_id,
            &env.secrets,
        ))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    env.cloud.set_types_forbidden(false);
    env.delete(&restored.volume_id).await.unwrap();
    env.client
        .delete_snapshot(v1::DeleteSnapshotRequest {
            snapshot_id: snapshot.snapshot_id,
            secrets: env.secrets.clone(),
        })
        .await
        .unwrap();
    env.delete(&volume.volume_id).await.unwrap();
    env.assert_no_leftovers();
}

/// A share of another protocol than the driver's selector is neither snapshotted nor
/// restored by it: InvalidArgument naming the mismatch, nothing created (the NFS driver used
/// to snapshot a CephFS share).
#[tokio::test]
async fn snapshots_of_shares_of_another_protocol_are_refused() {
    let mut env = ControllerEnv::start(&[]).await;
    let cephfs = support::RunningDriver::start(
        env.dir.path(),
        "cephfs",
        &[
            "--share-protocol-selector=CEPHFS",
            "--provide-node-service=false",
            "--share-wait-timeout=3s",
        ],
    )
    .await
    .unwrap();
    let mut ceph = cephfs.controller().await;
    let volume = ceph
        .create_volume(create_request("pvc-ceph", GIB, &env.secrets, &[]))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    let error = env
        .client
        .create_snapshot(snapshot_request(
            "snap-nfs",
            &volume.volume_id,
            &env.secrets,
        ))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::InvalidArgument, "{error:?}");
    assert!(
        error.message().contains("protocol mismatch") && error.message().contains("CEPHFS"),
        "{}",
        error.message()
    );
    assert!(env.cloud.leftovers().snapshots.is_empty());

    let snapshot = snapshot_until_ready(
        &mut ceph,
        snapshot_request("snap-ceph", &volume.volume_id, &env.secrets),
    )
    .await
    .unwrap();
    let error = env
        .client
        .create_volume(restore_request(
            "pvc-nfs-from-ceph",
            &snapshot.snapshot_id,
            &env.secrets,
        ))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::InvalidArgument, "{error:?}");
    assert!(
        error.message().contains("protocol mismatch")
            && error.message().contains(&snapshot.snapshot_id),
        "{}",
        error.message()
    );
    assert_eq!(env.cloud.leftovers().shares.len(), 1);

    ceph.delete_snapshot(v1::DeleteSnapshotRequest {
        snapshot_id: snapshot.snapshot_id,
        secrets: env.secrets.clone(),
    })
    .await
    .unwrap();
    ceph.delete_volume(v1::DeleteVolumeRequest {
        volume_id: volume.volume_id,
        secrets: env.secrets.clone(),
    })
    .await
    .unwrap();
    cephfs.stop().await;
    env.assert_no_leftovers();
}

/// ValidateVolumeCapabilities looks at the share as upstream does: only an `available` share
/// is confirmed; one still creating is Unavailable, one in `error` or `deleting`
/// FailedPrecondition naming the status; a share of another protocol than the selector is
/// not confirmed, with a message (the driver used to confirm all of these).
#[tokio::test]
async fn validate_volume_capabilities_checks_the_shares_status_and_protocol() {
    use fakes::{FaultAction, FaultRule, Operation, Times};
    use manila_csi_plugin::openstack::Connector;
    use manila_csi_plugin::openstack::manila::NewShare;

    let mut env = ControllerEnv::start(&[]).await;
    // Shares made straight through the Manila client: available at once, so the checks
    // below see the protocol and the error, not a share still being created.
    env.cloud.set_delays(fakes::Delays::none());
    let client = Connector::new("validate-test".into())
        .connect(&env.secrets)
        .await
        .unwrap();
    let new_share = |name: &str, protocol: &str| NewShare {
        name: name.into(),
        size: 1,
        protocol: protocol.into(),
        share_type: "default".into(),
        ..NewShare::default()
    };
    let secrets = env.secrets.clone();
    let validate = |volume_id: &str| v1::ValidateVolumeCapabilitiesRequest {
        volume_id: volume_id.into(),
        volume_capabilities: vec![mount_capability(Mode::MultiNodeMultiWriter)],
        secrets: secrets.clone(),
        ..Default::default()
    };

    // A share of another protocol: not confirmed, the message names both.
    let ceph = client
        .create_share(&new_share("ceph-share", "CEPHFS"))
        .await
        .unwrap();
    let answer = env
        .client
        .validate_volume_capabilities(validate(&ceph.id))
        .await
        .unwrap()
        .into_inner();
    assert!(answer.confirmed.is_none(), "{answer:?}");
    assert!(
        answer.message.contains("protocol mismatch")
            && answer.message.contains("CEPHFS")
            && answer.message.contains("NFS"),
        "{answer:?}"
    );

    // A share that ended in `error`: FailedPrecondition naming the status.
    env.cloud
        .add_fault(
            FaultRule::new(
                Operation::ShareCreate,
                FaultAction::Error {
                    detail_id: "002".into(),
                    message: None,
                },
            )
            .for_resource("broken")
            .times(Times::Count(1)),
        )
        .unwrap();
    let broken = client
        .create_share(&new_share("broken", "NFS"))
        .await
        .unwrap();
    let error = env
        .client
        .validate_volume_capabilities(validate(&broken.id))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::FailedPrecondition, "{error:?}");
    assert!(error.message().contains("status error"), "{error:?}");

    // A share being deleted: FailedPrecondition too.
    let volume = env.create("pvc-going", GIB).await.unwrap();
    env.cloud
        .add_fault(
            FaultRule::new(Operation::ShareDelete, FaultAction::Stuck { status: None })
                .for_resource(volume.volume_id.clone()),
        )
        .unwrap();
    assert!(client.delete_share(&volume.volume_id).await.unwrap());
    let error = env
        .client
        .validate_volume_capabilities(validate(&volume.volume_id))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::FailedPrecondition, "{error:?}");
    assert!(error.message().contains("status deleting"), "{error:?}");

    // A share still creating: Unavailable (the CO may ask again).
    env.cloud
        .add_fault(
            FaultRule::new(Operation::ShareCreate, FaultAction::Stuck { status: None })
                .for_resource("slow"),
        )
        .unwrap();
    let slow = client
        .create_share(&new_share("slow", "NFS"))
        .await
        .unwrap();
    let error = env
        .client
        .validate_volume_capabilities(validate(&slow.id))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::Unavailable, "{error:?}");
    assert!(error.message().contains("creating"), "{error:?}");

    // What can be deleted is; the stuck shares never finish by design: the seed again.
    env.delete(&ceph.id).await.unwrap();
    env.delete(&broken.id).await.unwrap();
    env.cloud.reset().unwrap();
    env.assert_no_leftovers();
}
