//! Credentials beyond the password: a trustee through a trust, an existing token
//! (`os-token`), and a catalog with several regions where `os-region` and `os-endpointType`
//! pick the Manila endpoint.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;

use csi_proto::v1;
use fakes::config::{CatalogSeed, EndpointUrl};
use fakes::{CloudConfig, SecretKind};
use support::{ControllerEnv, GIB, create_request};
use tonic::Code;

/// Creates a share with `secrets`, checks it is in the cloud, deletes it.
async fn provision_and_delete(
    env: &mut ControllerEnv,
    name: &str,
    secrets: &HashMap<String, String>,
) {
    let volume = env
        .client
        .create_volume(create_request(name, GIB, secrets, &[]))
        .await
        .unwrap_or_else(|e| panic!("CreateVolume {name}: {e:?}"))
        .into_inner()
        .volume
        .unwrap();
    assert!(
        !env.cloud.leftovers().is_empty(),
        "the share of {name} is not in the cloud"
    );
    env.client
        .delete_volume(v1::DeleteVolumeRequest {
            volume_id: volume.volume_id,
            secrets: secrets.clone(),
        })
        .await
        .unwrap();
    env.assert_no_leftovers();
}

#[tokio::test]
async fn a_trustee_provisions_through_the_trust() {
    let mut env = ControllerEnv::start(&[]).await;
    let secrets: HashMap<String, String> =
        env.cloud.secret(SecretKind::Trustee).into_iter().collect();
    assert!(secrets.contains_key("os-trusteeID") && !secrets.contains_key("os-password"));
    provision_and_delete(&mut env, "pvc-trustee", &secrets).await;
    // The trustee's password is what Keystone checks.
    let mut wrong = secrets.clone();
    wrong.insert("os-trusteePassword".into(), "not-the-password".into());
    let error = env
        .client
        .create_volume(create_request("pvc-trustee-wrong", GIB, &wrong, &[]))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::Unauthenticated, "{error:?}");
    assert!(!error.message().contains("not-the-password"), "{error:?}");
    // A trustee key without its partner is refused before any request, naming the key.
    wrong.remove("os-trusteePassword");
    let error = env
        .client
        .create_volume(create_request("pvc-trustee-half", GIB, &wrong, &[]))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::InvalidArgument);
    assert!(
        error
            .message()
            .contains("os-trusteePassword is required with os-trusteeID"),
        "{error:?}"
    );
    env.assert_no_leftovers();
}

#[tokio::test]
async fn an_os_token_provisions() {
    let mut env = ControllerEnv::start(&[]).await;
    let password = env.secrets.clone();
    let response = reqwest::Client::new()
        .post(format!("{}/auth/tokens", env.cloud.auth_url()))
        .json(&serde_json::json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": password["os-userName"], "domain": {"name": password["os-domainName"]},
                "password": password["os-password"]}}},
            "scope": {"project": {"name": password["os-projectName"],
                "domain": {"name": password["os-domainName"]}}},
        }}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let token = response.headers()["x-subject-token"]
        .to_str()
        .unwrap()
        .to_owned();
    let secrets: HashMap<String, String> = [
        ("os-authURL", env.cloud.auth_url()),
        ("os-region", password["os-region"].clone()),
        ("os-token", token),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    provision_and_delete(&mut env, "pvc-token", &secrets).await;
    // A token Keystone does not know gets nowhere.
    let mut wrong = secrets.clone();
    wrong.insert("os-token".into(), "gAAAAnot-a-token".into());
    let error = env
        .client
        .create_volume(create_request("pvc-token-wrong", GIB, &wrong, &[]))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::Unauthenticated, "{error:?}");
    env.assert_no_leftovers();
}

/// Nothing listens there: a client that picks this endpoint fails.
const DEAD: &str = "http://127.0.0.1:1/share/v2";

/// Two regions; only RegionTwo's `internal` Manila endpoint is the real one.
fn two_regions() -> CloudConfig {
    let dead = |region: &str, interface: &str| EndpointUrl {
        region: region.into(),
        interface: interface.into(),
        url: DEAD.into(),
    };
    CloudConfig {
        catalog: CatalogSeed {
            extra_regions: vec!["RegionTwo".into()],
            manila_endpoints: vec![
                dead("RegionOne", "public"),
                dead("RegionOne", "internal"),
                dead("RegionOne", "admin"),
                dead("RegionTwo", "public"),
                dead("RegionTwo", "admin"),
            ],
        },
        ..CloudConfig::default()
    }
}

#[tokio::test]
async fn os_region_and_os_endpoint_type_pick_the_second_regions_endpoint() {
    let mut env = ControllerEnv::with_cloud(two_regions(), &[]).await;
    let mut secrets = env.secrets.clone();
    secrets.insert("os-region".into(), "RegionTwo".into());
    secrets.insert("os-endpointType".into(), "internalURL".into());
    provision_and_delete(&mut env, "pvc-region-two", &secrets).await;

    // The first region's endpoint is the dead one: the error names where it went.
    let mut first = env.secrets.clone();
    first.insert("os-endpointType".into(), "internal".into());
    let error = env
        .client
        .create_volume(create_request("pvc-region-one", GIB, &first, &[]))
        .await
        .unwrap_err();
    assert!(error.message().contains("127.0.0.1:1"), "{error:?}");

    // A region the catalog does not have: named, with the ones it has.
    let mut unknown = env.secrets.clone();
    unknown.insert("os-region".into(), "RegionNine".into());
    let error = env
        .client
        .create_volume(create_request("pvc-region-nine", GIB, &unknown, &[]))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::FailedPrecondition, "{error:?}");
    assert!(
        error.message().contains("\"RegionNine\"")
            && error.message().contains("RegionOne, RegionTwo"),
        "{error:?}"
    );
    env.assert_no_leftovers();
}
