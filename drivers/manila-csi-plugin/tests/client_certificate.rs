//! `os-clientCertPath`/`os-clientKeyPath`: the driver presents the certificate in the TLS
//! handshake. The fake cloud sits behind a front that requires a client certificate; its
//! catalog lists Manila on that front too, so every call goes through it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;

use csi_proto::v1;
use fakes::CloudConfig;
use fakes::config::{CatalogSeed, EndpointUrl};
use fakes::tls::MutualTlsFront;
use support::{ControllerEnv, GIB, create_request};
use tonic::Code;

#[tokio::test]
async fn the_client_certificate_is_presented_to_keystone_and_manila() {
    let mut front = MutualTlsFront::bind().unwrap();
    let config = CloudConfig {
        catalog: CatalogSeed {
            extra_regions: Vec::new(),
            manila_endpoints: vec![EndpointUrl {
                region: "RegionOne".into(),
                interface: "public".into(),
                url: format!("{}/share/v2", front.url()),
            }],
        },
        ..CloudConfig::default()
    };
    let mut env = ControllerEnv::with_cloud(config, &[]).await;
    front.serve(env.cloud.address()).unwrap();
    let cert = env.dir.path().join("client.pem");
    let key = env.dir.path().join("client-key.pem");
    std::fs::write(&cert, &front.client_certificate().cert_pem).unwrap();
    std::fs::write(&key, &front.client_certificate().key_pem).unwrap();

    let mut secrets: HashMap<String, String> = env.secrets.clone();
    secrets.insert("os-authURL".into(), format!("{}/identity/v3", front.url()));
    secrets.insert("os-certAuthority".into(), front.ca_pem().to_owned());
    let without_cert = secrets.clone();
    secrets.insert("os-clientCertPath".into(), cert.display().to_string());
    secrets.insert("os-clientKeyPath".into(), key.display().to_string());

    let volume = env
        .client
        .create_volume(create_request("pvc-client-cert", GIB, &secrets, &[]))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    let presented = front.presented();
    assert!(!presented.is_empty());
    assert!(
        presented
            .iter()
            .all(|der| der == &front.client_certificate().der)
    );
    env.client
        .delete_volume(v1::DeleteVolumeRequest {
            volume_id: volume.volume_id,
            secrets: secrets.clone(),
        })
        .await
        .unwrap();
    env.assert_no_leftovers();

    // Without the certificate the front refuses the handshake.
    let seen = front.presented().len();
    let error = env
        .client
        .create_volume(create_request("pvc-no-cert", GIB, &without_cert, &[]))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::Unavailable, "{error:?}");
    assert_eq!(front.presented().len(), seen);

    // A key file that is not a key is named (another path: clients are cached by
    // credentials, the files read once).
    let bad_key = env.dir.path().join("bad-key.pem");
    std::fs::write(&bad_key, "not a key").unwrap();
    secrets.insert("os-clientKeyPath".into(), bad_key.display().to_string());
    let error = env
        .client
        .create_volume(create_request("pvc-bad-key", GIB, &secrets, &[]))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::InvalidArgument, "{error:?}");
    assert!(error.message().contains("os-clientKeyPath"), "{error:?}");
    env.assert_no_leftovers();
}
