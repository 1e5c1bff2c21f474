//! The run directory's on-disk layout and its state files, shared by the runtime and the
//! `pod-sandbox` helper:
//!
//! ```text
//! <run_dir>/sandboxes/<id>/
//!     spec.json                  SandboxSpec (written by the runtime)
//!     state.json                 SandboxState: the pause process (written by the helper)
//!     sandbox.log                the helper's own messages
//!     rootfs/  layers/           mount points, used only inside the sandbox's mount namespace
//!     containers/<name>.<attempt>/
//!         spec.json              ContainerSpec
//!         state.json             ContainerState: monitor and container process
//!         exit.json              ExitStatus, written by the monitor when the process ends
//!         output.log             the container's stdout and stderr, interleaved
//!         output.times           when each line of output.log began: `<offset> <unix ns>`
//!         monitor.log            the monitor's own messages
//! ```
//!
//! Files are replaced atomically (write + rename), so a reader sees the old or the new state.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::error::{Error, Result};
use super::process::ProcessId;

/// A live sandbox's processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxState {
    /// The sandbox's PID 1 (the "pause" process); when it dies, every process of the sandbox
    /// dies.
    pub pause: ProcessId,
}

/// A started container's processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerState {
    /// The monitor: the helper that started the process, waits for it and records its exit.
    pub monitor: ProcessId,
    /// The container's main process (pid in the runtime's PID namespace).
    pub process: ProcessId,
}

/// What the `pod-sandbox` helper reports: on stdout when starting a container, in the result
/// file of an exec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HelperOutcome {
    /// The container process runs.
    Started(ContainerState),
    /// The exec'd command ended.
    Finished(super::process::ExitStatus),
    /// `execve` of the command failed.
    CannotExecute {
        /// argv\[0\].
        command: String,
        /// The OS error.
        reason: String,
    },
    /// The sandbox or container is not running.
    NotRunning,
    /// Anything else.
    Failed {
        /// The error, with its causes.
        message: String,
    },
}

/// Paths of one sandbox directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxDir(pub PathBuf);

/// Paths of one container attempt's directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerDir(pub PathBuf);

impl SandboxDir {
    /// The directory of sandbox `id` under `run_dir`.
    pub fn new(run_dir: &Path, id: &str) -> Self {
        SandboxDir(sandboxes_dir(run_dir).join(id))
    }
    /// `spec.json`.
    pub fn spec(&self) -> PathBuf {
        self.0.join("spec.json")
    }
    /// `state.json`.
    pub fn state(&self) -> PathBuf {
        self.0.join("state.json")
    }
    /// `sandbox.log`.
    pub fn log(&self) -> PathBuf {
        self.0.join("sandbox.log")
    }
    /// The sandbox root's mount point.
    pub fn rootfs(&self) -> PathBuf {
        self.0.join("rootfs")
    }
    /// Mount point of the tmpfs holding the overlays' upper and work directories.
    pub fn layers(&self) -> PathBuf {
        self.0.join("layers")
    }
    /// `containers/`.
    pub fn containers(&self) -> PathBuf {
        self.0.join("containers")
    }
    /// The directory of one container attempt.
    pub fn container(&self, dir_name: &str) -> ContainerDir {
        ContainerDir(self.containers().join(dir_name))
    }
}

/// The file name of [`ContainerDir::input_socket`].
pub const INPUT_SOCKET: &str = "input.sock";

impl ContainerDir {
    /// `spec.json`.
    pub fn spec(&self) -> PathBuf {
        self.0.join("spec.json")
    }
    /// `state.json`.
    pub fn state(&self) -> PathBuf {
        self.0.join("state.json")
    }
    /// `exit.json`.
    pub fn exit(&self) -> PathBuf {
        self.0.join("exit.json")
    }
    /// `output.log`.
    pub fn output_log(&self) -> PathBuf {
        self.0.join("output.log")
    }
    /// `output.times`: one `<byte offset> <unix time in ns>` line per line of `output.log`,
    /// when its first byte arrived.
    pub fn output_times(&self) -> PathBuf {
        self.0.join("output.times")
    }
    /// `monitor.log`.
    pub fn monitor_log(&self) -> PathBuf {
        self.0.join("monitor.log")
    }
    /// `input.sock`: the monitor's socket for the container's standard input, while it is
    /// open (see [`crate::input`]).
    pub fn input_socket(&self) -> PathBuf {
        self.0.join(INPUT_SOCKET)
    }
    /// `terminal`: the path of the container's terminal (its pty's other side), when it has
    /// one.
    pub fn terminal(&self) -> PathBuf {
        self.0.join("terminal")
    }
    /// The sandbox directory this container belongs to.
    pub fn sandbox(&self) -> Option<SandboxDir> {
        Some(SandboxDir(self.0.parent()?.parent()?.to_path_buf()))
    }
}

/// `<run_dir>/sandboxes`.
pub fn sandboxes_dir(run_dir: &Path) -> PathBuf {
    run_dir.join("sandboxes")
}

/// Writes `value` as JSON to `path` atomically.
pub fn write_json(path: &Path, value: &impl Serialize) -> Result<()> {
    let text = serde_json::to_vec_pretty(value).map_err(|source| Error::State {
        path: path.to_path_buf(),
        source,
    })?;
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text).map_err(|e| Error::io("writing", &tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io("renaming into", path, e))
}

/// Reads JSON from `path`; `Ok(None)` when the file does not exist.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<Option<T>> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|source| Error::State {
                path: path.to_path_buf(),
                source,
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("reading", path, e)),
    }
}

/// Reads JSON from `path`, which must exist.
pub fn read_required_json<T: DeserializeOwned>(path: &Path) -> Result<T> {
    read_json(path)?.ok_or_else(|| {
        Error::io(
            "reading",
            path,
            std::io::Error::from(std::io::ErrorKind::NotFound),
        )
    })
}
