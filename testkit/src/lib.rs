//! The workspace's test kit: the set-up every integration test needs, in one place.
//!
//! A dev-dependency only. Its helpers fail the calling test by panicking with what they
//! were doing and what they saw, so a test reads as a list of steps:
//!
//! - [`wait_for`]: poll any check until it yields a value, panicking with the last state seen
//!   (built on [`kube_support::wait::wait_until`]).
//! - [`init_tracing`]: logs of the crates under test into the test's output.
//! - [`cloud`]: the fake OpenStack cloud in-process and its credentials as Secrets or CSI
//!   secrets.
//! - [`objects`]: namespaces, StorageClasses, claims and Events on a real apiserver.
//! - [`drivers`]: the real `manila-csi-plugin`, `nfs-csi-plugin` and `node-driver-registrar`
//!   as processes with their sockets and logs, and [`drivers::TestIdentity`] for in-test CSI
//!   drivers.
//! - [`node`]: a node agent in-process on a control plane, with the node identity and test
//!   timings.
//! - [`volumes`]: a static CSI PersistentVolume bound to its claim.
//! - [`provisioning`]: claims in bulk all Bound, then every PV and share gone (benchmarks).
//! - [`snapshots`]: VolumeSnapshots, contents and classes, read into the caller's types.
//! - [`sidecars`]: the sidecars' command lines, and [`sidecars::ControllerBed`] (control
//!   plane, fake cloud, real Manila driver) for the controller sidecars.
//! - [`task`]: a sidecar, agent or controller run in-process until stopped.
//! - [`processes`]: `kubectl`, and whether processes are still alive.
//!
//! Everything a helper starts stops when its handle is dropped (also when the test
//! panics): processes are killed, in-process tasks aborted, scratch directories unmounted
//! and removed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod cloud;
pub mod drivers;
pub mod logging;
pub mod node;
pub mod objects;
pub mod processes;
pub mod provisioning;
pub mod sidecars;
pub mod snapshots;
pub mod task;
pub mod volumes;
pub mod wait;

pub use logging::init_tracing;
pub use wait::wait_for;
