//! `volumes`: a volume stores data and its files can be executed.

use crate::conformance::TestCase;

#[allow(dead_code)]
const SUITE: &str = "volumes";

/// The suite's tests.
pub fn tests() -> Vec<TestCase> {
    Vec::new()
}
