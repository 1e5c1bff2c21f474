//! Controller behaviour against the fake cloud: accessible topology (`autoTopology`,
//! `availability`, `--with-topology`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use csi_proto::v1::{self};
use fakes::CloudConfig;
use support::{ControllerEnv, GIB, create_request, share_json};

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
