//! The Manila CSI driver deployed from `fixtures/manila-csi/` on its own embedded cluster:
//! dynamic provisioning and deletion with the default StorageClass, and a StorageClass whose
//! share type the cloud does not have. One environment per test.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use harness::cluster::wait;
use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, PostParams};
use suites::e2e::workload::{WAIT, Workload, claim, events_about, volume_capacity};
use suites::e2e::{DEFAULT_STORAGE_CLASS, DRIVER_NAME, EnvironmentOptions, ManilaCsiEnvironment};

const LOGS: &str = "suites=info,harness=info";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_default_class_claim_gets_a_share_of_its_size_which_goes_with_it() -> anyhow::Result<()> {
    testkit::init_tracing(LOGS);
    let env = ManilaCsiEnvironment::start(EnvironmentOptions::default()).await?;
    let client = env.client();
    let workload = Workload::create(&env, "e2e-provision").await?;
    let ns = workload.namespace();
    let data = workload
        .bound_claim(&claim("data", None, "2Gi", "ReadWriteMany"))
        .await?;
    // The DefaultStorageClass admission plugin filled in the fixtures' default class.
    assert_eq!(
        data.claim
            .spec
            .as_ref()
            .unwrap()
            .storage_class_name
            .as_deref(),
        Some(DEFAULT_STORAGE_CLASS)
    );
    let pv = &data.volume;
    let pv_name = data.volume_name();
    assert_eq!(
        pv.spec.as_ref().unwrap().csi.as_ref().unwrap().driver,
        DRIVER_NAME
    );
    assert_eq!(volume_capacity(pv).as_deref(), Some("2Gi"));
    let share_id = &data.share_id;

    // The share exists in the cloud, with the claim's size, named after the PV, with the
    // claim in its metadata (--extra-create-metadata), backed by a directory.
    let share = env
        .inspector()
        .share(share_id)
        .await?
        .expect("the PV's share exists in the fake cloud");
    assert_eq!(share.size, 2, "{share:?}");
    assert_eq!(share.status, "available", "{share:?}");
    assert_eq!(share.name.as_deref(), Some(pv_name), "{share:?}");
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
        Some(ns),
        "{share:?}"
    );
    assert!(env.cloud().share_dir(share_id).is_dir());
    let events = events_about(&client, ns, "data").await?;
    assert!(
        events
            .iter()
            .any(|e| e.reason.as_deref() == Some("ProvisioningSucceeded")),
        "{events:?}"
    );

    // Deleting the claim deletes the PV (reclaim policy Delete) and the share.
    workload
        .claims
        .delete("data", &DeleteParams::default())
        .await?;
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    let pv_gone = wait::wait_deleted(&volumes, pv_name, WAIT).await;
    workload.check("PV deleted", pv_gone).await?;
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
    workload.check("share deleted", share_gone).await?;
    let leftovers = env.cloud().leftovers();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    workload.cleanup().await?;
    env.teardown().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_share_type_fails_provisioning_with_an_event_naming_it() -> anyhow::Result<()> {
    testkit::init_tracing(LOGS);
    let env = ManilaCsiEnvironment::start(EnvironmentOptions::default()).await?;
    let workload = Workload::create(&env, "e2e-badtype").await?;

    let classes: Api<StorageClass> = Api::all(env.client());
    let mut class = StorageClass {
        provisioner: DRIVER_NAME.into(),
        parameters: Some(env.storage_class_parameters("no-such-type")),
        reclaim_policy: Some("Delete".into()),
        ..Default::default()
    };
    class.metadata.name = Some("csi-manila-no-such-type".into());
    class.metadata.labels = Some(workload.labels());
    classes.create(&PostParams::default(), &class).await?;

    workload
        .create_claim(&claim(
            "orphan",
            Some("csi-manila-no-such-type"),
            "1Gi",
            "ReadWriteMany",
        ))
        .await?;
    let event = workload
        .wait_event("orphan", "ProvisioningFailed", "no-such-type")
        .await?;
    let message = event.message.unwrap_or_default();
    assert!(
        message.contains("csi-manila-no-such-type"),
        "the event names the class: {message}"
    );
    assert_eq!(event.type_.as_deref(), Some("Warning"));

    // Nothing was provisioned: the claim stays Pending and the cloud has no share.
    let pending = workload.claims.get("orphan").await?;
    assert_eq!(
        pending.status.and_then(|s| s.phase).as_deref(),
        Some("Pending")
    );
    let shares = env.inspector().shares().await?;
    assert!(shares.is_empty(), "{shares:?}");

    workload
        .claims
        .delete("orphan", &DeleteParams::default())
        .await?;
    classes
        .delete("csi-manila-no-such-type", &DeleteParams::default())
        .await?;
    workload.cleanup().await?;
    env.teardown().await?;
    Ok(())
}
