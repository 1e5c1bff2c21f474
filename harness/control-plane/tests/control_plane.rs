//! The embedded control plane against real binaries: what a cluster user sees (kubectl,
//! namespaces, service accounts, root CA publishing, TokenRequest, RBAC).
//!
//! One control plane is booted for all of it (each boot costs seconds).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use control_plane::ControlPlane;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::{Api, ListParams, ObjectMeta, PostParams};
use testkit::objects::{namespace, wait_token_secret};
use testkit::processes::kubectl;
use testkit::wait_for;

const NS: &str = "cp-test";
const SA: &str = "reader";

#[tokio::test]
async fn control_plane_behaves_as_a_real_cluster() {
    let cp = ControlPlane::builder()
        .start()
        .await
        .expect("control plane starts");
    eprintln!(
        "booted in {:?} ({:?})",
        cp.boot_timings().total,
        cp.boot_timings()
    );
    let client = cp.client();

    // kubectl works with the written kubeconfig.
    let out = kubectl(&cp, &["get", "ns", "-o", "name"]);
    assert!(
        out.contains("namespace/default") && out.contains("namespace/kube-system"),
        "kubectl get ns: {out}"
    );

    // A namespace and a service account.
    namespace(&client, NS).await;
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), NS);
    let sa = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(SA.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    sas.create(&PostParams::default(), &sa)
        .await
        .expect("create service account");

    // The controller-manager publishes the cluster CA into the namespace.
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let root_ca = wait_for(
        "kube-root-ca.crt in the namespace",
        Duration::from_secs(60),
        || async {
            match config_maps.get_opt("kube-root-ca.crt").await {
                Ok(Some(cm)) => Ok(cm.data.and_then(|d| d.get("ca.crt").cloned())),
                Ok(None) => Ok(None),
                Err(e) => Err(e.to_string()),
            }
        },
    )
    .await;
    let cluster_ca = std::fs::read_to_string(cp.ca_file()).unwrap();
    assert_eq!(
        root_ca.trim(),
        cluster_ca.trim(),
        "published ca.crt is the cluster CA"
    );

    // The token controller creates a legacy token secret for the account (1.20 behaviour),
    // signed with the controller-manager's service-account key.
    wait_token_secret(&client, NS, Duration::from_secs(60)).await;

    // TokenRequest issues a bound token.
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec![],
            expiration_seconds: Some(3600),
            ..Default::default()
        },
        ..Default::default()
    };
    let token = sas
        .create_token_request(SA, &PostParams::default(), &request)
        .await
        .expect("TokenRequest")
        .status
        .expect("TokenRequest status")
        .token;
    assert_eq!(token.split('.').count(), 3, "a JWT");

    // An in-cluster style client: the published ca.crt verifies the apiserver, the token
    // authenticates the service account.
    let dir = tempfile::Builder::new().prefix("cp-").tempdir().unwrap();
    let ca_path = dir.path().join("ca.crt");
    let token_path = dir.path().join("token");
    std::fs::write(&ca_path, &root_ca).unwrap();
    std::fs::write(&token_path, &token).unwrap();
    let mut config = kube::Config::new(cp.api_url().parse().unwrap());
    config.root_cert_file = Some(ca_path);
    config.auth_info.token_file = Some(token_path.display().to_string());
    let sa_client = kube::Client::try_from(config).unwrap();
    let sa_pods: Api<Pod> = Api::namespaced(sa_client.clone(), NS);
    let sa_secrets: Api<Secret> = Api::namespaced(sa_client.clone(), NS);

    // RBAC: nothing granted yet, so listing pods is refused (403, not a TLS or auth error).
    let denied = sa_pods
        .list(&ListParams::default())
        .await
        .expect_err("listing pods without a grant");
    assert!(
        is_forbidden(&denied),
        "expected 403 Forbidden, got {denied}"
    );

    // A Role granting pod reads, bound to the account.
    let roles: Api<Role> = Api::namespaced(client.clone(), NS);
    let role = Role {
        metadata: ObjectMeta {
            name: Some("pod-reader".into()),
            ..Default::default()
        },
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["pods".into()]),
            verbs: vec!["get".into(), "list".into()],
            ..Default::default()
        }]),
    };
    roles
        .create(&PostParams::default(), &role)
        .await
        .expect("create role");
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), NS);
    let binding = RoleBinding {
        metadata: ObjectMeta {
            name: Some("reader-reads-pods".into()),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: "pod-reader".into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: SA.into(),
            namespace: Some(NS.into()),
            ..Default::default()
        }]),
    };
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .expect("create role binding");

    // The grant reaches the authorizer's cache shortly after.
    wait_for(
        "the service account may list pods",
        Duration::from_secs(30),
        || async {
            match sa_pods.list(&ListParams::default()).await {
                Ok(_) => Ok(Some(())),
                Err(e) if is_forbidden(&e) => Ok(None),
                Err(e) => Err(e.to_string()),
            }
        },
    )
    .await;
    // ... and only that: secrets stay refused.
    let denied = sa_secrets
        .list(&ListParams::default())
        .await
        .expect_err("listing secrets is not granted");
    assert!(
        is_forbidden(&denied),
        "expected 403 Forbidden, got {denied}"
    );

    cp.shutdown().await.expect("shutdown");
}

fn is_forbidden(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(status) if status.code == 403)
}
