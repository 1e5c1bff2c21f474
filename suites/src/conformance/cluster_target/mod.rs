//! Setting up what a run runs against (a [`Target`](crate::registry::Target)):
//!
//! - [`embedded`]: the default: an embedded cluster started for the run, the fake cloud in
//!   this process, and the Manila CSI driver deployed from the fixtures (plus a driver
//!   instance per extra configuration the selected tests need); for a spec file of the
//!   Cinder driver, [`cinder`]: the Cinder driver with the fake Cinder and Nova;
//! - [`existing`]: a cluster named by a kubeconfig where the driver is already installed; the
//!   same tests run, and what cannot be provided there is skipped with the reason;
//! - [`classes`]: the StorageClass and VolumeSnapshotClass templates the spec file names.

pub mod cinder;
pub mod classes;
pub mod embedded;
pub mod existing;
mod options;
