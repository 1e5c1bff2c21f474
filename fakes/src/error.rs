//! The crate's error type.

use std::path::PathBuf;

/// Errors of the fake cloud's in-process API (start-up, seeds, backend directories).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// Why binding failed.
        #[source]
        source: std::io::Error,
    },
    /// A seed file could not be read.
    #[error("cannot read seed file {path}")]
    ReadSeed {
        /// The seed file.
        path: PathBuf,
        /// Why reading failed.
        #[source]
        source: std::io::Error,
    },
    /// A seed document is not valid YAML for the seed schema.
    #[error("invalid seed {origin}")]
    ParseSeed {
        /// Where the seed came from (a path or `<inline>`).
        origin: String,
        /// What the parser found wrong.
        #[source]
        source: serde_yaml::Error,
    },
    /// A seed parsed but contradicts itself (the message names the culprit field).
    #[error("invalid seed: {0}")]
    InvalidSeed(String),
    /// The backend directory tree (one directory per share) could not be managed.
    #[error("backend directory {path}")]
    Backend {
        /// The directory concerned.
        path: PathBuf,
        /// The I/O failure.
        #[source]
        source: std::io::Error,
    },
    /// The CA or server certificate of a TLS cloud could not be made or used.
    #[error("TLS: {0}")]
    Tls(String),
    /// A control operation was refused (unknown share type name, bad fault rule, ...).
    #[error("{0}")]
    Control(String),
}

/// The crate's result alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;
