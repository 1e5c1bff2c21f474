//! The Manila CSI driver deployed from `fixtures/manila-csi/` on its own embedded cluster:
//! dynamic provisioning and deletion with the default StorageClass, and a StorageClass whose
//! share type the cloud does not have. One environment per test.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::fmt::Display;
use std::time::Duration;

use harness::cluster::wait;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, PostParams};
use suites::e2e::workload::{
    bound_volume, claim, events_about, volume_capacity, volume_handle, wait_claim_bound, wait_event,
};
use suites::e2e::{DEFAULT_STORAGE_CLASS, DRIVER_NAME, EnvironmentOptions, ManilaCsiEnvironment};

const WAIT: Duration = Duration::from_secs(120);

fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "suites=info,harness=info".into()),
        )
        .with_test_writer()
        .try_init();
}

/// Unwraps `result`; on error, panics with the error and the driver's pods and logs.
async fn check<T, E: Display>(env: &ManilaCsiEnvironment, what: &str, result: Result<T, E>) -> T {
    match result {
        Ok(value) => value,
        Err(e) => panic!("{what}: {e}\n{}", env.diagnostics().await),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_default_class_claim_gets_a_share_of_its_size_which_goes_with_it() {
    init_tracing();
    let env = ManilaCsiEnvironment::start(EnvironmentOptions::default())
        .await
        .expect("the driver deploys");
    let client = env.client();
    let ns = env.cluster().namespace("e2e-provision").await.unwrap();
    let claims: Api<PersistentVolumeClaim> = ns.api();
    claims
        .create(
            &PostParams::default(),
            &claim("data", None, "2Gi", "ReadWriteMany"),
        )
        .await
        .unwrap();
    let bound = check(
        &env,
        "claim Bound",
        wait_claim_bound(&claims, "data", WAIT).await,
    )
    .await;
    // The DefaultStorageClass admission plugin filled in the fixtures' default class.
    assert_eq!(
        bound.spec.as_ref().unwrap().storage_class_name.as_deref(),
        Some(DEFAULT_STORAGE_CLASS)
    );
    let pv = bound_volume(&client, &bound).await.unwrap();
    let pv_name = pv.metadata.name.clone().unwrap();
    assert_eq!(
        pv.spec.as_ref().unwrap().csi.as_ref().unwrap().driver,
        DRIVER_NAME
    );
    assert_eq!(volume_capacity(&pv).as_deref(), Some("2Gi"));
    let share_id = volume_handle(&pv).unwrap();

    // The share exists in the cloud, with the claim's size, named after the PV, with the
    // claim in its metadata (--extra-create-metadata), backed by a directory.
    let share = env
        .inspector()
        .share(&share_id)
        .await
        .unwrap()
        .expect("the PV's share exists in the fake cloud");
    assert_eq!(share.size, 2, "{share:?}");
    assert_eq!(share.status, "available", "{share:?}");
    assert_eq!(share.name.as_deref(), Some(pv_name.as_str()), "{share:?}");
    assert_eq!(
        share
            .metadata
            .get("csi.storage.k8s.io/pvc/name")
            .map(String::as_str),
        Some("data"),
        "{share:?}"
    );
    assert_eq!(
        share
            .metadata
            .get("csi.storage.k8s.io/pvc/namespace")
            .map(String::as_str),
        Some(ns.name()),
        "{share:?}"
    );
    assert!(env.cloud().share_dir(&share_id).is_dir());
    let events = events_about(&client, ns.name(), "data").await.unwrap();
    assert!(
        events
            .iter()
            .any(|e| e.reason.as_deref() == Some("ProvisioningSucceeded")),
        "{events:?}"
    );

    // Deleting the claim deletes the PV (reclaim policy Delete) and the share.
    claims
        .delete("data", &DeleteParams::default())
        .await
        .unwrap();
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    check(
        &env,
        "PV deleted",
        wait::wait_deleted(&volumes, &pv_name, WAIT).await,
    )
    .await;
    let inspector = env.inspector().clone();
    let share_gone = wait::wait_until(format!("share {share_id} deleted"), WAIT, || {
        let inspector = inspector.clone();
        let share_id = share_id.clone();
        async move {
            match inspector.share(&share_id).await {
                Ok(None) => Ok(Some(())),
                Ok(Some(share)) => Err(format!("{share:?}")),
                Err(e) => Err(e.to_string()),
            }
        }
    })
    .await;
    check(&env, "share deleted", share_gone).await;
    let leftovers = env.cloud().leftovers();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    ns.cleanup().await.unwrap();
    env.teardown().await.expect("clean teardown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_share_type_fails_provisioning_with_an_event_naming_it() {
    init_tracing();
    let env = ManilaCsiEnvironment::start(EnvironmentOptions::default())
        .await
        .expect("the driver deploys");
    let client = env.client();
    let ns = env.cluster().namespace("e2e-badtype").await.unwrap();

    let classes: Api<StorageClass> = Api::all(client.clone());
    let mut class = StorageClass {
        provisioner: DRIVER_NAME.into(),
        parameters: Some(env.storage_class_parameters("no-such-type")),
        reclaim_policy: Some("Delete".into()),
        ..Default::default()
    };
    class.metadata.name = Some("csi-manila-no-such-type".into());
    class.metadata.labels = Some(ns.labels());
    classes
        .create(&PostParams::default(), &class)
        .await
        .unwrap();

    let claims: Api<PersistentVolumeClaim> = ns.api();
    claims
        .create(
            &PostParams::default(),
            &claim(
                "orphan",
                Some("csi-manila-no-such-type"),
                "1Gi",
                "ReadWriteMany",
            ),
        )
        .await
        .unwrap();
    let event = check(
        &env,
        "ProvisioningFailed event",
        wait_event(
            &client,
            ns.name(),
            "orphan",
            "ProvisioningFailed",
            "no-such-type",
            WAIT,
        )
        .await,
    )
    .await;
    let message = event.message.unwrap_or_default();
    assert!(
        message.contains("csi-manila-no-such-type"),
        "the event names the class: {message}"
    );
    assert_eq!(event.type_.as_deref(), Some("Warning"));

    // Nothing was provisioned: the claim stays Pending and the cloud has no share.
    let pending = claims.get("orphan").await.unwrap();
    assert_eq!(
        pending.status.and_then(|s| s.phase).as_deref(),
        Some("Pending")
    );
    let shares = env.inspector().shares().await.unwrap();
    assert!(shares.is_empty(), "{shares:?}");

    claims
        .delete("orphan", &DeleteParams::default())
        .await
        .unwrap();
    classes
        .delete("csi-manila-no-such-type", &DeleteParams::default())
        .await
        .unwrap();
    ns.cleanup().await.unwrap();
    env.teardown().await.expect("clean teardown");
}
