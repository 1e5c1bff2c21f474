//! A CSI conformance suite at parity with kubernetes-csi's `csi-sanity`, runnable against
//! any CSI endpoint.
//!
//! The cases ([`cases::all`]) cover Identity, Controller (capabilities, GetCapacity,
//! ListVolumes, CreateVolume, DeleteVolume, ValidateVolumeCapabilities, ControllerPublish/
//! Unpublish and the controller lifecycle), snapshots (Create, Delete, List), controller
//! expansion and Node (capabilities, NodeGetInfo, Stage/Unstage/Publish/Unpublish argument
//! checks, NodeGetVolumeStats, NodeExpandVolume, the full lifecycle and its idempotency).
//! Each case is skipped, with the reason, when the plugin does not advertise what it needs.
//! The runner cleans up what each case created (publications, stages, snapshots, volumes),
//! even when it failed, and produces a [`Report`] (JUnit XML and a summary). Interrupted
//! ([`run_interruptible`]; the command line on SIGINT/SIGTERM), it stops the running case,
//! cleans up what it created and reports what, if anything, is left.
//!
//! ```no_run
//! use suites::sanity::{CsiSecrets, SanityConfig, run};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let mut config = SanityConfig::new("unix:///csi/csi.sock".parse()?);
//! config.secrets = CsiSecrets::from_yaml_file("secrets.yaml".as_ref())?;
//! let report = run(config).await?;
//! print!("{}", report.summary());
//! std::fs::write("junit.xml", report.to_junit()?)?;
//! # Ok(()) }
//! ```

pub mod case;
pub mod cases;
pub mod cli;
pub mod config;
pub mod context;
mod error;
#[cfg(test)]
mod interruption_tests;
mod paths;
pub mod report;
pub mod runner;
pub mod session;
pub mod verdict;

pub use config::{
    AccessType, CaseFilter, CsiSecrets, GIB, PathCommands, PathKind, SanityConfig, load_parameters,
};
pub use error::{Error, Result};
pub use report::{CaseReport, Interruption, Outcome, Report};
pub use runner::{run, run_cases, run_interruptible, run_with_progress};
