//! The mutual-TLS front: a client with the certificate reaches the cloud behind it and the
//! front records the certificate; a client without one is refused in the handshake.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use fakes::tls::MutualTlsFront;
use fakes::{CloudConfig, FakeCloud};

fn client(front: &MutualTlsFront, with_cert: bool) -> reqwest::Client {
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .add_root_certificate(reqwest::Certificate::from_pem(front.ca_pem().as_bytes()).unwrap());
    if with_cert {
        let cert = front.client_certificate();
        let pem = format!("{}{}", cert.cert_pem, cert.key_pem);
        builder = builder.identity(reqwest::Identity::from_pem(pem.as_bytes()).unwrap());
    }
    builder.build().unwrap()
}

#[tokio::test]
async fn a_client_certificate_is_required_and_recorded() {
    let cloud = FakeCloud::start(CloudConfig::default()).await.unwrap();
    let mut front = MutualTlsFront::bind().unwrap();
    front.serve(cloud.address()).unwrap();
    let url = format!("{}/identity/v3", front.url());

    let error = client(&front, false).get(&url).send().await.unwrap_err();
    assert!(error.is_connect() || error.is_request(), "{error:?}");
    assert!(front.presented().is_empty());

    let response = client(&front, true).get(&url).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        front.presented(),
        vec![front.client_certificate().der.clone()]
    );
    let printed = format!("{:?}", front.client_certificate());
    assert!(!printed.contains("PRIVATE KEY"), "{printed}");
}
