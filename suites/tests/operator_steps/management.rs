//! managementState Force, the version check, and Manila leaving the catalog, on a running
//! environment: Force applies like Managed; N-1's operator refuses to go back over N until
//! Force makes it (a Warning Event); with Manila gone the classes and the driver stay.

use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, ListParams};
use suites::e2e::{
    DEFAULT_STORAGE_CLASS, ManilaCsiEnvironment, OPERATOR_MANAGED_SELECTOR, OperatorOptions,
    describe_conditions,
};

use super::{
    CONTROLLER_DEPLOYMENT, WAIT, metrics, operator_events, set_spec, status_of,
    wait_driver_condition, wait_exists, wait_generation_observed, wait_recreated,
};

/// The condition of the version check.
pub const VERSION_DEGRADED: &str = "ManilaOperatorVersionControllerDegraded";
/// N-1's one ClusterRole for every sidecar (N has one per sidecar).
const SHARED_ROLE: &str = "openstack-manila-csi-controllerplugin";
/// How long a release change of the driver may take (operator rollout, driver pods rolled).
const RELEASE_CHANGE: Duration = Duration::from_secs(180);

fn has_event(events: &[k8s_openapi::api::core::v1::Event], reason: &str, type_: &str) -> bool {
    events
        .iter()
        .any(|e| e.reason.as_deref() == Some(reason) && e.type_.as_deref() == Some(type_))
}

fn container_names(deployment: &Deployment) -> Vec<String> {
    deployment
        .spec
        .iter()
        .filter_map(|s| s.template.spec.as_ref())
        .flat_map(|s| &s.containers)
        .map(|c| c.name.clone())
        .collect()
}

/// managementState Force with nothing to force (the installed driver is this operator's
/// version): the driver is kept as under Managed (a deleted Deployment comes back, Available,
/// the version check passes, no `DowngradeForced` Event); then Managed again.
pub async fn force_applies_like_managed(env: &ManilaCsiEnvironment) -> anyhow::Result<()> {
    set_spec(env, serde_json::json!({ "managementState": "Force" })).await;
    wait_generation_observed(env).await;
    let deployments: Api<Deployment> = Api::namespaced(env.client(), env.namespace());
    let old_uid = deployments.get(CONTROLLER_DEPLOYMENT).await?.metadata.uid;
    deployments
        .delete(CONTROLLER_DEPLOYMENT, &DeleteParams::default())
        .await?;
    wait_recreated(&deployments, CONTROLLER_DEPLOYMENT, old_uid).await;
    env.wait_operator_available(Duration::from_secs(120))
        .await?;
    let driver = env.cluster_csi_driver().await?;
    ensure!(
        status_of(&driver, VERSION_DEGRADED).0 == "False",
        "the version check under Force: {}",
        describe_conditions(&driver)
    );
    let events = operator_events(env).await;
    ensure!(
        !has_event(&events, "DowngradeForced", "Warning"),
        "Force without a downgrade forced one: {events:?}"
    );
    set_spec(env, serde_json::json!({ "managementState": "Managed" })).await;
    wait_generation_observed(env).await;
    Ok(())
}

/// N-1's operator manifests applied over N (a rollout of the operator): the downgrade is
/// refused (`DowngradeRefused` naming both versions, the ClusterOperator Degraded but
/// Available, the driver untouched); then managementState Force: N-1 is installed over N
/// with a `DowngradeForced` Warning Event, and reports its version, Available.
pub async fn downgrade_refused_until_forced(env: &ManilaCsiEnvironment) -> anyhow::Result<()> {
    let current = OperatorOptions::CURRENT_RELEASE.version()?;
    let previous = OperatorOptions::PREVIOUS_RELEASE.version()?;
    let deployments: Api<Deployment> = Api::namespaced(env.client(), env.namespace());
    let at_n = deployments.get(CONTROLLER_DEPLOYMENT).await?;
    ensure!(
        container_names(&at_n).contains(&"csi-resizer".to_string()),
        "N's controller has a resizer: {:?}",
        container_names(&at_n)
    );

    env.upgrade_operator(OperatorOptions::PREVIOUS_RELEASE)
        .await?;
    let driver = wait_driver_condition(env, VERSION_DEGRADED, "True", "DowngradeRefused").await;
    let message = status_of(&driver, VERSION_DEGRADED).2;
    ensure!(
        message.contains(&format!(
            "refusing to downgrade the Manila CSI driver from version {current} to {previous}"
        )) && message.contains("Force"),
        "the refusal names both versions and Force: {message}"
    );
    let operator = env
        .wait_cluster_operator(
            "Degraded by the refused downgrade, Available, not Upgradeable",
            WAIT,
            |o| {
                status_of(o, "Degraded").0 == "True"
                    && status_of(o, "Degraded").2.contains(&message)
                    && status_of(o, "Available").0 == "True"
                    && status_of(o, "Upgradeable").0 == "False"
                    && status_of(o, "Upgradeable").1 == "DowngradeRefused"
                    && status_of(o, "Upgradeable").2.contains(&message)
            },
        )
        .await?;
    tracing::info!("refused downgrade: {}", describe_conditions(&operator));
    let untouched = deployments.get(CONTROLLER_DEPLOYMENT).await?;
    ensure!(
        untouched.metadata.uid == at_n.metadata.uid
            && untouched.metadata.generation == at_n.metadata.generation,
        "the refused downgrade changed the controller Deployment"
    );

    // Force: N-1 goes ahead over N, with a Warning Event.
    set_spec(env, serde_json::json!({ "managementState": "Force" })).await;
    env.wait_operator_version(&previous, RELEASE_CHANGE)
        .await
        .context("N-1 installed under Force")?;
    let events = operator_events(env).await;
    let forced = events
        .iter()
        .find(|e| {
            e.reason.as_deref() == Some("DowngradeForced") && e.type_.as_deref() == Some("Warning")
        })
        .with_context(|| format!("no DowngradeForced Warning Event: {events:?}"))?;
    let text = forced.message.clone().unwrap_or_default();
    ensure!(
        text.contains(&current) && text.contains(&previous) && text.contains("Force"),
        "the DowngradeForced Event names both versions and Force: {text}"
    );
    wait_driver_condition(env, VERSION_DEGRADED, "False", "").await;
    env.wait_cluster_operator("Upgradeable again once forced", WAIT, |o| {
        status_of(o, "Upgradeable").0 == "True"
    })
    .await?;
    // N-1's shape: no resizer, one ClusterRole for every sidecar.
    let at_n_minus_1 = deployments.get(CONTROLLER_DEPLOYMENT).await?;
    let containers = container_names(&at_n_minus_1);
    ensure!(
        !containers.contains(&"csi-resizer".to_string()),
        "N-1's controller has no resizer: {containers:?}"
    );
    let roles: Api<ClusterRole> = Api::all(env.client());
    wait_exists(&roles, SHARED_ROLE).await;
    Ok(())
}

