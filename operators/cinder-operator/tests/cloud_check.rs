//! The cloud check against the fake cloud over TLS: the ConfigMap's CA verifies it, a wrong
//! or missing CA is a TLS error naming the certificate problem and the ConfigMap key, rejected
//! credentials name the Secret, and the zones decide topology.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use cinder_operator::OperatorConfig;
use cinder_operator::cloud::{CloudError, check};
use cinder_operator::cloud_conf::Sources;
use fakes::{CloudConfig, FakeCloud, ServerSeed};

const WRONG_CA: &str = include_str!("data/test-ca.pem");

async fn tls_cloud(volume_zones: &[&str], server_zones: &[&str]) -> FakeCloud {
    let mut config = CloudConfig::default();
    config.cinder.present = true;
    config.cinder.availability_zones = volume_zones.iter().map(|z| (*z).to_owned()).collect();
    let fake = FakeCloud::builder(config).tls(true).start().await.unwrap();
    for (i, zone) in server_zones.iter().enumerate() {
        fake.add_server(&ServerSeed {
            name: format!("node-{i}"),
            availability_zone: (*zone).to_owned(),
            id: None,
            disk_dir: None,
        })
        .unwrap();
    }
    fake
}

fn sources() -> Sources {
    Sources::from(&OperatorConfig::new("ns"))
}

#[tokio::test]
async fn the_config_maps_ca_verifies_the_cloud_and_matching_zones_turn_topology_on() {
    let fake = tls_cloud(&["zone-a", "zone-b"], &["zone-a", "zone-b"]).await;
    let decision = check(
        &fake.clouds_yaml("openstack"),
        fake.ca_pem().as_deref(),
        &sources(),
    )
    .await
    .unwrap();
    assert!(decision.enabled, "{decision:?}");
    assert_eq!(decision.reason, "ZonesMatch");
}

#[tokio::test]
async fn a_compute_zone_without_volumes_turns_topology_off() {
    let fake = tls_cloud(&["nova"], &["zone-a"]).await;
    let decision = check(
        &fake.clouds_yaml("openstack"),
        fake.ca_pem().as_deref(),
        &sources(),
    )
    .await
    .unwrap();
    assert!(!decision.enabled);
    assert_eq!(decision.reason, "ZonesDiffer");
    assert!(decision.message.contains("zone-a"), "{}", decision.message);
}

#[tokio::test]
async fn a_wrong_or_missing_ca_names_the_certificate_problem_and_the_config_map_key() {
    let fake = tls_cloud(&["nova"], &["nova"]).await;
    // clouds.yaml names the fake's CA file as cacert: it is ignored, only the ConfigMap counts.
    for ca in [Some(WRONG_CA), None] {
        let err = check(&fake.clouds_yaml("openstack"), ca, &sources())
            .await
            .unwrap_err();
        assert!(matches!(err, CloudError::Tls { .. }), "{err:?}");
        let text = err.to_string();
        assert!(text.starts_with("TLS to Keystone at https://"), "{text}");
        assert!(text.contains("certificate"), "{text}");
        assert!(
            text.contains(
                "check the CA bundle (ConfigMap ns/cloud-provider-config key ca-bundle.pem)"
            ),
            "{text}"
        );
    }
}

#[tokio::test]
async fn rejected_credentials_name_the_secret() {
    let fake = tls_cloud(&["nova"], &["nova"]).await;
    let clouds = fake
        .clouds_yaml("openstack")
        .replace(fake.account().password.expose(), "not-the-password");
    let err = check(&clouds, fake.ca_pem().as_deref(), &sources())
        .await
        .unwrap_err();
    assert!(matches!(err, CloudError::Rejected { .. }), "{err:?}");
    assert!(
        err.to_string().starts_with(
            "the credentials of Secret ns/cloud-credentials key clouds.yaml were rejected"
        ),
        "{err}"
    );
    assert!(!err.to_string().contains("not-the-password"), "{err}");
}
