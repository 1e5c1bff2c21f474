//! The control plane's error type.

use std::path::PathBuf;
use std::time::Duration;

use kube_support::error::IoContext;

/// What can go wrong while preparing, starting or stopping a control plane. Messages do not
/// repeat the underlying error: it is the [`std::error::Error::source`] (print the chain,
/// e.g. with `anyhow`'s `{:#}`).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or directory of the run could not be created, read or removed.
    #[error("{action} {}", path.display())]
    Io {
        /// What was being done, e.g. "writing".
        action: &'static str,
        /// The file or directory concerned.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The run directory is held by another live harness process.
    #[error("run directory {} is in use by another harness (pid {holder})", path.display())]
    RunDirInUse {
        /// The run directory.
        path: PathBuf,
        /// The pid recorded in its lock file, as text ("unknown" if unreadable).
        holder: String,
    },
    /// The control-plane binaries are missing and could not be installed.
    #[error("control-plane binaries unavailable: {0}")]
    Binaries(String),
    /// The install script ran and failed.
    #[error("{} failed ({status}); its output is above on stderr", script.display())]
    InstallScript {
        /// The script that was run.
        script: PathBuf,
        /// How it exited.
        status: std::process::ExitStatus,
    },
    /// No free local TCP port could be reserved.
    #[error("no free local port")]
    NoFreePort(#[source] std::io::Error),
    /// Generating a key or certificate failed.
    #[error("generating {what}")]
    Certificate {
        /// Which key or certificate.
        what: String,
        /// The underlying error.
        #[source]
        source: rcgen::Error,
    },
    /// A component's process could not be started.
    #[error("starting {component} ({})", binary.display())]
    Spawn {
        /// The component, e.g. "kube-apiserver".
        component: &'static str,
        /// The binary that was run.
        binary: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A component exited while it was expected to run.
    #[error("{component} exited ({status}) before it was ready; last lines of {}:\n{log_tail}", log.display())]
    Exited {
        /// The component.
        component: &'static str,
        /// How it exited.
        status: String,
        /// Its log file.
        log: PathBuf,
        /// The last lines of its log.
        log_tail: String,
    },
    /// A component did not become ready in time.
    #[error("{component} not ready after {timeout:?} (last seen: {last_seen}); last lines of {}:\n{log_tail}", log.display())]
    NotReady {
        /// The component.
        component: &'static str,
        /// How long was waited.
        timeout: Duration,
        /// The last health-check answer or error.
        last_seen: String,
        /// Its log file.
        log: PathBuf,
        /// The last lines of its log.
        log_tail: String,
    },
    /// Building a Kubernetes client failed.
    #[error("building a kube client for {target}")]
    Client {
        /// The kubeconfig file or URL the client was for.
        target: String,
        /// The underlying error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Serialising a kubeconfig failed.
    #[error("serialising kubeconfig {}", path.display())]
    Kubeconfig {
        /// The kubeconfig being written.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: serde_yaml::Error,
    },
    /// Signalling a process failed.
    #[error("signalling {component} (pid {pid})")]
    Signal {
        /// The component.
        component: String,
        /// Its pid.
        pid: i32,
        /// The underlying error.
        #[source]
        source: nix::Error,
    },
}

/// The control plane's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl IoContext for Error {
    fn from_io(action: &'static str, path: PathBuf, source: std::io::Error) -> Self {
        Error::Io {
            action,
            path,
            source,
        }
    }
}

impl Error {
    /// An [`Error::Certificate`] for `what`.
    pub(crate) fn cert(what: impl Into<String>) -> impl FnOnce(rcgen::Error) -> Self {
        let what = what.into();
        move |source| Error::Certificate { what, source }
    }
}
