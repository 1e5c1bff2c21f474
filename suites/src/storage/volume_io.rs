//! `volumeIO`: files of several sizes written and read back through a pod.

use crate::conformance::TestCase;

#[allow(dead_code)]
const SUITE: &str = "volumeIO";

/// The suite's tests.
pub fn tests() -> Vec<TestCase> {
    Vec::new()
}
