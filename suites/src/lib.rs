//! The conformance suites of the Manila/Cinder CSI harness.
//!
//! - [`sanity`]: CSI spec conformance of any CSI endpoint, at parity with kubernetes-csi's
//!   `csi-sanity` (also as the `csi-sanity` binary of this crate).
//! - [`e2e`]: the storage e2e environment: the Manila CSI driver deployed from plain
//!   manifests on an embedded cluster against the in-process fake cloud, and the workloads
//!   tests run on it.
//! - [`registry`]: the suites' test registry: what a test is ([`registry::TestCase`]), what
//!   it needs and what it gets ([`registry::TestContext`]), below the suites that list tests.
//! - [`storage`]: the storage tests, driven by the driver spec file (provisioning,
//!   snapshots, volumes shared across nodes, expansion, topology).
//! - [`resilience`]: the opt-in suites that disrupt the driver or the cloud (disruption,
//!   faults, upgrade).
//! - [`conformance`]: `conformance run`: plans, runs and reports the suites on one cluster
//!   (the `conformance` binary of this crate).

pub mod conformance;
pub mod e2e;
pub mod registry;
pub mod resilience;
pub mod sanity;
pub mod storage;
