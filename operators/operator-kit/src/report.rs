//! What one reconcile found and did: the conditions of each part, the workloads' figures for
//! the status, when to look again, and the first error (which makes the controller back off).
//! Generic over the operator's error type; written as the status by [`Report::write_status`].

use std::time::Duration;

use kube::Client;
use kube::api::DynamicObject;
use kube_support::error::error_chain;

use crate::api::{ClusterCSIDriver, GenerationStatus};
use crate::apply::{Applier, ApplyError};
use crate::operator_status::{self, Reporter, StatusError, StatusUpdate};
use crate::record::Recorder;
use crate::status::{Condition, Health};

/// What one reconcile found and did, for the status.
#[derive(Debug)]
pub struct Report<E> {
    /// The conditions of every part looked at, in order (a later one of a type wins).
    pub conditions: Vec<Condition>,
    /// The controller Deployment's ready replicas.
    pub ready_replicas: Option<i32>,
    /// The workloads' generations as applied.
    pub generations: Vec<GenerationStatus>,
    /// When to look again, if sooner than the periodic resync.
    pub requeue: Option<Duration>,
    /// The first error (the controller backs off).
    pub error: Option<E>,
    /// The version of the installed driver when it is not this operator's (a refused
    /// downgrade, or Unmanaged: the operator installed nothing).
    pub driver_version: Option<String>,
}

impl<E> Default for Report<E> {
    fn default() -> Self {
        Report {
            conditions: Vec::new(),
            ready_replicas: None,
            generations: Vec::new(),
            requeue: None,
            error: None,
            driver_version: None,
        }
    }
}

impl<E: std::error::Error + 'static> Report<E> {
    /// The three conditions of the part `prefix` from its health.
    pub fn health(&mut self, prefix: &str, health: &Health) {
        self.conditions.extend(health.conditions(prefix));
    }

    /// The part `prefix` is Degraded with `reason` and the error's chain; the first error is
    /// kept for the controller's back-off.
    pub fn failed(&mut self, prefix: &str, reason: &str, error: E) {
        self.health(prefix, &Health::degraded(reason, error_chain(&error)));
        self.error.get_or_insert(error);
    }

    /// Applies every object (an Event for each change, the workloads' generations into the
    /// report); the first failure, after trying them all.
    pub async fn apply_all(
        &mut self,
        applier: &Applier,
        recorder: &Recorder,
        driver: &ClusterCSIDriver,
        objects: &[DynamicObject],
    ) -> Result<(), E>
    where
        E: From<ApplyError>,
    {
        let mut failure = None;
        for object in objects {
            match applier.apply(object).await {
                Ok(applied) => {
                    recorder.applied(driver, &applied).await;
                    if let Some(generation) = applied.generation
                        && matches!(applied.kind.as_str(), "Deployment" | "DaemonSet")
                    {
                        self.generations.push(GenerationStatus {
                            group: "apps".into(),
                            resource: format!("{}s", applied.kind.to_ascii_lowercase()),
                            namespace: applied.namespace.clone().unwrap_or_default(),
                            name: applied.name.clone(),
                            last_generation: generation,
                        });
                    }
                }
                Err(error) => {
                    failure.get_or_insert(E::from(error));
                }
            }
        }
        failure.map_or(Ok(()), Err)
    }

    /// Writes the report as `driver`'s status (when it changed, a Warning Event for each
    /// newly degraded part) and as the ClusterOperator's ([`operator_status::write`]).
    pub async fn write_status(
        &self,
        client: &Client,
        recorder: &Recorder,
        reporter: Reporter<'_>,
        driver: &ClusterCSIDriver,
    ) -> Result<(), StatusError> {
        let update = StatusUpdate {
            conditions: &self.conditions,
            driver_version: self.driver_version.clone(),
            ready_replicas: self.ready_replicas,
            generations: &self.generations,
        };
        operator_status::write(client, recorder, reporter, driver, &update).await
    }

    /// The last condition of `prefix` named `type_suffix` (`Degraded`, …).
    pub fn condition(&self, prefix: &str, type_suffix: &str) -> Option<&Condition> {
        let wanted = format!("{prefix}{type_suffix}");
        self.conditions.iter().rev().find(|c| c.type_ == wanted)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::status::Status;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] Inner);
    #[derive(Debug, thiserror::Error)]
    #[error("inner")]
    struct Inner;

    #[test]
    fn a_failure_degrades_its_part_with_the_chain_and_keeps_the_first_error() {
        let mut report = Report::default();
        report.health("A", &Health::ok("AsExpected", ""));
        report.failed("B", "Broken", Outer(Inner));
        report.failed("C", "Broken", Outer(Inner));
        let degraded = report.condition("B", "Degraded").unwrap();
        assert_eq!(degraded.status, Status::True);
        assert_eq!(degraded.message, "outer: inner");
        assert_eq!(
            report.condition("A", "Degraded").unwrap().status,
            Status::False
        );
        assert!(report.error.is_some());
        assert_eq!(report.conditions.len(), 9);
    }
}
