//! What the operator tells: Events for its changes, the ClusterCSIDriver's status and the
//! ClusterOperator's.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube_support::events::EventType;

use super::Context;
use super::report::Report;
use crate::api::{
    CLUSTER_OPERATOR_NAME, ClusterCSIDriver, ClusterCSIDriverStatus, ClusterOperator,
    ClusterOperatorStatus, DRIVER_NAME, FIELD_MANAGER, ObjectReference, OperandVersion,
    OperatorCondition,
};
use crate::apply::{Applied, Outcome};
use crate::config::OperatorConfig;
use crate::error::{Result, kube as kube_error};
use crate::prune::ObjectKey;
use crate::status;
use crate::storage_classes::ClassChange;

/// `Kind namespace/name`, or `Kind name` for a cluster-scoped object.
pub(super) fn describe(kind: &str, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(namespace) => format!("{kind} {namespace}/{name}"),
        None => format!("{kind} {name}"),
    }
}

pub(super) async fn record_applied(driver: &ClusterCSIDriver, ctx: &Context, applied: &Applied) {
    let verb = match applied.outcome {
        Outcome::Created => "Created",
        Outcome::Updated => "Updated",
        Outcome::Unchanged => return,
    };
    ctx.metrics.object_changed();
    let what = describe(&applied.kind, applied.namespace.as_deref(), &applied.name);
    tracing::info!("{} {what}", verb.to_ascii_lowercase());
    ctx.recorder
        .publish(
            driver,
            EventType::Normal,
            &format!("{}{verb}", applied.kind),
            format!("{} {what}", verb.to_ascii_lowercase()),
        )
        .await;
}

/// An Event for an object pruned because the running release no longer installs it.
pub(super) async fn record_pruned(driver: &ClusterCSIDriver, ctx: &Context, key: &ObjectKey) {
    ctx.metrics.object_changed();
    let message = format!(
        "deleted {}: the operator's release {} ({}) no longer installs it",
        key.describe(),
        ctx.config.release,
        ctx.config.version
    );
    tracing::info!("{message}");
    ctx.recorder
        .publish(
            driver,
            EventType::Normal,
            &format!("{}Deleted", key.kind),
            message,
        )
        .await;
}

