//! What an operator tells about its changes: an Event on its ClusterCSIDriver for every object
//! it creates, updates or deletes (each also counted in its metrics), for each StorageClass
//! change, and a Warning when its driver becomes disabled or one of its parts degraded.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use kube::Client;
use kube_support::events::{EventRecorder, EventType};

use crate::api::{ClusterCSIDriver, OperatorCondition};
use crate::apply::{Applied, Outcome};
use crate::identity::OperatorIdentity;
use crate::metrics::Metrics;
use crate::prune::ObjectKey;
use crate::storage_classes::ClassChange;

/// `Kind namespace/name`, or `Kind name` for a cluster-scoped object.
pub fn describe(kind: &str, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(namespace) => format!("{kind} {namespace}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// Records one operator's Events (source component: its field manager) and counts its
/// object changes.
pub struct Recorder {
    identity: OperatorIdentity,
    events: EventRecorder,
    metrics: Arc<Metrics>,
    /// StorageClasses already reported as skipped (one Warning each, not one per sync).
    skipped_classes: Mutex<BTreeSet<String>>,
}

impl Recorder {
    /// A recorder for `identity`'s operator, replica `instance`, counting into `metrics`.
    pub fn new(
        client: Client,
        identity: &OperatorIdentity,
        instance: &str,
        metrics: Arc<Metrics>,
    ) -> Self {
        Recorder {
            identity: *identity,
            events: EventRecorder::new(client, identity.field_manager, instance),
            metrics,
            skipped_classes: Mutex::default(),
        }
    }

    /// The metrics it counts into.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// An Event on `driver` (failures are logged, never returned).
    pub async fn publish(
        &self,
        driver: &ClusterCSIDriver,
        type_: EventType,
        reason: &str,
        message: String,
    ) {
        self.events.publish(driver, type_, reason, message).await;
    }

    /// `<Kind>Created`/`<Kind>Updated` for an apply that changed something; nothing for an
    /// unchanged object.
    pub async fn applied(&self, driver: &ClusterCSIDriver, applied: &Applied) {
        let verb = match applied.outcome {
            Outcome::Created => "Created",
            Outcome::Updated => "Updated",
            Outcome::Unchanged => return,
        };
        self.metrics.object_changed();
        let what = describe(&applied.kind, applied.namespace.as_deref(), &applied.name);
        tracing::info!("{} {what}", verb.to_ascii_lowercase());
        self.publish(
            driver,
            EventType::Normal,
            &format!("{}{verb}", applied.kind),
            format!("{} {what}", verb.to_ascii_lowercase()),
        )
        .await;
    }

    /// `<Kind>Deleted` for an object the operator deleted, saying `why`
    /// (`deleted <what><why>`).
    pub async fn deleted(&self, driver: &ClusterCSIDriver, key: &ObjectKey, why: &str) {
        self.metrics.object_changed();
        let message = format!("deleted {}{why}", key.describe());
        tracing::info!("{message}");
        self.publish(
            driver,
            EventType::Normal,
            &format!("{}Deleted", key.kind),
            message,
        )
        .await;
    }

    /// An Event for each StorageClass change, except a skip already reported (a skip no
    /// longer seen is forgotten, so it is reported again if it comes back).
    pub async fn class_changes(&self, driver: &ClusterCSIDriver, changes: &[ClassChange]) {
        for change in self.new_changes(changes) {
            self.class_change(driver, change).await;
        }
    }

    fn new_changes<'a>(&self, changes: &'a [ClassChange]) -> Vec<&'a ClassChange> {
        let mut reported = self
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

    async fn class_change(&self, driver: &ClusterCSIDriver, change: &ClassChange) {
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
            ClassChange::Updated { name, reason } => (
                EventType::Normal,
                "StorageClassUpdated",
                format!("updated StorageClass {name} in place: {reason}"),
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
            self.metrics.object_changed();
        }
        tracing::info!("{message}");
        self.publish(driver, type_, reason, message).await;
    }

    /// A Warning for each condition that became True and says the driver is disabled or a
    /// part degraded.
    pub async fn transitions(
        &self,
        driver: &ClusterCSIDriver,
        before: &[OperatorCondition],
        after: &[OperatorCondition],
    ) {
        for (reason, message) in warnings(&self.identity, before, after) {
            self.publish(driver, EventType::Warning, &reason, message)
                .await;
        }
    }
}

/// The (reason, message) of a Warning for each condition of `after` that is True, was not
/// in `before`, and is `identity`'s disabled condition or a `…Degraded` one.
fn warnings(
    identity: &OperatorIdentity,
    before: &[OperatorCondition],
    after: &[OperatorCondition],
) -> Vec<(String, String)> {
    let disabled = identity.disabled_condition();
    after
        .iter()
        .filter(|condition| {
            let was_true = before
                .iter()
                .any(|c| c.type_ == condition.type_ && c.status == "True");
            let interesting = condition.type_ == disabled || condition.type_.ends_with("Degraded");
            interesting && condition.status == "True" && !was_true
        })
        .map(|condition| {
            let reason = condition
                .reason
                .clone()
                .unwrap_or_else(|| condition.type_.clone());
            let message = format!(
                "{}: {}",
                condition.type_,
                condition.message.clone().unwrap_or_default()
            );
            (reason, message)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::TEST_IDENTITY;

    fn condition(type_: &str, status: &str) -> OperatorCondition {
        OperatorCondition {
            type_: type_.into(),
            status: status.into(),
            reason: Some("Why".into()),
            message: Some("what".into()),
            ..Default::default()
        }
    }

    #[test]
    fn a_warning_for_the_operators_disabled_condition_and_new_degradations_only() {
        let before = [condition(
            "ExampleStaticResourcesControllerDegraded",
            "True",
        )];
        let after = [
            condition("ExampleStaticResourcesControllerDegraded", "True"),
            condition("ExampleCredentialsControllerDegraded", "True"),
            condition("ExampleControllerDisabled", "True"),
            // Another operator's disabled condition is not this one's.
            condition("ManilaControllerDisabled", "True"),
            condition("ExampleStorageClassControllerDegraded", "False"),
        ];
        let warnings = warnings(&TEST_IDENTITY, &before, &after);
        assert_eq!(
            warnings,
            [
                (
                    "Why".to_string(),
                    "ExampleCredentialsControllerDegraded: what".to_string()
                ),
                (
                    "Why".to_string(),
                    "ExampleControllerDisabled: what".to_string()
                ),
            ]
        );
    }

    #[test]
    fn objects_are_described_with_their_namespace_when_they_have_one() {
        assert_eq!(describe("Deployment", Some("ns"), "d"), "Deployment ns/d");
        assert_eq!(describe("ClusterRole", None, "r"), "ClusterRole r");
    }
}
