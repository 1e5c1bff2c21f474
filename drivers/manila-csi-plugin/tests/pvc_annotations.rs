//! `--pvc-annotations`: the controller reads the claim named by the request's
//! extra-create-metadata from the Kubernetes API (`--kubeconfig`; here a fake API server)
//! and turns its affinity annotations into Manila scheduler hints (microversion 2.65).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::{Value, json};
use support::{ControllerEnv, GIB, create_request};
use tonic::Code;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A fake API server answering for claims `ns1/<name>` with `annotations`.
async fn api_server(claims: &[(&str, Value)]) -> MockServer {
    let server = MockServer::start().await;
    for (name, annotations) in claims {
        Mock::given(method("GET"))
            .and(path(format!(
                "/api/v1/namespaces/ns1/persistentvolumeclaims/{name}"
            )))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": name, "namespace": "ns1", "annotations": annotations},
                "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
            })))
            .mount(&server)
            .await;
    }
    server
}

fn kubeconfig(dir: &std::path::Path, server: &MockServer) -> std::path::PathBuf {
    let file = dir.join("kubeconfig");
    std::fs::write(
        &file,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n\
             users:\n- name: u\n  user:\n    token: not-a-secret\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n\
             current-context: x\n",
            server.uri()
        ),
    )
    .unwrap();
    file
}

async fn share_metadata(env: &ControllerEnv, id: &str) -> Value {
    let http = reqwest::Client::new();
    let account = env.cloud.account();
    let auth = json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {
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
    let share: Value = http
        .get(format!("{}/shares/{id}", env.cloud.manila_url()))
        .header("X-Auth-Token", token)
        .header("X-OpenStack-Manila-API-Version", "2.65")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    share["share"]["metadata"].clone()
}

fn claim_params(claim: &str) -> [(&str, &str); 2] {
    [
        ("csi.storage.k8s.io/pvc/name", claim),
        ("csi.storage.k8s.io/pvc/namespace", "ns1"),
    ]
}

#[tokio::test]
async fn claim_annotations_become_scheduler_hints() {
    let dir = tempfile::tempdir().unwrap();
    let mut env = ControllerEnv::start(&[]).await;
    let anchor = env.create("pvc-anchor", GIB).await.unwrap();
    let other = env.create("pvc-other", GIB).await.unwrap();
    let server = api_server(&[
        (
            "near",
            json!({
                "manila.csi.openstack.org/affinity": "pvc-anchor",
                "manila.csi.openstack.org/anti-affinity": other.volume_id,
            }),
        ),
        ("plain", json!({"unrelated": "x"})),
        (
            "grouped",
            json!({"manila.csi.openstack.org/group-id": "0b4e28ba-2fa1-11ec-8d3d-0242ac130006"}),
        ),
        (
            "unknown",
            json!({"manila.csi.openstack.org/affinity": "no-such-share"}),
        ),
    ])
    .await;
    let kubeconfig = kubeconfig(dir.path(), &server);
    let flag = format!("--kubeconfig={}", kubeconfig.display());
    let annotated = support::RunningDriver::start(
        dir.path(),
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
    let mut client = annotated.controller().await;

    let near = client
        .create_volume(create_request(
            "pvc-near",
            GIB,
            &env.secrets,
            &claim_params("near"),
        ))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    let metadata = share_metadata(&env, &near.volume_id).await;
    assert_eq!(metadata["__affinity_same_host"], anchor.volume_id.as_str());
    assert_eq!(
        metadata["__affinity_different_host"],
        other.volume_id.as_str()
    );

    let plain = client
        .create_volume(create_request(
            "pvc-plain",
            GIB,
            &env.secrets,
            &claim_params("plain"),
        ))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    let metadata = share_metadata(&env, &plain.volume_id).await;
    assert!(metadata.get("__affinity_same_host").is_none(), "{metadata}");

    // A group Manila does not know is InvalidArgument naming the annotation; an unknown
    // share name is named; a claim the API server does not know is NotFound. Nothing is
    // created for any of them.
    let before = env.cloud.leftovers().shares.len();
    for (claim, code, text) in [
        ("grouped", Code::InvalidArgument, "group-id"),
        ("unknown", Code::InvalidArgument, "no-such-share"),
        ("absent", Code::NotFound, "ns1/absent"),
    ] {
        let error = client
            .create_volume(create_request(
                &format!("pvc-{claim}"),
                GIB,
                &env.secrets,
                &claim_params(claim),
            ))
            .await
            .unwrap_err();
        assert_eq!(error.code(), code, "{claim}: {error:?}");
        assert!(
            error.message().contains(text),
            "{claim}: {}",
            error.message()
        );
    }
    assert_eq!(env.cloud.leftovers().shares.len(), before);

    // Without the flag the claim is not read and no hint is sent.
    let requests_before = server.received_requests().await.unwrap().len();
    let flat = env
        .client
        .create_volume(create_request(
            "pvc-flat",
            GIB,
            &env.secrets,
            &claim_params("near"),
        ))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    assert_eq!(
        server.received_requests().await.unwrap().len(),
        requests_before
    );
    let metadata = share_metadata(&env, &flat.volume_id).await;
    assert!(metadata.get("__affinity_same_host").is_none(), "{metadata}");

    for volume in [near, plain, flat, anchor, other] {
        env.delete(&volume.volume_id).await.unwrap();
    }
    env.assert_no_leftovers();
}
