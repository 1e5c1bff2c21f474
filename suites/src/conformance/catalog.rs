//! What a run can contain: the suites the registry lists (see [`crate::registry::case`]) and
//! every test case of the storage and resilience suites.

pub use crate::registry::{DriverConfig, Needs, OPT_IN_SUITES, SANITY_SUITE, SUITES, TestCase};

/// Every test case of the storage and resilience suites, in run order.
pub fn storage_tests() -> Vec<TestCase> {
    let mut tests = crate::storage::tests();
    tests.extend(crate::resilience::tests());
    tests
}
