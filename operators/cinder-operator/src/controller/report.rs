//! What one reconcile found and did: the conditions of each part, the workloads' figures for
//! the status, when to look again, and the first error (which makes the controller back off).

use std::time::Duration;

use kube_support::error::error_chain;
use operator_kit::api::GenerationStatus;
use operator_kit::status::{Condition, Health};

use crate::error::Error;

/// What one reconcile found and did, for the status.
#[derive(Debug, Default)]
pub(super) struct Report {
    pub(super) conditions: Vec<Condition>,
    pub(super) ready_replicas: Option<i32>,
    pub(super) generations: Vec<GenerationStatus>,
    pub(super) requeue: Option<Duration>,
    pub(super) error: Option<Error>,
    /// The version of the installed driver when it is not this operator's (a refused
    /// downgrade, or Unmanaged: the operator installed nothing).
    pub(super) driver_version: Option<String>,
}

impl Report {
    /// The three conditions of the part `prefix` from its health.
    pub(super) fn health(&mut self, prefix: &str, health: &Health) {
        self.conditions.extend(health.conditions(prefix));
    }

    /// The part `prefix` is Degraded with `reason` and the error's chain; the first error is
    /// kept for the controller's back-off.
    pub(super) fn failed(&mut self, prefix: &str, reason: &str, error: Error) {
        self.health(prefix, &Health::degraded(reason, error_chain(&error)));
        self.error.get_or_insert(error);
    }

    /// The condition of `prefix` named `type_suffix` (`Degraded`, …), for tests.
    #[cfg(test)]
    pub(super) fn condition(&self, prefix: &str, type_suffix: &str) -> Option<&Condition> {
        let wanted = format!("{prefix}{type_suffix}");
        self.conditions.iter().rev().find(|c| c.type_ == wanted)
    }
}
