//! `subPath`: directories of a volume mounted with subPath (the non-disruptive cases).

use crate::conformance::TestCase;

#[allow(dead_code)]
const SUITE: &str = "subPath";

/// The suite's tests.
pub fn tests() -> Vec<TestCase> {
    Vec::new()
}
