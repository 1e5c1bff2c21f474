//! The fixtures' RBAC is least privilege: the controller plugin's service account (every
//! sidecar of the controller pod), the node plugin's and the snapshot controller's may make
//! the calls their code makes, and the API server refuses them what they do not need (no
//! Secret listed or watched, no Event read or changed, no object updated where a patch does,
//! no pod read, no Lease of another namespace). Asked of the embedded cluster's real RBAC
//! authorizer with SubjectAccessReviews.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use suites::e2e::{EnvironmentOptions, ManilaCsiEnvironment};

const CONTROLLER: &str = "openstack-manila-csi-controllerplugin";
const NODE_PLUGIN: &str = "openstack-manila-csi-nodeplugin";
const SNAPSHOT_CONTROLLER: &str = "snapshot-controller";

/// `verb group/resource[/subresource]` in `namespace` ("" for cluster-wide).
struct Call {
    verb: &'static str,
    group: &'static str,
    resource: &'static str,
    namespace: &'static str,
}

/// `"verb group/resource"`, `"verb resource"` (core group), optionally `" in <ns>"` (`@` for
/// the driver's namespace).
fn call(text: &'static str) -> Call {
    let (text, namespace) = match text.split_once(" in ") {
        Some((text, namespace)) => (text, namespace),
        None => (text, ""),
    };
    let (verb, target) = text.split_once(' ').unwrap();
    let (group, resource) = match target.split_once('/') {
        Some((group, resource)) if group.contains('.') => (group, resource),
        _ => ("", target),
    };
    Call {
        verb,
        group,
        resource,
        namespace,
    }
}

