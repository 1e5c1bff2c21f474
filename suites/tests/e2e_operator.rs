//! The Manila CSI driver operator on its own embedded cluster with the fake cloud: installing
//! the driver from nothing, share-type StorageClasses, self-healing, a cloud without Manila,
//! credentials problems, management states (Force too), storage-class states, a cloud that
//! speaks TLS with its own CA, leader election of two replicas, credential rotation, a
//! sidecar missing an RBAC rule, the node plugins' liveness endpoints, a downgrade refused until forced, the log levels in the
//! pods and the operator's `/metrics`.
//! One environment per test.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod operator_steps;

use std::time::Duration;

use cluster::ClusterBackend;
use fakes::{CloudConfig, ShareTypeSeed};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube_support::wait;
use operator_steps::{
    CONTROLLER_DEPLOYMENT, LOGS, WAIT, liveness, log_level, management, metrics, operator_events,
    operator_options, rwx_claim, set_spec, status_of, wait_driver_condition, wait_exists,
    wait_generation_observed, wait_recreated,
};
use suites::e2e::workload::{Workload, claim, pod_with_claim};
use suites::e2e::{
    CA_CONFIG_MAP, CREDENTIALS_SECRET, DEFAULT_STORAGE_CLASS, DRIVER_NAME, EnvironmentOptions,
    ManilaCsiEnvironment, OperatorOptions, describe_conditions,
};

