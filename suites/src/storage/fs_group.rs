//! `fsGroup`: volume ownership by the pod's fsGroup, where the driver claims it.

use crate::conformance::TestCase;

#[allow(dead_code)]
const SUITE: &str = "fsGroup";

/// The suite's tests.
pub fn tests() -> Vec<TestCase> {
    Vec::new()
}
