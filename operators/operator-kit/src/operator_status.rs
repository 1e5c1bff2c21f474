//! Where an operator reports: its ClusterCSIDriver's status (conditions merged, version,
//! ready replicas, workload generations) and its ClusterOperator (created when missing; the
//! aggregate of the driver's conditions, the operator's and operand's versions, and the
//! related objects `oc adm inspect` collects).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};

use crate::api::{
    ClusterCSIDriver, ClusterCSIDriverStatus, ClusterOperator, ClusterOperatorStatus,
    GenerationStatus, ObjectReference, OperandVersion,
};
use crate::identity::OperatorIdentity;
use crate::record::Recorder;
use crate::status::{self, Condition};

/// Reading or writing a status failed.
#[derive(Debug, thiserror::Error)]
#[error("{action}: {source}")]
pub struct StatusError {
    /// What was being done (`writing the status of ClusterCSIDriver …`).
    pub action: String,
    /// The API error.
    #[source]
    pub source: kube::Error,
}

fn failed(action: String) -> impl FnOnce(kube::Error) -> StatusError {
    move |source| StatusError { action, source }
}

/// What one reconcile found, for the status.
#[derive(Clone, Debug, Default)]
pub struct StatusUpdate<'a> {
    /// The conditions of each part (merged into those already there).
    pub conditions: &'a [Condition],
    /// The version of the installed driver when it is not this operator's (a refused
    /// downgrade, or Unmanaged); this operator's otherwise.
    pub driver_version: Option<String>,
    /// Ready replicas of the controller Deployment, when read.
    pub ready_replicas: Option<i32>,
    /// Generations of the workloads applied (kept as they were when empty).
    pub generations: &'a [GenerationStatus],
}

/// Who reports: the operator, its version and its namespace.
#[derive(Clone, Copy, Debug)]
pub struct Reporter<'a> {
    /// The operator.
    pub identity: &'a OperatorIdentity,
    /// The version it runs (its release's).
    pub version: &'a str,
    /// The namespace of its driver.
    pub namespace: &'a str,
}

/// Writes the ClusterCSIDriver's status (when it changed, with a Warning Event for each
/// newly disabled or degraded condition) and the ClusterOperator's.
pub async fn write(
    client: &Client,
    recorder: &Recorder,
    reporter: Reporter<'_>,
    driver: &ClusterCSIDriver,
    update: &StatusUpdate<'_>,
) -> Result<(), StatusError> {
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let current = driver.status.clone().unwrap_or_default();
    let next = next_driver_status(&current, driver.metadata.generation, reporter, update, &now);
    if next != current {
        recorder
            .transitions(driver, &current.conditions, &next.conditions)
            .await;
        let name = reporter.identity.driver_name;
        let api = Api::<ClusterCSIDriver>::all(client.clone());
        let patch = serde_json::json!({ "status": next });
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(failed(format!(
                "writing the status of ClusterCSIDriver {name}"
            )))?;
    }
    write_cluster_operator(client, reporter, &next, &now).await
}

/// The ClusterCSIDriver's next status: `update` merged into `current`.
fn next_driver_status(
    current: &ClusterCSIDriverStatus,
    generation: Option<i64>,
    reporter: Reporter<'_>,
    update: &StatusUpdate<'_>,
    now: &Time,
) -> ClusterCSIDriverStatus {
    let mut next = current.clone();
    status::merge(&mut next.conditions, update.conditions, now);
    next.observed_generation = generation;
    next.version = Some(
        update
            .driver_version
            .clone()
            .unwrap_or_else(|| reporter.version.to_string()),
    );
    if let Some(ready) = update.ready_replicas {
        next.ready_replicas = ready;
    }
    if !update.generations.is_empty() {
        next.generations = update.generations.to_vec();
    }
    next
}

/// Creates the ClusterOperator if needed and sets its aggregate conditions, versions and
/// related objects.
async fn write_cluster_operator(
    client: &Client,
    reporter: Reporter<'_>,
    driver_status: &ClusterCSIDriverStatus,
    now: &Time,
) -> Result<(), StatusError> {
    let identity = reporter.identity;
    let name = identity.operator_name;
    let api = Api::<ClusterOperator>::all(client.clone());
    let existing = api
        .get_opt(name)
        .await
        .map_err(failed(format!("reading ClusterOperator {name}")))?;
    let existing = match existing {
        Some(existing) => existing,
        None => {
            let object = ClusterOperator::new(name, Default::default());
            api.patch(
                name,
                &PatchParams::apply(identity.field_manager).force(),
                &Patch::Apply(&object),
            )
            .await
            .map_err(failed(format!("creating ClusterOperator {name}")))?
        }
    };
    let current = existing.status.clone().unwrap_or_default();
    let next = next_operator_status(&current, reporter, driver_status, now);
    if next != current {
        let patch = serde_json::json!({ "status": next });
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(failed(format!(
                "writing the status of ClusterOperator {name}"
            )))?;
    }
    Ok(())
}

