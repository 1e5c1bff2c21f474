//! The fake cloud over HTTPS: a client trusting its CA reaches Keystone and Manila and finds
//! https endpoints in the catalog; without the CA, or with another one, TLS fails; the CA
//! file goes with the cloud.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use fakes::{CloudConfig, FakeCloud, SecretKind};
use serde_json::{Value, json};

fn client(ca_pem: Option<&str>) -> reqwest::Client {
    let mut builder = reqwest::Client::builder().use_rustls_tls();
    if let Some(pem) = ca_pem {
        builder = builder
            .tls_built_in_root_certs(false)
            .add_root_certificate(reqwest::Certificate::from_pem(pem.as_bytes()).unwrap());
    }
    builder.build().unwrap()
}

fn auth_body(cloud: &FakeCloud) -> Value {
    let account = cloud.account();
    json!({"auth": {
        "identity": {"methods": ["password"], "password": {"user": {
            "name": account.user_name,
            "domain": {"name": account.domain_name},
            "password": account.password.expose(),
        }}},
        "scope": {"project": {"name": account.project_name, "domain": {"name": account.domain_name}}},
    }})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_trusting_the_ca_reaches_keystone_and_manila_over_https() {
    let cloud = FakeCloud::builder(CloudConfig::default())
        .tls(true)
        .start()
        .await
        .unwrap();
    let ca = cloud.ca_pem().expect("a TLS cloud has a CA");
    assert!(cloud.base_url().starts_with("https://127.0.0.1:"));
    assert!(cloud.auth_url().starts_with("https://"));
    assert!(cloud.manila_url().starts_with("https://"));

    let http = client(Some(&ca));
    let response = http
        .post(format!("{}/auth/tokens", cloud.auth_url()))
        .json(&auth_body(&cloud))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let token = response.headers()["X-Subject-Token"]
        .to_str()
        .unwrap()
        .to_string();
    let body: Value = response.json().await.unwrap();
    let urls: Vec<&str> = body["token"]["catalog"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|entry| entry["endpoints"].as_array().unwrap())
        .map(|endpoint| endpoint["url"].as_str().unwrap())
        .collect();
    assert!(!urls.is_empty());
    assert!(urls.iter().all(|u| u.starts_with("https://")), "{urls:?}");

    let types: Value = http
        .get(format!("{}/types", cloud.manila_url()))
        .header("X-Auth-Token", &token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(types["share_types"][0]["name"], "default", "{types}");

    // What clients are handed carries the CA.
    let clouds_yaml = cloud.clouds_yaml("fake");
    let ca_file = cloud.ca_file().unwrap();
    assert!(
        clouds_yaml.contains(&format!("cacert: {}", ca_file.display())),
        "{clouds_yaml}"
    );
    assert_eq!(std::fs::read_to_string(&ca_file).unwrap(), ca);
    assert_eq!(
        cloud.secret(SecretKind::Password).get("os-certAuthority"),
        Some(&ca)
    );

    drop(cloud);
    assert!(!ca_file.exists(), "the CA file goes with the cloud");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_ca_or_with_another_one_tls_fails() {
    let cloud = FakeCloud::builder(CloudConfig::default())
        .tls(true)
        .start()
        .await
        .unwrap();
    let url = format!("{}/auth/tokens", cloud.auth_url());
    for http in [
        client(None),
        client(Some(&fakes::tls::unrelated_ca_pem().unwrap())),
    ] {
        let error = http
            .post(&url)
            .json(&auth_body(&cloud))
            .send()
            .await
            .unwrap_err();
        let mut chain = error.to_string();
        let mut source = std::error::Error::source(&error);
        while let Some(inner) = source {
            chain.push_str(": ");
            chain.push_str(&inner.to_string());
            source = inner.source();
        }
        assert!(chain.contains("certificate"), "{chain}");
    }
    assert!(cloud.journal().is_empty(), "no request got through");
}
