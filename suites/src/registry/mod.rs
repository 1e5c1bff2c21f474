//! The suites' test registry: what a test is and what it gets, below the suites that list
//! tests (`storage`, `resilience`) and the command that runs them (`conformance`).
//!
//! - [`case`]: a [`TestCase`] (suite, name, body) with the [`Needs`] that decide whether it
//!   applies, declared with [`test_case!`](crate::test_case), and the list of suites;
//! - [`context`]: the [`TestContext`] a test body gets (its namespace, the driver, the
//!   nodes, the cloud, the classes to provision from);
//! - [`outcome`]: how a test ends ([`TestError`]: a failure or a skip; `ensure!`);
//! - [`target`]: what a run runs against ([`Target`], the [`DriverUnderTest`] in each
//!   [`DriverConfig`]), with the run's view of the [`cloud`], its [`EventLog`] and the
//!   [`RunEnvironment`] the embedded default started (Manila or Cinder).

pub mod case;
pub mod cloud;
pub mod context;
pub mod environment;
pub mod event_log;
pub mod outcome;
pub mod target;

pub use case::{Needs, OPT_IN_SUITES, SANITY_SUITE, SUITES, TestCase, TestFn, TestFuture};
pub use cloud::Cloud;
pub use context::TestContext;
pub use environment::RunEnvironment;
pub use event_log::EventLog;
pub use outcome::{TestError, TestResult};
pub use target::{
    ClassTemplate, DriverConfig, DriverUnderTest, SnapshotClassTemplate, Target, TargetNode,
};
