//! The library the CSI driver operators share (the Manila operator, the Cinder operator):
//! what one operator proves, with the driver as a parameter, an [`OperatorIdentity`]
//! (driver name, operator name, field manager, `managed-by` label, condition and metric
//! prefixes). Each operator keeps its reconcile, its assets and its cloud checks.
//!
//! The modules form layers (see the README): the vocabulary at the bottom ([`identity`],
//! [`api`], [`kinds`], [`release`], [`status`], [`metrics`], [`crds`], [`downgrade`]); what
//! talks to the API server above it ([`apply`], [`templates`], [`prune`],
//! [`storage_classes`]); then what reports and what a reconcile is made of ([`record`],
//! [`operator_status`], [`report`], [`workloads`], [`removal`], [`watches`]) and the
//! binary's start-up ([`startup`]). `test_support` (feature `test-support`) helps the
//! operators' tests only.

pub mod api;
pub mod apply;
pub mod crds;
pub mod downgrade;
pub mod identity;
pub mod kinds;
pub mod metrics;
pub mod operator_status;
pub mod prune;
pub mod record;
pub mod release;
pub mod removal;
pub mod report;
pub mod startup;
pub mod status;
pub mod storage_classes;
pub mod templates;
#[cfg(any(test, feature = "test-support"))]
pub mod test_support;
pub mod watches;
pub mod workloads;

pub use identity::OperatorIdentity;
