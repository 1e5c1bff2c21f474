//! `volumeMode`: block volumes refused by a filesystem-only driver; unused volumes not mounted.

use crate::conformance::TestCase;

#[allow(dead_code)]
const SUITE: &str = "volumeMode";

/// The suite's tests.
pub fn tests() -> Vec<TestCase> {
    Vec::new()
}
