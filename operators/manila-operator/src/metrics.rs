//! The operator's Prometheus metrics: reconciles, errors, share types seen, object changes.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters and gauges, rendered in the Prometheus text format.
#[derive(Debug, Default)]
pub struct Metrics {
    reconciles: AtomicU64,
    errors: AtomicU64,
    share_types: AtomicU64,
    objects_changed: AtomicU64,
}

impl Metrics {
    /// One reconcile started.
    pub fn reconcile(&self) {
        self.reconciles.fetch_add(1, Ordering::Relaxed);
    }

    /// One reconcile failed.
    pub fn error(&self) {
        self.errors.fetch_add(1, Ordering::Relaxed);
    }

    /// Manila answered with `count` share types.
    pub fn share_types_seen(&self, count: usize) {
        self.share_types.store(count as u64, Ordering::Relaxed);
    }

    /// The operator created, changed or deleted an object.
    pub fn object_changed(&self) {
        self.objects_changed.fetch_add(1, Ordering::Relaxed);
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let line = |name: &str, kind: &str, help: &str, value: u64| {
            format!("# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n")
        };
        [
            line(
                "manila_operator_reconciles_total",
                "counter",
                "Reconciles of the ClusterCSIDriver.",
                self.reconciles.load(Ordering::Relaxed),
            ),
            line(
                "manila_operator_reconcile_errors_total",
                "counter",
                "Reconciles that ended in an error.",
                self.errors.load(Ordering::Relaxed),
            ),
            line(
                "manila_operator_share_types",
                "gauge",
                "Share types Manila listed at the last sync.",
                self.share_types.load(Ordering::Relaxed),
            ),
            line(
                "manila_operator_object_changes_total",
                "counter",
                "Objects the operator created, updated or deleted.",
                self.objects_changed.load(Ordering::Relaxed),
            ),
        ]
        .concat()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn renders_every_metric_with_its_value() {
        let metrics = Metrics::default();
        metrics.reconcile();
        metrics.reconcile();
        metrics.error();
        metrics.share_types_seen(3);
        let text = metrics.render();
        assert!(
            text.contains("manila_operator_reconciles_total 2\n"),
            "{text}"
        );
        assert!(
            text.contains("manila_operator_reconcile_errors_total 1\n"),
            "{text}"
        );
        assert!(text.contains("manila_operator_share_types 3\n"), "{text}");
        assert!(
            text.contains("manila_operator_object_changes_total 0\n"),
            "{text}"
        );
    }
}
