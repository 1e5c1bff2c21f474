//! The conformance suites of the Manila/Cinder CSI harness.
//!
//! - [`sanity`]: CSI spec conformance of any CSI endpoint, at parity with kubernetes-csi's
//!   `csi-sanity` (also as the `csi-sanity` binary of this crate).

pub mod sanity;
