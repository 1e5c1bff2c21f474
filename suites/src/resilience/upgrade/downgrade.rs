//! Going back: N-1's manifests applied over N are refused, the driver left as N installed
//! it; N's manifests applied again clear the refusal.

use super::super::writers;
use super::super::writers::{WriterFile, Writers};
use super::inspect::{
    condition_is, container_names, describe_events, driver_pod_uids, has_event, operator_events,
    pods_as_they_are, record_rollout,
};
use super::{BeforeUpgrade, CONTROLLER_DEPLOYMENT, Releases, SHARED_ROLE, VERSION_DEGRADED, WAIT};
use crate::e2e::timeline::Timeline;
use crate::e2e::workload::Workload;
use crate::e2e::{
    DEFAULT_STORAGE_CLASS, DRIVER_SECRET, ManilaCsiEnvironment, OperatorOptions, condition,
    describe_conditions, operand_versions,
};
use crate::registry::TestResult;
use crate::{ensure, ensure_eq};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::Api;
use kube_support::wait;
use std::collections::BTreeMap;
use std::time::SystemTime;

/// The driver as N installed it: its pods, the controller's generation, the default class's
/// uid and the driver's Secret.
#[derive(Debug, PartialEq)]
struct DriverAtN {
    pods: Vec<String>,
    controller_generation: Option<i64>,
    class_uid: Option<String>,
    secret: Option<BTreeMap<String, k8s_openapi::ByteString>>,
}

impl DriverAtN {
    async fn take(env: &ManilaCsiEnvironment) -> TestResult<DriverAtN> {
        let deployments: Api<Deployment> = Api::namespaced(env.client(), env.namespace());
        let secrets: Api<Secret> = Api::namespaced(env.client(), env.namespace());
        let classes: Api<StorageClass> = Api::all(env.client());
        Ok(DriverAtN {
            pods: driver_pod_uids(env).await?,
            controller_generation: deployments
                .get(CONTROLLER_DEPLOYMENT)
                .await?
                .metadata
                .generation,
            class_uid: classes.get(DEFAULT_STORAGE_CLASS).await?.metadata.uid,
            secret: secrets.get(DRIVER_SECRET).await?.data,
        })
    }
}

