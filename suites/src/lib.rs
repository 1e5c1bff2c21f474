//! The conformance suites of the Manila/Cinder CSI harness.
//!
//! - [`sanity`]: CSI spec conformance of any CSI endpoint, at parity with kubernetes-csi's
//!   `csi-sanity` (also as the `csi-sanity` binary of this crate).
//! - [`e2e`]: the storage e2e environment: the Manila CSI driver deployed from plain
//!   manifests on a dedicated embedded cluster against the in-process fake cloud.

pub mod e2e;
pub mod sanity;