/// On both backends: the embedded cluster, and a cluster whose control plane and nodes are
/// containers of their own.
#[rstest::rstest]
#[case::embedded(ClusterBackend::Embedded)]
#[case::containers(ClusterBackend::Containers)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_installs_the_driver_keeps_classes_per_share_type_and_heals(
    #[case] backend: ClusterBackend,
) -> anyhow::Result<()> {
    testkit::init_tracing(LOGS);
    let env = ManilaCsiEnvironment::start(EnvironmentOptions {
        backend,
        ..operator_options(OperatorOptions::default())
    })
    .await?;
    let client = env.client();
    let namespace = env.namespace().to_string();

    // From nothing: CSIDriver, one class per share type, conditions, events.
    let csidrivers: Api<CSIDriver> = Api::all(client.clone());
    assert!(csidrivers.get_opt(DRIVER_NAME).await?.is_some());
    let classes: Api<StorageClass> = Api::all(client.clone());
    let default_class = wait_exists(&classes, DEFAULT_STORAGE_CLASS).await;
    assert_eq!(default_class.provisioner, DRIVER_NAME);
    let parameters = default_class.parameters.clone().unwrap_or_default();
    assert_eq!(parameters.get("type").map(String::as_str), Some("default"));
    let driver = env.cluster_csi_driver().await?;
    assert_eq!(status_of(&driver, "ManilaControllerDisabled").0, "False");
    let events = operator_events(&env).await;
    assert!(
        events
            .iter()
            .any(|e| e.reason.as_deref() == Some("DeploymentCreated")),
        "{events:?}"
    );

    // The node plugins' liveness sidecars answer on the ports the environment chose.
    liveness::node_plugins_answer_healthz(&env).await?;

    // A claim on the operator's default class binds, and a pod mounts it.
    let workload = Workload::create(&env, "operator-install").await?;
    workload.bound_claim(&rwx_claim("data")).await?;
    workload
        .ready_pod(&pod_with_claim(
            "writer",
            "data",
            None,
            "echo written-by-operator-driver > /data/file && sleep 3600",
        ))
        .await?;
    let read = workload.exec("writer", "cat /data/file").await?;
    assert_eq!(read.trim(), "written-by-operator-driver");
    workload.cleanup().await?;

    // Share-type sync: a new type (with `_`) gets its class; a DHSS=True type waits for a
    // share network from the operator's configuration; a removed type keeps its class.
    env.fake_cloud()
        .expect("the fake cloud")
        .add_share_type(&ShareTypeSeed::named("Gold_Fast"))?;
    wait_exists(&classes, "csi-manila-gold-fast").await;
    let mut dhss = ShareTypeSeed::named("tenant");
    dhss.driver_handles_share_servers = true;
    env.fake_cloud()
        .expect("the fake cloud")
        .add_share_type(&dhss)?;
    wait_driver_condition(
        &env,
        "ManilaStorageClassControllerAvailable",
        "True",
        "tenant",
    )
    .await;
    assert!(classes.get_opt("csi-manila-tenant").await?.is_none());
    set_spec(
        &env,
        serde_json::json!({ "driverConfig": { "driverType": "Manila",
            "manila": { "shareNetworkIDs": { "tenant": "net-1234" } } } }),
    )
    .await;
    let tenant = wait_exists(&classes, "csi-manila-tenant").await;
    assert_eq!(
        tenant
            .parameters
            .unwrap_or_default()
            .get("shareNetworkID")
            .map(String::as_str),
        Some("net-1234")
    );
    env.fake_cloud()
        .expect("the fake cloud")
        .remove_share_type("Gold_Fast")?;
    // Two sync intervals later the class is still there.
    let driver_before = env.cluster_csi_driver().await?;
    wait::wait_until("two share-type syncs", WAIT, || {
        let env = &env;
        let before = driver_before.metadata.resource_version.clone();
        async move {
            let now = env.cluster_csi_driver().await.map_err(|e| e.to_string())?;
            let message = status_of(&now, "ManilaControllerDisabled").2;
            if now.metadata.resource_version != before && message.contains("2 share type") {
                Ok(Some(()))
            } else {
                Err(format!("ManilaControllerDisabled message {message:?}"))
            }
        }
    })
    .await?;
    assert!(classes.get_opt("csi-manila-gold-fast").await?.is_some());

    // Self-healing: deleted children come back (new objects, new uids).
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &namespace);
    let old_uid = deployments.get(CONTROLLER_DEPLOYMENT).await?.metadata.uid;
    deployments
        .delete(CONTROLLER_DEPLOYMENT, &DeleteParams::default())
        .await?;
    wait_recreated(&deployments, CONTROLLER_DEPLOYMENT, old_uid).await;
    let daemon_sets: Api<DaemonSet> = Api::namespaced(client.clone(), &namespace);
    for daemon_set in daemon_sets.list(&ListParams::default()).await?.items {
        let name = daemon_set.metadata.name.clone().unwrap();
        daemon_sets.delete(&name, &DeleteParams::default()).await?;
        wait_recreated(&daemon_sets, &name, daemon_set.metadata.uid.clone()).await;
    }
    let old_uid = classes.get(DEFAULT_STORAGE_CLASS).await?.metadata.uid;
    classes
        .delete(DEFAULT_STORAGE_CLASS, &DeleteParams::default())
        .await?;
    wait_recreated(&classes, DEFAULT_STORAGE_CLASS, old_uid).await;
    env.wait_operator_available(Duration::from_secs(120))
        .await?;

    env.teardown().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_manila_the_driver_is_disabled_not_degraded_and_credential_errors_are_named()