/// Whether the service account `account` of `namespace` may make `call`.
async fn allowed(client: &kube::Client, namespace: &str, account: &str, call: &Call) -> bool {
    let (resource, subresource) = match call.resource.split_once('/') {
        Some((resource, subresource)) => (resource, Some(subresource.to_string())),
        None => (call.resource, None),
    };
    let target_namespace = match call.namespace {
        "@" => namespace,
        other => other,
    };
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!("system:serviceaccount:{namespace}:{account}")),
            groups: Some(vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".into(),
            ]),
            resource_attributes: Some(ResourceAttributes {
                namespace: (!target_namespace.is_empty()).then(|| target_namespace.to_string()),
                verb: Some(call.verb.into()),
                group: Some(call.group.into()),
                resource: Some(resource.into()),
                subresource,
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let api: Api<SubjectAccessReview> = Api::all(client.clone());
    let answer = api.create(&PostParams::default(), &review).await.unwrap();
    answer.status.map(|s| s.allowed).unwrap_or(false)
}

/// The calls of `calls` whose answer is not `want`, as text.
async fn wrong(
    client: &kube::Client,
    namespace: &str,
    account: &str,
    calls: &[&'static str],
    want: bool,
) -> Vec<&'static str> {
    let mut wrong = Vec::new();
    for text in calls {
        if allowed(client, namespace, account, &call(text)).await != want {
            wrong.push(*text);
        }
    }
    wrong
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_service_account_may_make_its_calls_and_nothing_more() {
    testkit::init_tracing(
        "suites=info,cluster=info,node_agent=info,control_plane=info,pod_runtime=info",
    );
    let env = ManilaCsiEnvironment::start(EnvironmentOptions {
        nodes: 1,
        ..Default::default()
    })
    .await
    .expect("the driver deploys");
    let client = env.client();
    let namespace = env.namespace().to_string();

    // The controller pod's sidecars: provisioner, attacher, resizer, snapshotter, leader
    // election.
    let needed = [
        "watch persistentvolumes",
        "create persistentvolumes",
        "patch persistentvolumes",
        "delete persistentvolumes",
        "watch persistentvolumeclaims",
        "get persistentvolumeclaims in default",
        "patch persistentvolumeclaims/status in default",
        "get storage.k8s.io/storageclasses",
        "list storage.k8s.io/csinodes",
        "get nodes",
        "get secrets in default",
        "get secrets in @",
        "create events in default",
        "watch storage.k8s.io/volumeattachments",
        "patch storage.k8s.io/volumeattachments/status",
        "get snapshot.storage.k8s.io/volumesnapshots in default",
        "get snapshot.storage.k8s.io/volumesnapshotclasses",
        "watch snapshot.storage.k8s.io/volumesnapshotcontents",
        "patch snapshot.storage.k8s.io/volumesnapshotcontents/status",
        "get coordination.k8s.io/leases in @",
        "create coordination.k8s.io/leases in @",
        "patch coordination.k8s.io/leases in @",
    ];
    let refused = [
        "list secrets",
        "list secrets in @",
        "watch secrets in default",
        "create secrets in default",
        "update persistentvolumes",
        "update persistentvolumeclaims in default",
        "patch persistentvolumeclaims in default",
        "delete persistentvolumeclaims in default",
        "get pods in default",
        "list pods",
        "create pods in default",
        "list events",
        "watch events in default",
        "patch events in default",
        "delete events in default",
        "patch nodes",
        "update storage.k8s.io/volumeattachments",
        "create storage.k8s.io/volumeattachments",
        "create snapshot.storage.k8s.io/volumesnapshots in default",
        "create snapshot.storage.k8s.io/volumesnapshotcontents",
        "delete snapshot.storage.k8s.io/volumesnapshotcontents",
        "update snapshot.storage.k8s.io/volumesnapshotcontents",
        "list coordination.k8s.io/leases in @",
        "delete coordination.k8s.io/leases in @",
        "get coordination.k8s.io/leases in default",
        "create storage.k8s.io/storageclasses",
    ];
    let denied = wrong(&client, &namespace, CONTROLLER, &needed, true).await;
    assert!(
        denied.is_empty(),
        "the controller plugin may not: {denied:?}"
    );
    let granted = wrong(&client, &namespace, CONTROLLER, &refused, false).await;
    assert!(
        granted.is_empty(),
        "the controller plugin may, without needing it: {granted:?}"
    );

    // The node plugins call no API at all.
    let granted = wrong(
        &client,
        &namespace,
        NODE_PLUGIN,
        &[
            "get secrets in @",
            "get nodes",
            "create events in default",
            "get persistentvolumes",
            "get coordination.k8s.io/leases in @",
        ],
        false,
    )
    .await;
    assert!(granted.is_empty(), "the node plugin may: {granted:?}");

    // The snapshot controller.
    let denied = wrong(
        &client,
        &namespace,
        SNAPSHOT_CONTROLLER,
        &[
            "create snapshot.storage.k8s.io/volumesnapshotcontents",
            "delete snapshot.storage.k8s.io/volumesnapshotcontents",
            "patch snapshot.storage.k8s.io/volumesnapshots/status in default",
            "list snapshot.storage.k8s.io/volumesnapshotclasses",
            "patch persistentvolumeclaims in default",
            "get persistentvolumes",
            "create events in default",
            "patch coordination.k8s.io/leases in @",
        ],
        true,
    )
    .await;
    assert!(
        denied.is_empty(),
        "the snapshot controller may not: {denied:?}"
    );
    let granted = wrong(
        &client,
        &namespace,
        SNAPSHOT_CONTROLLER,
        &[
            "get secrets in default",
            "update snapshot.storage.k8s.io/volumesnapshotcontents",
            "update persistentvolumeclaims in default",
            "list persistentvolumes",
            "get storage.k8s.io/storageclasses",
            "list events",
            "patch snapshot.storage.k8s.io/volumesnapshotcontents/status",
            "delete coordination.k8s.io/leases in @",
        ],
        false,
    )
    .await;
    assert!(
        granted.is_empty(),
        "the snapshot controller may, without needing it: {granted:?}"
    );
    env.teardown().await.unwrap();
}
