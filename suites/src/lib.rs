//! The conformance suites of the Manila/Cinder CSI harness.
//!
//! - [`sanity`]: CSI spec conformance of any CSI endpoint, at parity with kubernetes-csi's
//!   `csi-sanity` (also as the `csi-sanity` binary of this crate).
//! - [`e2e`]: the storage e2e environment: the Manila CSI driver deployed from plain
//!   manifests on an embedded cluster against the in-process fake cloud, and the workloads
//!   tests run on it.
//! - [`storage`]: the storage tests, driven by the driver spec file (provisioning,
//!   snapshots, volumes shared across nodes, expansion, topology).
//! - [`conformance`]: `conformance run`: plans, runs and reports the suites on one cluster
//!   (the `conformance` binary of this crate).

pub mod conformance;
pub mod e2e;
pub mod resilience;
pub mod sanity;
pub mod storage;
