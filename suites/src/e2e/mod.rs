//! The storage e2e suite's environment: the Manila CSI driver deployed from the plain
//! manifests of `fixtures/manila-csi/` on a dedicated embedded cluster, against the fake
//! cloud running in-process (see [`ManilaCsiEnvironment`]).
//!
//! - [`binaries`]: the workspace binaries the upstream images map to, built when missing;
//! - [`manifests`]: `${VAR}` substitution and server-side apply of the fixtures;
//! - [`cloud`]: reading shares and snapshots from the fake cloud's Manila API;
//! - [`workload`]: one scenario's namespace with its claims and pods ([`workload::Workload`]),
//!   whose failed steps carry the driver's diagnostics; [`snapshots`]: VolumeSnapshots;
//! - [`timeline`]: what a test injected and what it saw, with times;
//! - [`host`]: what this host lets the drivers do (growing a mounted ext4).
//!
//! ```no_run
//! # async fn demo() -> suites::e2e::Result<()> {
//! use suites::e2e::{EnvironmentOptions, ManilaCsiEnvironment};
//! let env = ManilaCsiEnvironment::start(EnvironmentOptions::default()).await?;
//! // … create claims and pods in a namespace of env.cluster() …
//! env.teardown().await?; // no PV, VolumeSnapshotContent, share or snapshot may be left
//! // (dropped without teardown, e.g. by a failed test, it still ends its cluster and
//! // removes its run directory and mounts)
//! # Ok(()) }
//! ```

pub mod binaries;
pub mod cinder;
pub mod cloud;
mod environment;
mod error;
pub mod host;
pub mod manifests;
pub mod snapshots;
pub mod timeline;
pub mod workload;

pub use environment::{
    CA_CONFIG_MAP, CLUSTER_OPERATOR, CONTROLLER_SELECTOR, CREDENTIALS_SECRET, CloudSource,
    DEFAULT_INSTANCE, DEFAULT_STORAGE_CLASS, DRIVER_NAME, DRIVER_SECRET, DriverInstance,
    EXPANDABLE_STORAGE_CLASS, EnvironmentOptions, ExternalCloud, Install, InstanceOptions,
    ManilaCsiEnvironment, NODE_PLUGIN_SELECTOR, NfsAccess, OPERATOR_MANAGED_SELECTOR,
    OPERATOR_SELECTOR, OperatorOptions, SNAPSHOT_CLASS, SNAPSHOT_CONTROLLER_SELECTOR, StartTimings,
    TOPOLOGY_KEY, UpgradeTimings, WFFC_STORAGE_CLASS, cluster_csi_driver_resource,
    cluster_operator_resource, condition, describe_conditions, operand_versions, pod_diagnostics,
};
pub use error::{Error, Result};