-> anyhow::Result<()> {
    testkit::init_tracing(LOGS);
    let mut cloud = CloudConfig::default();
    cloud.manila.present = false;
    let env = ManilaCsiEnvironment::start(EnvironmentOptions {
        cloud,
        ..operator_options(OperatorOptions {
            wait_for_driver: false,
            ..Default::default()
        })
    })
    .await?;
    let client = env.client();
    let namespace = env.namespace().to_string();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &namespace);

    // Manila-less: Disabled with the reason, Available, not Degraded, nothing installed.
    wait_driver_condition(&env, "ManilaControllerDisabled", "True", "catalog").await;
    let operator = env
        .wait_cluster_operator("Available and not Degraded", WAIT, |o| {
            status_of(o, "Available").0 == "True" && status_of(o, "Degraded").0 == "False"
        })
        .await?;
    assert!(
        status_of(&operator, "Available").2.contains("catalog"),
        "{}",
        describe_conditions(&operator)
    );
    assert!(deployments.get_opt(CONTROLLER_DEPLOYMENT).await?.is_none());

    // Manila appears: installed at the next sync.
    env.fake_cloud()
        .expect("the fake cloud")
        .set_manila_present(true);
    wait_driver_condition(&env, "ManilaControllerDisabled", "False", "share type").await;
    env.wait_operator_available(Duration::from_secs(120))
        .await?;
    assert!(deployments.get_opt(CONTROLLER_DEPLOYMENT).await?.is_some());

    // Manila goes away again: Disabled, not Degraded; its classes and the driver stay.
    management::manila_gone_keeps_classes_and_driver(&env).await?;
    env.fake_cloud()
        .expect("the fake cloud")
        .set_manila_present(true);
    wait_driver_condition(&env, "ManilaControllerDisabled", "False", "share type").await;

    // Credentials problems are Degraded and name the Secret and key; nothing is deleted.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let good: Secret = secrets.get(CREDENTIALS_SECRET).await?;
    let set_clouds_yaml = |text: &str| {
        let patch = serde_json::json!({ "stringData": { "clouds.yaml": text } });
        let secrets = secrets.clone();
        async move {
            secrets
                .patch(
                    CREDENTIALS_SECRET,
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
                .unwrap();
        }
    };
    set_clouds_yaml("clouds: [this is: not: yaml").await;
    let driver = wait_driver_condition(
        &env,
        "ManilaCredentialsControllerDegraded",
        "True",
        CREDENTIALS_SECRET,
    )
    .await;
    let message = status_of(&driver, "ManilaCredentialsControllerDegraded").2;
    assert!(message.contains("clouds.yaml"), "{message}");
    set_clouds_yaml("clouds:\n  elsewhere:\n    auth:\n      auth_url: http://127.0.0.1:1/v3\n")
        .await;
    let driver = wait_driver_condition(
        &env,
        "ManilaCredentialsControllerDegraded",
        "True",
        "elsewhere",
    )
    .await;
    let message = status_of(&driver, "ManilaCredentialsControllerDegraded").2;
    assert!(
        message.contains("openstack"),
        "the unknown cloud is named: {message}"
    );
    assert!(
        deployments.get_opt(CONTROLLER_DEPLOYMENT).await?.is_some(),
        "nothing deleted"
    );
    let mut restored = good.clone();
    restored.metadata.managed_fields = None;
    restored.metadata.resource_version = None;
    secrets
        .replace(CREDENTIALS_SECRET, &Default::default(), &restored)
        .await?;
    wait_driver_condition(&env, "ManilaCredentialsControllerDegraded", "False", "").await;

    // Unmanaged: hands off. A deleted Deployment stays deleted through a reconcile that
    // started after the deletion (one observing a later spec generation).
    set_spec(&env, serde_json::json!({ "managementState": "Unmanaged" })).await;
    wait_generation_observed(&env).await;
    testkit::objects::delete_and_wait_gone(&deployments, CONTROLLER_DEPLOYMENT, WAIT).await;
    set_spec(&env, serde_json::json!({ "logLevel": "Debug" })).await;
    wait_generation_observed(&env).await;
    assert!(deployments.get_opt(CONTROLLER_DEPLOYMENT).await?.is_none());

    set_spec(&env, serde_json::json!({ "managementState": "Managed" })).await;
    wait_exists(&deployments, CONTROLLER_DEPLOYMENT).await;
    set_spec(&env, serde_json::json!({ "managementState": "Removed" })).await;
    wait::wait_deleted(&deployments, CONTROLLER_DEPLOYMENT, WAIT).await?;
    let daemon_sets: Api<DaemonSet> = Api::namespaced(client.clone(), &namespace);
    wait::wait_until("no driver DaemonSet", WAIT, || {
        let daemon_sets = daemon_sets.clone();
        async move {
            let left = daemon_sets
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?;
            if left.items.is_empty() {
                Ok(Some(()))
            } else {
                Err(format!("{} left", left.items.len()))
            }
        }
    })
    .await?;
    let classes: Api<StorageClass> = Api::all(client.clone());
    assert!(
        classes.get_opt(DEFAULT_STORAGE_CLASS).await?.is_some(),
        "classes stay when Removed"
    );
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    assert!(maps.get_opt(CA_CONFIG_MAP).await?.is_none());

    env.teardown().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_the_operator_and_driver_trust_the_ca_bundle_and_a_wrong_ca_is_named()
-> anyhow::Result<()> {
    testkit::init_tracing(LOGS);
    let env = ManilaCsiEnvironment::start(EnvironmentOptions {
        cloud_tls: true,
        ..operator_options(OperatorOptions::default())
    })
    .await?;
    assert!(
        env.fake_cloud()
            .expect("the fake cloud")
            .auth_url()
            .starts_with("https://")
    );
    let client = env.client();
    let namespace = env.namespace().to_string();

    // The driver reaches Manila over https with the CA the operator put in its Secret.
    let workload = Workload::create(&env, "operator-tls").await?;
    workload.bound_claim(&rwx_claim("data")).await?;
    workload
        .ready_pod(&pod_with_claim("reader", "data", None, "sleep 3600"))
        .await?;
    workload.cleanup().await?;

    // A CA bundle that did not sign the cloud's certificate: Degraded, naming the problem.
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    let good = env
        .fake_cloud()
        .expect("the fake cloud")
        .ca_pem()
        .expect("a TLS cloud has a CA");
    let set_ca = |pem: String| {
        let maps = maps.clone();
        async move {
            let patch = serde_json::json!({ "data": { "ca-bundle.pem": pem } });
            maps.patch(
                CA_CONFIG_MAP,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .unwrap();
        }
    };
    set_ca(fakes::tls::unrelated_ca_pem()?).await;
    let driver = wait_driver_condition(
        &env,
        "ManilaCredentialsControllerDegraded",
        "True",
        "certificate",
    )
    .await;
    let message = status_of(&driver, "ManilaCredentialsControllerDegraded").2;
    assert!(message.contains("https://"), "the URL is named: {message}");
    set_ca("not a certificate".into()).await;
    wait_driver_condition(
        &env,
        "ManilaCredentialsControllerDegraded",
        "True",
        CA_CONFIG_MAP,
    )
    .await;
    set_ca(good).await;
    wait_driver_condition(&env, "ManilaCredentialsControllerDegraded", "False", "").await;

    env.teardown().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_elect_one_leader_rotated_credentials_reach_the_driver_missing_rbac_shows_and_a_downgrade_waits_for_force()
-> anyhow::Result<()> {
    testkit::init_tracing(LOGS);
    let env = ManilaCsiEnvironment::start(operator_options(OperatorOptions {
        replicas: 2,
        ..Default::default()
    }))
    .await?;
    let client = env.client();
    let namespace = env.namespace().to_string();

    // One Lease, held by one of the two operator pods; the other only waits.
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), &namespace);
    let lease = wait_exists(&leases, "manila-csi-driver-operator-lock").await;
    let holder = lease
        .spec
        .and_then(|s| s.holder_identity)
        .expect("the Lease has a holder");
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), &namespace);
    let operators = pods
        .list(&ListParams::default().labels(suites::e2e::OPERATOR_SELECTOR))
        .await?
        .items;
    assert_eq!(operators.len(), 2);
    let mut leaders = Vec::new();
    for pod in &operators {
        let name = pod.metadata.name.clone().unwrap();
        let log = env
            .cluster()
            .logs(&namespace, &name, "operator", false)
            .await?;
        if log.contains("became leader") {
            leaders.push(name.clone());
        } else {
            assert!(
                log.contains("waiting for the leader lease"),
                "{name}: {log}"
            );
        }
    }
    assert_eq!(leaders.len(), 1, "exactly one replica acts: {leaders:?}");
    assert!(holder.starts_with(&leaders[0]), "{holder} vs {leaders:?}");

    // Rotation: application credentials instead of the password. The driver Secret follows,
    // the driver's pods restart (hash annotation), and provisioning works with them.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &namespace);
    let hash_of = |d: &Deployment| {
        d.spec
            .as_ref()
            .and_then(|s| s.template.metadata.as_ref())
            .and_then(|m| m.annotations.as_ref())
            .and_then(|a| a.get("manila.csi.openstack.org/credentials-hash").cloned())
    };
    let before = hash_of(&deployments.get(CONTROLLER_DEPLOYMENT).await?);
    let account = env.fake_cloud().expect("the fake cloud").account();
    let credential = account.application_credential.clone().unwrap();
    let clouds_yaml = format!(
        "clouds:\n  openstack:\n    auth_type: v3applicationcredential\n    auth:\n      auth_url: {}\n      application_credential_id: {}\n      application_credential_secret: {}\n    region_name: RegionOne\n",
        env.fake_cloud().expect("the fake cloud").auth_url(),
        credential.id,
        credential.secret.expose()
    );
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    secrets
        .patch(
            CREDENTIALS_SECRET,
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({ "stringData": { "clouds.yaml": clouds_yaml } })),
        )
        .await?;
    wait::wait_until(
        "the driver Secret to carry the application credential",
        WAIT,
        || {
            let secrets = secrets.clone();
            async move {
                let secret = secrets
                    .get(suites::e2e::DRIVER_SECRET)
                    .await
                    .map_err(|e| e.to_string())?;
                let keys: Vec<String> = secret.data.unwrap_or_default().into_keys().collect();
                if keys.iter().any(|k| k == "os-applicationCredentialID")
                    && !keys.iter().any(|k| k == "os-password")
                {
                    Ok(Some(()))
                } else {
                    Err(format!("keys {keys:?}"))
                }
            }
        },
    )
    .await?;
    wait::wait_until("the controller pod template to change", WAIT, || {
        let deployments = deployments.clone();
        let before = before.clone();
        async move {
            let now = deployments
                .get(CONTROLLER_DEPLOYMENT)
                .await
                .map_err(|e| e.to_string())?;
            if hash_of(&now) != before {
                Ok(Some(()))
            } else {
                Err("same hash".to_string())
            }
        }
    })
    .await?;
    env.wait_operator_available(Duration::from_secs(120))
        .await?;
    let workload = Workload::create(&env, "operator-rotation").await?;
    workload.bound_claim(&rwx_claim("data")).await?;
    workload.cleanup().await?;

    // A sidecar whose RBAC lacks a rule fails visibly: with the operator hands off, the
    // provisioner may no longer create PVs, and says so on the claim; Managed again, the
    // operator puts the rule back and the claim binds.
    set_spec(&env, serde_json::json!({ "managementState": "Unmanaged" })).await;
    wait_generation_observed(&env).await;
    let roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(client.clone());
    let mut role = roles.get("openstack-manila-csi-provisioner").await?;
    for rule in role.rules.iter_mut().flatten() {
        if rule
            .resources
            .iter()
            .flatten()
            .any(|r| r == "persistentvolumes")
        {
            rule.verbs.retain(|v| v != "create");
        }
    }
    role.metadata.managed_fields = None;
    roles
        .replace(
            "openstack-manila-csi-provisioner",
            &Default::default(),
            &role,
        )
        .await?;
    let workload = Workload::create(&env, "operator-rbac").await?;
    workload
        .create_claim(&claim(
            "blocked",
            Some(DEFAULT_STORAGE_CLASS),
            "1Gi",
            "ReadWriteMany",
        ))
        .await?;
    let event = workload
        .wait_event("blocked", "ProvisioningFailed", "forbidden")
        .await?;
    assert!(
        event
            .message
            .as_deref()
            .unwrap_or("")
            .contains("persistentvolumes"),
        "{event:?}"
    );
    set_spec(&env, serde_json::json!({ "managementState": "Managed" })).await;
    workload.wait_bound("blocked").await?;
    workload.cleanup().await?;

    // The leader goes: the other replica takes over and keeps healing.
    pods.delete(&leaders[0], &DeleteParams::default()).await?;
    wait::wait_until(
        "the other replica to lead",
        Duration::from_secs(120),
        || {
            let leases = leases.clone();
            let old = holder.clone();
            async move {
                let lease = leases
                    .get("manila-csi-driver-operator-lock")
                    .await
                    .map_err(|e| e.to_string())?;
                let now = lease
                    .spec
                    .and_then(|s| s.holder_identity)
                    .unwrap_or_default();
                if !now.is_empty() && now != old {
                    Ok(Some(()))
                } else {
                    Err(format!("holder {now:?}"))
                }
            }
        },
    )
    .await?;
    let classes: Api<StorageClass> = Api::all(client.clone());
    let old_uid = classes.get(DEFAULT_STORAGE_CLASS).await?.metadata.uid;
    classes
        .delete(DEFAULT_STORAGE_CLASS, &DeleteParams::default())
        .await?;
    wait_recreated(&classes, DEFAULT_STORAGE_CLASS, old_uid).await;

    // N-1's operator manifests over N: refused until managementState Force.
    management::downgrade_refused_until_forced(&env).await?;

    env.teardown().await?;
    Ok(())
}

