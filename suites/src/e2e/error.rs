//! The errors of the e2e environment.

use std::path::PathBuf;

use kube_support::wait::WaitError;

/// A [`Result`](std::result::Result) with the e2e [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong deploying the driver, using it or tearing it down.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A binary the deployment maps an image to could not be found or built.
    #[error("binary {name}: {reason}")]
    Binary {
        /// The binary's name, e.g. `csi-provisioner`.
        name: String,
        /// What is wrong (where it was looked for, the failed build).
        reason: String,
    },

    /// Starting, using or stopping the embedded cluster failed.
    #[error("cluster: {0}")]
    Cluster(#[from] cluster::Error),

    /// The fake cloud failed.
    #[error("fake cloud: {0}")]
    Cloud(#[from] fakes::Error),

    /// A fixture could not be read, has a placeholder nobody set, or is not valid YAML.
    #[error("fixture {}: {reason}", path.display())]
    Fixture {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// A request to the apiserver failed.
    #[error("{action}: {source}")]
    Kube {
        /// What was being done, e.g. `applying Deployment ns/x`.
        action: String,
        /// The cause.
        source: kube::Error,
    },

    /// A wait timed out (what was awaited and what was last seen).
    #[error(transparent)]
    Wait(#[from] WaitError),

    /// A file-system operation failed.
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What was being done, e.g. `creating`.
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },

    /// Teardown found what the run should not have left behind.
    #[error("leftovers after teardown: {0}")]
    Leftovers(String),

    /// A test-facing check failed (an object lacks a field the test needs, a command in a
    /// pod exited non-zero, …).
    #[error("{0}")]
    Unexpected(String),

    /// A step of a workload failed; with the state and log tails of the driver's pods.
    #[error("{what}: {cause}\n{diagnostics}")]
    Diagnosed {
        /// The step, e.g. `claim data Bound`.
        what: String,
        /// Why it failed.
        cause: String,
        /// The driver's pods and the tail of each container's log.
        diagnostics: String,
    },
}

impl Error {
    /// A closure turning a [`kube::Error`] into [`Error::Kube`] with `action`.
    pub fn kube(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
        let action = action.into();
        move |source| Error::Kube { action, source }
    }

    /// A closure turning an [`std::io::Error`] into [`Error::Io`].
    pub fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io {
            action,
            path,
            source,
        }
    }
}
