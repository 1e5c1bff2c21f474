//! `conformance run`: the suites of the harness run against one cluster, driven by the
//! driver spec file.
//!
//! A run ([`run`]) plans its tests before anything starts ([`run::plan`]: suite names, the
//! spec file, filters), sets up its [`Target`] ([`cluster_target`]: the embedded default:
//! one embedded cluster with the fake cloud and the Manila driver; or an existing cluster
//! through a kubeconfig),
//! runs the CSI sanity suite beside the storage tests ([`catalog`]), each storage test in a
//! namespace of its own, several at a time ([`runner`]), and reports ([`report`]: a summary
//! table, Markdown, JUnit) with the evidence of each failure ([`evidence`]). Every test
//! proves it left nothing behind ([`leftovers`]), and so does the run's teardown.
//!
//! The tests themselves are listed by the suites ([`crate::storage`],
//! [`crate::resilience`]) in the crate's test registry ([`crate::registry`]): a test is an
//! async function of a [`TestContext`] (its namespace, the driver in the configuration it
//! asked for, the nodes, the cloud, the classes to provision from), listed
//! with what it needs ([`Needs`]: capabilities the spec file must claim, nodes, a driver
//! configuration) so that a test that does not apply is skipped with the reason:
//!
//! ```ignore
//! async fn stores_data(ctx: &TestContext<'_>) -> TestResult {
//!     let class = ctx.storage_class().await?;
//!     let w = ctx.workload();
//!     w.bound_claim(&claim("data", Some(&class), &ctx.claim_size(), "ReadWriteOnce")).await?;
//!     // …
//!     Ok(())
//! }
//! test_case!("volumes", "should store data", Needs::capabilities(&[Capability::Persistence]), stores_data)
//! ```

pub mod catalog;
pub mod cluster_target;
pub mod evidence;
pub mod leftovers;
pub mod progress;
pub mod report;
pub mod run;
pub mod runner;
mod sanity_suite;
pub mod secret_scan;
pub mod setup;

pub use crate::e2e::timeline::Timeline;
pub use crate::registry::{
    Cloud, DriverConfig, DriverUnderTest, Needs, SUITES, Target, TestCase, TestContext, TestError,
    TestResult,
};
pub use report::{Outcome, RunReport, TestReport};
pub use run::{RunConfig, TargetChoice};
pub use runner::RunnerOptions;
pub use setup::SetupError;