/// `storageClassState` as openshift/api defines it: Removed deletes the classes the operator
/// made and never a user's class of the same driver; Unmanaged neither creates nor updates
/// classes; Managed brings them back. Then the operator's `/metrics` scraped, `logLevel` and
/// `operatorLogLevel` in the pods, and managementState Force.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_class_states_metrics_log_levels_and_force_work_as_documented() -> anyhow::Result<()>
{
    testkit::init_tracing(LOGS);
    let env = ManilaCsiEnvironment::start(operator_options(OperatorOptions::default())).await?;
    let classes: Api<StorageClass> = Api::all(env.client());
    wait_exists(&classes, DEFAULT_STORAGE_CLASS).await;
    let users_class = "users-own-manila-class";
    let mut user = classes.get(DEFAULT_STORAGE_CLASS).await?;
    user.metadata = kube::api::ObjectMeta {
        name: Some(users_class.into()),
        ..Default::default()
    };
    classes.create(&Default::default(), &user).await?;

    // Removed: the operator's classes go, the user's stays.
    set_spec(&env, serde_json::json!({ "storageClassState": "Removed" })).await;
    wait_driver_condition(
        &env,
        "ManilaStorageClassControllerAvailable",
        "True",
        "storageClassState is Removed",
    )
    .await;
    wait::wait_until("the operator's class to be deleted", WAIT, || {
        let classes = classes.clone();
        async move {
            match classes.get_opt(DEFAULT_STORAGE_CLASS).await {
                Ok(None) => Ok(Some(())),
                Ok(Some(_)) => Err(format!("{DEFAULT_STORAGE_CLASS} still there")),
                Err(error) => Err(error.to_string()),
            }
        }
    })
    .await?;
    assert!(classes.get_opt(users_class).await?.is_some());
    let events = operator_events(&env).await;
    assert!(
        events
            .iter()
            .any(|e| e.reason.as_deref() == Some("StorageClassDeleted")),
        "{events:?}"
    );

    // Unmanaged: a new share type gets no class, nor does the deleted one come back; the
    // condition names the new count once the sync has seen the type.
    set_spec(
        &env,
        serde_json::json!({ "storageClassState": "Unmanaged" }),
    )
    .await;
    env.fake_cloud()
        .expect("the fake cloud")
        .add_share_type(&ShareTypeSeed::named("silver"))?;
    wait_driver_condition(
        &env,
        "ManilaStorageClassControllerAvailable",
        "True",
        "Unmanaged: the StorageClasses of 2 share type(s)",
    )
    .await;
    assert!(classes.get_opt(DEFAULT_STORAGE_CLASS).await?.is_none());
    assert!(classes.get_opt("csi-manila-silver").await?.is_none());

    // Managed again: both classes are created.
    set_spec(&env, serde_json::json!({ "storageClassState": "Managed" })).await;
    wait_exists(&classes, DEFAULT_STORAGE_CLASS).await;
    wait_exists(&classes, "csi-manila-silver").await;

    // /metrics over HTTP: reconciles and object changes counted, the share types Manila
    // lists (the seed's and silver).
    let scrape = metrics::scrape_matching_the_cloud(&env).await?;
    assert_eq!(scrape.value(metrics::SHARE_TYPES)?, 2.0, "{}", scrape.text);

    // logLevel Debug reaches every container of every driver pod (the pods roll); the
    // three workloads' updates are counted as object changes.
    let (containers, pods) =
        log_level::change_driver_log_level(&env, log_level::NORMAL, log_level::DEBUG).await?;
    tracing::info!(containers, pods, "every driver container at logLevel Debug");
    metrics::wait_object_changes(&env, &scrape, 3.0).await?;
    log_level::change_operator_log_level_to_debug(&env).await?;

    // Force with the operator's own version installed: as Managed.
    management::force_applies_like_managed(&env).await?;

    classes
        .delete(users_class, &DeleteParams::default())
        .await?;
    env.teardown().await?;
    Ok(())
}
