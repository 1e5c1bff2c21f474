//! `demo`: the seed document's demo: two writers on two nodes share one ReadWriteMany claim.

use crate::conformance::TestCase;

#[allow(dead_code)]
const SUITE: &str = "demo";

/// The suite's tests.
pub fn tests() -> Vec<TestCase> {
    Vec::new()
}