/// Applies N-1's operator manifests over N: the operator reports `DowngradeRefused` (a
/// condition of the ClusterCSIDriver, Degraded on the ClusterOperator, an Event) naming both
/// versions and the way back, and touches nothing of the driver; the writers do not notice.
/// Then N's manifests applied again clear the refusal, the driver still untouched.
pub(super) async fn refused(
    env: &ManilaCsiEnvironment,
    releases: &Releases,
    workload: &Workload<'_>,
    writers: &Writers<'_, '_>,
    before: &BeforeUpgrade,
    timeline: &Timeline,
) -> TestResult {
    let (current, previous) = (&releases.current, &releases.previous);
    let at_n = DriverAtN::take(env).await?;
    let files_before: Vec<WriterFile> = writers.read().await?;
    let (started, _) = writers::now();
    timeline.record(
        "inject",
        format!("operator manifests applied with release previous ({previous})"),
    );
    env.upgrade_operator(OperatorOptions::PREVIOUS_RELEASE)
        .await?;
    timeline.record("operator", "operator Deployment rolled out");
    let refusal = wait::wait_until(
        format!("ClusterCSIDriver: {VERSION_DEGRADED}=True"),
        WAIT,
        || async move {
            let driver = env.cluster_csi_driver().await.map_err(|e| e.to_string())?;
            match condition(&driver, VERSION_DEGRADED) {
                Some(c) if c["status"] == "True" => Ok(Some(c.clone())),
                _ => Err(describe_conditions(&driver)),
            }
        },
    )
    .await?;
    let message = refusal["message"].as_str().unwrap_or_default().to_string();
    timeline.record("operator", format!("{VERSION_DEGRADED}: {message}"));
    record_rollout(env, timeline, started).await?;
    ensure_eq!(
        refusal["reason"].as_str(),
        Some("DowngradeRefused"),
        "the reason of {VERSION_DEGRADED}"
    );
    let opening =
        format!("refusing to downgrade the Manila CSI driver from version {current} to {previous}");
    ensure!(
        message.starts_with(&opening)
            && message.contains("left as it is")
            && message.contains(&format!("operator manifests of version {current} or later")),
        "the refusal should say {opening:?}, that the driver is left as it is and how to go \
         back; it says {message:?}"
    );
    // The ClusterOperator: Degraded with the message, still Available (the driver works),
    // the operator's version N-1 and the driver's still N.
    let operator = env
        .wait_cluster_operator("Degraded by the refused downgrade, Available", WAIT, |o| {
            condition_is(o, "Degraded", "True") && condition_is(o, "Available", "True")
        })
        .await?;
    let degraded = condition(&operator, "Degraded")
        .cloned()
        .unwrap_or_default();
    ensure!(
        degraded["message"]
            .as_str()
            .is_some_and(|m| m.contains(&message)),
        "the ClusterOperator's Degraded condition does not carry the refusal: {degraded}"
    );
    ensure_eq!(
        operand_versions(&operator)
            .into_iter()
            .collect::<BTreeMap<_, _>>(),
        BTreeMap::from([
            ("manila-csi-driver".to_string(), current.clone()),
            ("operator".to_string(), previous.clone()),
        ]),
        "the ClusterOperator's versions"
    );
    let driver = env.cluster_csi_driver().await?;
    ensure_eq!(
        driver.data["status"]["version"].as_str(),
        Some(current.as_str()),
        "the ClusterCSIDriver's status.version after the refusal"
    );
    let events = operator_events(env).await?;
    ensure!(
        has_event(
            &events,
            "DowngradeRefused",
            &[current, previous, "left as it is"]
        ),
        "no DowngradeRefused Event: {}",
        describe_events(&events)
    );
    // The driver left as N installed it.
    ensure_eq!(
        DriverAtN::take(env).await?,
        at_n,
        "the driver after the refused downgrade"
    );
    let deployments: Api<Deployment> = Api::namespaced(env.client(), env.namespace());
    let controller = deployments.get(CONTROLLER_DEPLOYMENT).await?;
    ensure!(
        container_names(&controller).contains(&"csi-resizer".to_string()),
        "the refused downgrade removed N's resizer"
    );
    let roles: Api<ClusterRole> = Api::all(env.client());
    ensure!(
        roles.get_opt(SHARED_ROLE).await?.is_none(),
        "the refused downgrade brought back N-1's ClusterRole {SHARED_ROLE}"
    );
    for sidecar in ["provisioner", "resizer", "snapshotter"] {
        let name = format!("openstack-manila-csi-{sidecar}");
        ensure!(
            roles.get_opt(&name).await?.is_some(),
            "the refused downgrade deleted N's ClusterRole {name}"
        );
    }
    writers.wait_written_since(SystemTime::now()).await?;
    let stall = writers.check_since(started, Some(&files_before)).await?;
    timeline.record(
        "result",
        format!(
            "refused downgrade N → N-1: writer stall {:.3} s (from {})",
            stall.length.as_secs_f64(),
            writers::wall(stall.from)
        ),
    );

    // Applying N's manifests again is the way back: Available, not Degraded, with N's
    // version, and nothing of the driver touched.
    let (reapplied, _) = writers::now();
    env.upgrade_operator_and_wait(OperatorOptions::CURRENT_RELEASE, WAIT, timeline)
        .await?;
    record_rollout(env, timeline, reapplied).await?;
    let driver = env.cluster_csi_driver().await?;
    ensure!(
        condition_is(&driver, VERSION_DEGRADED, "False"),
        "{VERSION_DEGRADED} not cleared by N's manifests: {}",
        describe_conditions(&driver)
    );
    ensure_eq!(
        DriverAtN::take(env).await?,
        at_n,
        "the driver after N's manifests applied again"
    );
    writers.check_since(reapplied, None).await?;
    let names: Vec<&str> = before.writer_pods.iter().map(String::as_str).collect();
    ensure_eq!(
        pods_as_they_are(workload, &names).await?,
        before.pods,
        "the writers' pods (uid, restarts) at the end"
    );
    Ok(())
}
