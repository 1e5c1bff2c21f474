//! Errors of setting up a sanity run. Case failures are not errors: they are outcomes in
//! the [`Report`](super::Report).

use std::path::PathBuf;

/// Why a sanity run could not be set up or its report not written.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A configuration value is unusable.
    #[error("invalid sanity configuration: {0}")]
    InvalidConfig(String),
    /// A file named in the configuration could not be read.
    #[error("cannot read {path}: {source}")]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The secrets file is not in csi-sanity's format.
    #[error("secrets file {path}: {reason}")]
    SecretsFile {
        /// The file.
        path: PathBuf,
        /// What is wrong (never a secret value).
        reason: String,
    },
    /// A parameters file is not a YAML mapping of strings.
    #[error("parameters file {path}: {reason}")]
    ParametersFile {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The endpoint cannot be reached or does not serve Identity.
    #[error("CSI endpoint {endpoint}: {reason}")]
    Endpoint {
        /// The endpoint.
        endpoint: String,
        /// What went wrong.
        reason: String,
    },
    /// The JUnit report could not be produced.
    #[error("cannot write the JUnit report: {0}")]
    Junit(String),
}

/// Result of the sanity library.
pub type Result<T, E = Error> = std::result::Result<T, E>;