/// The ClusterOperator's next status from the driver's.
fn next_operator_status(
    current: &ClusterOperatorStatus,
    reporter: Reporter<'_>,
    driver_status: &ClusterCSIDriverStatus,
    now: &Time,
) -> ClusterOperatorStatus {
    let identity = reporter.identity;
    let mut next = ClusterOperatorStatus {
        conditions: current.conditions.clone(),
        versions: vec![
            OperandVersion {
                name: "operator".into(),
                version: reporter.version.to_string(),
            },
            OperandVersion {
                name: identity.operand_name.into(),
                version: driver_status
                    .version
                    .clone()
                    .unwrap_or_else(|| reporter.version.to_string()),
            },
        ],
        related_objects: related_objects(identity, reporter.namespace),
    };
    status::merge(
        &mut next.conditions,
        &status::aggregate(identity, &driver_status.conditions),
        now,
    );
    next
}

/// The ClusterOperator's related objects: the ClusterCSIDriver, the driver's namespace and
/// its CSIDriver.
pub fn related_objects(identity: &OperatorIdentity, namespace: &str) -> Vec<ObjectReference> {
    vec![
        ObjectReference {
            group: "operator.openshift.io".into(),
            resource: "clustercsidrivers".into(),
            namespace: None,
            name: identity.driver_name.into(),
        },
        ObjectReference {
            group: String::new(),
            resource: "namespaces".into(),
            namespace: None,
            name: namespace.into(),
        },
        ObjectReference {
            group: "storage.k8s.io".into(),
            resource: "csidrivers".into(),
            namespace: None,
            name: identity.driver_name.into(),
        },
    ]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::identity::TEST_IDENTITY;
    use crate::status::{Health, Status};

    fn time(seconds: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(seconds).unwrap())
    }

    fn reporter() -> Reporter<'static> {
        Reporter {
            identity: &TEST_IDENTITY,
            version: "1.2.0",
            namespace: "example-ns",
        }
    }

    #[test]
    fn the_driver_status_takes_the_update_and_keeps_what_it_does_not_mention() {
        let current = ClusterCSIDriverStatus {
            ready_replicas: 2,
            generations: vec![GenerationStatus {
                name: "kept".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let conditions = Health::ok("AsExpected", "fine").conditions("ExampleX");
        let update = StatusUpdate {
            conditions: &conditions,
            ..Default::default()
        };
        let next = next_driver_status(&current, Some(7), reporter(), &update, &time(1));
        assert_eq!(next.observed_generation, Some(7));
        assert_eq!(next.version.as_deref(), Some("1.2.0"));
        assert_eq!(next.ready_replicas, 2);
        assert_eq!(next.generations[0].name, "kept");
        assert_eq!(next.conditions.len(), 3);
        let refused = StatusUpdate {
            driver_version: Some("1.3.0".into()),
            ready_replicas: Some(1),
            ..update
        };
        let next = next_driver_status(&next, Some(7), reporter(), &refused, &time(2));
        assert_eq!(next.version.as_deref(), Some("1.3.0"));
        assert_eq!(next.ready_replicas, 1);
    }

    #[test]
    fn the_cluster_operator_names_the_operators_operand_and_related_objects() {
        let mut driver_status = ClusterCSIDriverStatus {
            version: Some("1.3.0".into()),
            ..Default::default()
        };
        status::merge(
            &mut driver_status.conditions,
            &Health::degraded("Broken", "gone").conditions("ExampleStaticResourcesController"),
            &time(1),
        );
        let next = next_operator_status(
            &ClusterOperatorStatus::default(),
            reporter(),
            &driver_status,
            &time(1),
        );
        assert_eq!(
            next.versions,
            [
                OperandVersion {
                    name: "operator".into(),
                    version: "1.2.0".into()
                },
                OperandVersion {
                    name: "example-csi-driver".into(),
                    version: "1.3.0".into()
                },
            ]
        );
        let names: Vec<String> = next
            .related_objects
            .iter()
            .map(|r| format!("{}/{}", r.resource, r.name))
            .collect();
        assert_eq!(
            names,
            [
                "clustercsidrivers/example.csi.test",
                "namespaces/example-ns",
                "csidrivers/example.csi.test"
            ]
        );
        let degraded = next
            .conditions
            .iter()
            .find(|c| c.type_ == "Degraded")
            .unwrap();
        assert_eq!(degraded.status, Status::True.as_str());
    }
}
