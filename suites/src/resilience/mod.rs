//! The resilience suites of `conformance run`: storage keeps working while things change and
//! break. Writer pods ([`writers`]) append a timestamp every 100 ms while a test disrupts the
//! driver or the cloud; each test measures the **writer stall** (the longest gap a writer
//! saw), proves that what was written before is intact, and records what it injected and what
//! the writers saw on its [`Timeline`](crate::registry::Timeline).

pub mod disruption;
pub mod faults;
pub mod upgrade;
pub mod writers;

use crate::registry::TestCase;

/// Every resilience test, in run order (suites `disruption`, `faults` and `upgrade`, run only when
/// named: see [`OPT_IN_SUITES`](crate::registry::catalog::OPT_IN_SUITES)).
pub fn tests() -> Vec<TestCase> {
    let mut tests = disruption::tests();
    tests.extend(faults::tests());
    tests.extend(upgrade::tests());
    tests
}