/// Manila leaves the catalog after the operator made its classes: `ManilaControllerDisabled`
/// (the driver kept), not Degraded, and two reconciles later every class of the operator,
/// the controller Deployment and the node DaemonSets are the same objects as before.
pub async fn manila_gone_keeps_classes_and_driver(
    env: &ManilaCsiEnvironment,
) -> anyhow::Result<()> {
    let classes: Api<StorageClass> = Api::all(env.client());
    wait_exists(&classes, DEFAULT_STORAGE_CLASS).await;
    let managed = ListParams::default().labels(OPERATOR_MANAGED_SELECTOR);
    let uids = |list: Vec<kube::api::PartialObjectMeta<StorageClass>>| {
        let mut uids: Vec<(String, String)> = list
            .into_iter()
            .map(|o| {
                (
                    o.metadata.name.unwrap_or_default(),
                    o.metadata.uid.unwrap_or_default(),
                )
            })
            .collect();
        uids.sort();
        uids
    };
    let classes_before = uids(classes.list_metadata(&managed).await?.items);
    let workloads = || async {
        let deployments: Api<Deployment> = Api::namespaced(env.client(), env.namespace());
        let daemon_sets: Api<DaemonSet> = Api::namespaced(env.client(), env.namespace());
        let mut uids: Vec<String> = deployments
            .list_metadata(&managed)
            .await?
            .items
            .into_iter()
            .filter_map(|o| o.metadata.uid)
            .collect();
        uids.extend(
            daemon_sets
                .list_metadata(&managed)
                .await?
                .items
                .into_iter()
                .filter_map(|o| o.metadata.uid),
        );
        uids.sort();
        anyhow::Ok(uids)
    };
    let workloads_before = workloads().await?;
    ensure!(
        workloads_before.len() == 3,
        "the controller Deployment and both node DaemonSets: {workloads_before:?}"
    );

    env.fake_cloud()
        .context("the fake cloud")?
        .set_manila_present(false);
    let driver = wait_driver_condition(env, "ManilaControllerDisabled", "True", "kept").await;
    ensure!(
        status_of(&driver, "ManilaControllerDisabled").1 == "ManilaNotInCatalog",
        "{}",
        describe_conditions(&driver)
    );
    let seen = metrics::scrape(env).await?;
    metrics::wait_reconciles(env, &seen, 2.0).await?;
    let operator = env
        .wait_cluster_operator("Available, not Degraded", WAIT, |o| {
            status_of(o, "Available").0 == "True" && status_of(o, "Degraded").0 == "False"
        })
        .await?;
    let driver = env.cluster_csi_driver().await?;
    if let Some(degraded) = driver
        .data
        .pointer("/status/conditions")
        .and_then(|c| c.as_array())
        .into_iter()
        .flatten()
        .find(|c| {
            c["type"].as_str().is_some_and(|t| t.ends_with("Degraded")) && c["status"] == "True"
        })
    {
        bail!("Manila gone made the driver Degraded: {degraded}");
    }
    tracing::info!("Manila gone: {}", describe_conditions(&operator));
    ensure!(
        uids(classes.list_metadata(&managed).await?.items) == classes_before,
        "the operator's StorageClasses changed when Manila went away: before {classes_before:?}"
    );
    ensure!(
        workloads().await? == workloads_before,
        "the driver's workloads changed when Manila went away"
    );
    Ok(())
}
