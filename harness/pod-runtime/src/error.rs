//! The runtime's error type.

use std::path::PathBuf;

/// Everything that can go wrong when running pods as sandboxed processes.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The runtime needs root (or root inside a user namespace) to create namespaces and mounts.
    #[error(
        "the pod runtime needs root privileges to create mount/UTS/PID namespaces (effective uid \
         is {euid}); run as root, or as a normal user inside a user namespace: \
         `unshare --user --map-root-user --mount <command>`"
    )]
    NotPrivileged {
        /// The effective user id the process runs with.
        euid: u32,
    },
    /// The `pod-sandbox` helper binary was not found.
    #[error(
        "the pod-sandbox helper binary {path:?} does not exist (build it with `cargo build -p \
         pod-runtime --bin pod-sandbox`, or point POD_SANDBOX_BIN at it)"
    )]
    HelperMissing {
        /// Where it was looked for.
        path: PathBuf,
    },
    /// A sandbox or container specification is invalid.
    #[error("invalid {what}: {reason}")]
    InvalidSpec {
        /// The field or object at fault, e.g. `mount target "etc/x" of container "app"`.
        what: String,
        /// Why it is invalid.
        reason: String,
    },
    /// An image is not in the image map and the container gives no command to run.
    #[error(
        "image {image:?} is not in the image map and container {container:?} gives no command: \
         map the image to a binary or set the container's command"
    )]
    UnknownImage {
        /// The image reference.
        image: String,
        /// The container that uses it.
        container: String,
    },
    /// A container's (or exec's) command could not be executed.
    #[error("cannot execute {command:?} in {container}: {reason}")]
    CannotExecute {
        /// The sandbox/container the command was meant for.
        container: String,
        /// The program (argv\[0\]).
        command: String,
        /// Why `execve` failed (e.g. "No such file or directory").
        reason: String,
    },
    /// The sandbox or container is not running.
    #[error("{what} is not running")]
    NotRunning {
        /// Which sandbox/container.
        what: String,
    },
    /// A container with that name and attempt already exists in the sandbox.
    #[error("{what} already exists")]
    AlreadyExists {
        /// Which sandbox/container.
        what: String,
    },
    /// The helper process failed; its message says why.
    #[error("{action} failed: {message}")]
    Helper {
        /// What was being done, e.g. `creating sandbox "web-0"`.
        action: String,
        /// The helper's error message.
        message: String,
    },
    /// A file-system or process operation failed.
    #[error("{action} {path:?}")]
    Io {
        /// What was being done, e.g. "writing".
        action: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A state file could not be parsed.
    #[error("corrupt state file {path:?}")]
    State {
        /// The state file.
        path: PathBuf,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
}

/// The runtime's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Error::Io {
            action,
            path: path.into(),
            source,
        }
    }

    pub(crate) fn invalid(what: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::InvalidSpec {
            what: what.into(),
            reason: reason.into(),
        }
    }

    /// [`Error::Helper`] for a helper that failed `action`, with its stderr as the message,
    /// or its exit status when it said nothing.
    pub(crate) fn helper_failed(
        action: impl Into<String>,
        stderr: &[u8],
        status: std::process::ExitStatus,
    ) -> Self {
        let text = String::from_utf8_lossy(stderr).trim().to_string();
        let message = if text.is_empty() {
            format!("the helper exited with {status} and no message")
        } else {
            text
        };
        Error::Helper {
            action: action.into(),
            message,
        }
    }
}
