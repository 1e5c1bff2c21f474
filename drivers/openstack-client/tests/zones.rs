//! The compute and volume availability zones, read from the fake cloud: what the Cinder
//! operator compares to decide on topology.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use fakes::{CloudConfig, FakeCloud, FaultAction, FaultRule, Operation, ServerSeed};
use openstack_client::block_storage::AvailabilityZone;
use openstack_client::{BlockStorageCloud, Credentials};

async fn client(config: CloudConfig) -> (FakeCloud, BlockStorageCloud) {
    let fake = FakeCloud::start(config).await.unwrap();
    let credentials =
        Credentials::from_clouds_yaml_str(&fake.clouds_yaml("openstack"), "openstack", "test")
            .unwrap();
    let cloud =
        BlockStorageCloud::connect(credentials, "zones-test", Duration::from_secs(10)).unwrap();
    (fake, cloud)
}

fn names(zones: &[AvailabilityZone]) -> Vec<&str> {
    assert!(zones.iter().all(|z| z.available), "{zones:?}");
    zones.iter().map(|z| z.name.as_str()).collect()
}

#[tokio::test]
async fn compute_and_volume_zones_are_read_from_nova_and_cinder() {
    let mut config = CloudConfig::default();
    config.cinder.present = true;
    config.cinder.availability_zones = vec!["zone-a".into(), "zone-b".into()];
    config.nova.availability_zones = vec!["zone-c".into()];
    let (fake, cloud) = client(config).await;
    fake.add_server(&ServerSeed {
        name: "node-1".into(),
        availability_zone: "zone-a".into(),
        id: None,
        disk_dir: None,
    })
    .unwrap();
    let compute = cloud.compute_availability_zones().await.unwrap();
    assert_eq!(names(&compute), ["zone-a", "zone-c"]);
    let volume = cloud.volume_availability_zones().await.unwrap();
    assert_eq!(names(&volume), ["zone-a", "zone-b"]);
}

#[tokio::test]
async fn a_failing_zone_listing_is_an_error_naming_the_cloud_message() {
    let mut config = CloudConfig::default();
    config.cinder.present = true;
    let (fake, cloud) = client(config).await;
    fake.add_fault(FaultRule::new(
        Operation::ComputeAvailabilityZones,
        FaultAction::HttpError {
            status: 500,
            message: Some("compute zones unavailable".into()),
        },
    ))
    .unwrap();
    let err = cloud.compute_availability_zones().await.unwrap_err();
    assert!(
        err.to_string().contains("compute zones unavailable"),
        "{err}"
    );
    // Cinder's listing is another operation: unaffected.
    let volume = cloud.volume_availability_zones().await.unwrap();
    assert_eq!(names(&volume), ["nova"]);
}
