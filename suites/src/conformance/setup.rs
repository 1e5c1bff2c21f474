//! Why a run could not start. Bad input (flags, suite names, the spec file, a cluster that
//! cannot be reached or lacks the driver) is told apart from a failure to set up the
//! embedded default, because the command answers the first with exit status 2 before
//! anything is started.

/// A run could not start.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A flag, suite name or filter is wrong.
    #[error("{0}")]
    Usage(String),
    /// The driver spec file, or a class it names, is wrong.
    #[error("driver spec: {0}")]
    Spec(String),
    /// The cluster cannot be reached or read.
    #[error("cluster: {0}")]
    Cluster(String),
    /// The driver is not installed on the cluster.
    #[error("driver: {0}")]
    Driver(String),
    /// The cloud cannot be reached with the credentials given.
    #[error("cloud: {0}")]
    Cloud(String),
    /// Starting the embedded cluster, the fake cloud or the driver failed.
    #[error("setting up the embedded default: {0}")]
    Environment(String),
}

impl SetupError {
    /// Whether the user's input is at fault (exit status 2).
    pub fn is_bad_input(&self) -> bool {
        !matches!(self, SetupError::Environment(_))
    }
}