/// The changes worth an Event: all but a skip already reported (a skip no longer seen is
/// forgotten, so it is reported again if it comes back).
pub(super) fn new_changes<'a>(ctx: &Context, changes: &'a [ClassChange]) -> Vec<&'a ClassChange> {
    let mut reported = ctx
        .skipped_classes
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let skipped: BTreeSet<String> = changes
        .iter()
        .filter_map(|c| match c {
            ClassChange::Skipped { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect();
    let fresh = changes
        .iter()
        .filter(|c| match c {
            ClassChange::Skipped { name, .. } => !reported.contains(name),
            _ => true,
        })
        .collect();
    *reported = skipped;
    fresh
}

pub(super) async fn record_class_change(
    driver: &ClusterCSIDriver,
    ctx: &Context,
    change: &ClassChange,
) {
    let (type_, reason, message) = match change {
        ClassChange::Created { name } => (
            EventType::Normal,
            "StorageClassCreated",
            format!("created StorageClass {name}"),
        ),
        ClassChange::Recreated { name, reason } => (
            EventType::Normal,
            "StorageClassRecreated",
            format!("re-created StorageClass {name} (its parameters are immutable): {reason}"),
        ),
        ClassChange::Deleted { name } => (
            EventType::Normal,
            "StorageClassDeleted",
            format!("deleted StorageClass {name} (storageClassState Removed)"),
        ),
        ClassChange::Skipped { name, reason } => (
            EventType::Warning,
            "StorageClassSkipped",
            format!("StorageClass {name} not created: {reason}"),
        ),
    };
    if !matches!(change, ClassChange::Skipped { .. }) {
        ctx.metrics.object_changed();
    }
    tracing::info!("{message}");
    ctx.recorder.publish(driver, type_, reason, message).await;
}

/// Writes the ClusterCSIDriver's status (when it changed) and the ClusterOperator's.
pub(super) async fn write_status(
    driver: &ClusterCSIDriver,
    ctx: &Context,
    report: &Report,
) -> Result<()> {
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let current = driver.status.clone().unwrap_or_default();
    let mut next = current.clone();
    let before = current.conditions.clone();
    status::merge(&mut next.conditions, &report.conditions, &now);
    next.observed_generation = driver.metadata.generation;
    next.version = Some(
        report
            .driver_version
            .clone()
            .unwrap_or_else(|| ctx.config.version.clone()),
    );
    if let Some(ready) = report.ready_replicas {
        next.ready_replicas = ready;
    }
    if !report.generations.is_empty() {
        next.generations = report.generations.clone();
    }
    if next != current {
        record_transitions(driver, ctx, &before, &next.conditions).await;
        let api = Api::<ClusterCSIDriver>::all(ctx.client.clone());
        let patch = serde_json::json!({ "status": next });
        api.patch_status(DRIVER_NAME, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(kube_error(format!(
                "writing the status of ClusterCSIDriver {DRIVER_NAME}"
            )))?;
    }
    write_cluster_operator(ctx, &next, &now).await
}

/// Warning events when Manila becomes disabled or a sub-controller becomes degraded.
async fn record_transitions(
    driver: &ClusterCSIDriver,
    ctx: &Context,
    before: &[OperatorCondition],
    after: &[OperatorCondition],
) {
    for condition in after {
        let was_true = before
            .iter()
            .any(|c| c.type_ == condition.type_ && c.status == "True");
        let interesting =
            condition.type_ == status::MANILA_DISABLED || condition.type_.ends_with("Degraded");
        if interesting && condition.status == "True" && !was_true {
            let reason = condition
                .reason
                .clone()
                .unwrap_or_else(|| condition.type_.clone());
            let message = format!(
                "{}: {}",
                condition.type_,
                condition.message.clone().unwrap_or_default()
            );
            ctx.recorder
                .publish(driver, EventType::Warning, &reason, message)
                .await;
        }
    }
}

/// Creates the ClusterOperator if needed and sets its aggregate conditions, versions and
/// related objects.
async fn write_cluster_operator(
    ctx: &Context,
    driver_status: &ClusterCSIDriverStatus,
    now: &Time,
) -> Result<()> {
    let api = Api::<ClusterOperator>::all(ctx.client.clone());
    let existing = api
        .get_opt(CLUSTER_OPERATOR_NAME)
        .await
        .map_err(kube_error(format!(
            "reading ClusterOperator {CLUSTER_OPERATOR_NAME}"
        )))?;
    let existing = match existing {
        Some(existing) => existing,
        None => {
            let object = ClusterOperator::new(CLUSTER_OPERATOR_NAME, Default::default());
            api.patch(
                CLUSTER_OPERATOR_NAME,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&object),
            )
            .await
            .map_err(kube_error(format!(
                "creating ClusterOperator {CLUSTER_OPERATOR_NAME}"
            )))?
        }
    };
    let current = existing.status.clone().unwrap_or_default();
    let mut next = ClusterOperatorStatus {
        conditions: current.conditions.clone(),
        versions: vec![
            OperandVersion {
                name: "operator".into(),
                version: ctx.config.version.clone(),
            },
            OperandVersion {
                name: "manila-csi-driver".into(),
                version: driver_status
                    .version
                    .clone()
                    .unwrap_or_else(|| ctx.config.version.clone()),
            },
        ],
        related_objects: related_objects(&ctx.config),
    };
    status::merge(
        &mut next.conditions,
        &status::aggregate(&driver_status.conditions),
        now,
    );
    if next != current {
        let patch = serde_json::json!({ "status": next });
        api.patch_status(
            CLUSTER_OPERATOR_NAME,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map_err(kube_error(format!(
            "writing the status of ClusterOperator {CLUSTER_OPERATOR_NAME}"
        )))?;
    }
    Ok(())
}

fn related_objects(config: &OperatorConfig) -> Vec<ObjectReference> {
    vec![
        ObjectReference {
            group: "operator.openshift.io".into(),
            resource: "clustercsidrivers".into(),
            namespace: None,
            name: DRIVER_NAME.into(),
        },
        ObjectReference {
            group: String::new(),
            resource: "namespaces".into(),
            namespace: None,
            name: config.namespace.clone(),
        },
        ObjectReference {
            group: "storage.k8s.io".into(),
            resource: "csidrivers".into(),
            namespace: None,
            name: DRIVER_NAME.into(),
        },
    ]
}
