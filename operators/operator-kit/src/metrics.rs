//! An operator's Prometheus metrics, each named `<metrics_prefix>_…`
//! ([`crate::OperatorIdentity::metrics_prefix`]): reconciles, reconcile errors and object
//! changes, which every operator counts, plus the gauges an operator declares for itself
//! (the Manila operator's share types).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::identity::OperatorIdentity;

/// A gauge an operator declares: its name after the prefix, and its help text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gauge {
    /// The name after `<metrics_prefix>_`.
    pub name: &'static str,
    /// The `# HELP` text.
    pub help: &'static str,
}

/// Counters and gauges, rendered in the Prometheus text format.
#[derive(Debug)]
pub struct Metrics {
    prefix: &'static str,
    reconciles: AtomicU64,
    errors: AtomicU64,
    objects_changed: AtomicU64,
    gauges: Vec<(Gauge, AtomicU64)>,
}

impl Metrics {
    /// The metrics of `identity`'s operator, with its own `gauges` (each starting at 0).
    pub fn new(identity: &OperatorIdentity, gauges: &[Gauge]) -> Self {
        Metrics {
            prefix: identity.metrics_prefix,
            reconciles: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            objects_changed: AtomicU64::new(0),
            gauges: gauges.iter().map(|g| (*g, AtomicU64::new(0))).collect(),
        }
    }

    /// One reconcile started.
    pub fn reconcile(&self) {
        self.reconciles.fetch_add(1, Ordering::Relaxed);
    }

    /// One reconcile failed.
    pub fn error(&self) {
        self.errors.fetch_add(1, Ordering::Relaxed);
    }

    /// The operator created, changed or deleted an object.
    pub fn object_changed(&self) {
        self.objects_changed.fetch_add(1, Ordering::Relaxed);
    }

    /// Sets the declared gauge `gauge` to `value`; a gauge not declared in [`Metrics::new`]
    /// is ignored (and logged).
    pub fn set(&self, gauge: &Gauge, value: u64) {
        match self.gauges.iter().find(|(g, _)| g.name == gauge.name) {
            Some((_, current)) => current.store(value, Ordering::Relaxed),
            None => tracing::warn!(gauge = gauge.name, "a gauge that was not declared"),
        }
    }

    /// The Prometheus text exposition: the counters, then the gauges in declaration order.
    pub fn render(&self) -> String {
        let line = |name: &str, kind: &str, help: &str, value: &AtomicU64| {
            let name = format!("{}_{name}", self.prefix);
            let value = value.load(Ordering::Relaxed);
            format!("# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n")
        };
        let mut text = [
            line(
                "reconciles_total",
                "counter",
                "Reconciles of the ClusterCSIDriver.",
                &self.reconciles,
            ),
            line(
                "reconcile_errors_total",
                "counter",
                "Reconciles that ended in an error.",
                &self.errors,
            ),
            line(
                "object_changes_total",
                "counter",
                "Objects the operator created, updated or deleted.",
                &self.objects_changed,
            ),
        ]
        .concat();
        for (gauge, value) in &self.gauges {
            text.push_str(&line(gauge.name, "gauge", gauge.help, value));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::TEST_IDENTITY;

    const WIDGETS: Gauge = Gauge {
        name: "widgets",
        help: "Widgets seen.",
    };

    #[test]
    fn renders_every_metric_with_the_operators_prefix_and_its_value() {
        let metrics = Metrics::new(&TEST_IDENTITY, &[WIDGETS]);
        metrics.reconcile();
        metrics.reconcile();
        metrics.error();
        metrics.set(&WIDGETS, 3);
        metrics.set(
            &Gauge {
                name: "undeclared",
                help: "",
            },
            9,
        );
        let text = metrics.render();
        for line in [
            "example_operator_reconciles_total 2\n",
            "example_operator_reconcile_errors_total 1\n",
            "example_operator_object_changes_total 0\n",
            "# HELP example_operator_widgets Widgets seen.\n# TYPE example_operator_widgets gauge\nexample_operator_widgets 3\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        assert!(!text.contains("undeclared"), "{text}");
        assert!(!text.contains("manila"), "{text}");
    }
}
