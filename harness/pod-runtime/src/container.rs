//! Containers: processes started in a sandbox by their monitor (`pod-sandbox run`).

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use super::error::{Error, Result};
use super::exec::{self, ExecOutput, ExecSession, ExecTarget};
use super::layout::{
    ContainerDir, ContainerState, HelperOutcome, read_json, read_required_json, write_json,
};
use super::process::{ExitStatus, ProcessId};
use super::spec::ContainerSpec;
use super::terminal::{TerminalSize, set_size};

/// How long the monitor may take to report that the process started.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A started container attempt (running or exited). Cheap to clone; survives a restart of the
/// node agent (see [`Sandbox::containers`](super::Sandbox::containers)).
#[derive(Debug, Clone)]
pub struct Container {
    sandbox_id: String,
    helper: PathBuf,
    spec: ContainerSpec,
    dir: ContainerDir,
    state: ContainerState,
}

impl Container {
    /// Starts a container of the running sandbox `sandbox_id` in `dir` (see
    /// [`SandboxDir::container`](super::layout::SandboxDir::container)) through its monitor,
    /// `helper run`. The caller has validated `spec` and checked the sandbox runs.
    pub(crate) async fn start(
        sandbox_id: &str,
        helper: &Path,
        dir: ContainerDir,
        spec: ContainerSpec,
    ) -> Result<Container> {
        let what = format!(
            "container {:?} (attempt {}) of sandbox {:?}",
            spec.name, spec.attempt, sandbox_id
        );
        match std::fs::create_dir(&dir.0) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(Error::AlreadyExists { what });
            }
            Err(e) => return Err(Error::io("creating", &dir.0, e)),
        }
        write_json(&dir.spec(), &spec)?;
        let monitor_log = std::fs::File::create(dir.monitor_log())
            .map_err(|e| Error::io("creating", dir.monitor_log(), e))?;

        let helper = helper.to_path_buf();
        let mut child = Command::new(&helper)
            .arg("run")
            .arg("--container-dir")
            .arg(&dir.0)
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(monitor_log)
            // Its own process group: a Ctrl-C aimed at the node agent does not reach it.
            .process_group(0)
            .spawn()
            .map_err(|e| Error::io("running", &helper, e))?;
        let stdout = child.stdout.take().ok_or_else(|| Error::Helper {
            action: format!("starting {what}"),
            message: "no stdout pipe".into(),
        })?;
        let mut line = String::new();
        let mut stdout = BufReader::new(stdout);
        let read = tokio::time::timeout(START_TIMEOUT, stdout.read_line(&mut line));
        let outcome = match read.await {
            Ok(Ok(n)) if n > 0 => serde_json::from_str::<HelperOutcome>(&line).ok(),
            _ => None,
        };
        // The monitor keeps running; tokio reaps it when it exits.
        drop(child);
        let action = format!("starting {what}");
        match outcome {
            Some(HelperOutcome::Started(state)) => Ok(Container {
                sandbox_id: sandbox_id.to_string(),
                helper,
                spec,
                dir,
                state,
            }),
            Some(HelperOutcome::CannotExecute { command, reason }) => Err(Error::CannotExecute {
                container: what,
                command,
                reason,
            }),
            Some(HelperOutcome::NotRunning) => Err(Error::NotRunning {
                what: format!("sandbox {sandbox_id:?}"),
            }),
            Some(HelperOutcome::Failed { message }) => Err(Error::Helper { action, message }),
            Some(HelperOutcome::Finished(status)) => Err(Error::Helper {
                action,
                message: format!("the monitor reported an end ({status:?}) instead of a start"),
            }),
            None => {
                let log = std::fs::read(dir.monitor_log()).unwrap_or_default();
                Err(Error::Helper {
                    action,
                    message: format!(
                        "the monitor gave no usable reply within {START_TIMEOUT:?} (got {:?}); its log: {}",
                        line.trim(),
                        String::from_utf8_lossy(&log).trim()
                    ),
                })
            }
        }
    }

    /// Loads a container attempt of sandbox `sandbox_id` from its directory; `None` when it
    /// never started.
    pub(crate) fn load(
        sandbox_id: &str,
        helper: &Path,
        dir: ContainerDir,
    ) -> Result<Option<Container>> {
        let Some(state) = read_json::<ContainerState>(&dir.state())? else {
            return Ok(None);
        };
        let spec = read_required_json(&dir.spec())?;
        Ok(Some(Container {
            sandbox_id: sandbox_id.to_string(),
            helper: helper.to_path_buf(),
            spec,
            dir,
            state,
        }))
    }

    /// The container name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Which start of the container this is (0 for the first).
    pub fn attempt(&self) -> u32 {
        self.spec.attempt
    }

    /// The specification it was started with.
    pub fn spec(&self) -> &ContainerSpec {
        &self.spec
    }

    /// The container's main process.
    pub fn process(&self) -> ProcessId {
        self.state.process
    }

    pub(crate) fn monitor_process(&self) -> ProcessId {
        self.state.monitor
    }

    /// Its directory (spec, state, exit status, logs).
    pub fn dir(&self) -> &Path {
        &self.dir.0
    }

    /// Whether its main process is running.
    pub fn is_running(&self) -> bool {
        self.state.process.is_alive()
    }

    /// How it ended, or `None` while it runs.
    pub fn exit_status(&self) -> Result<Option<ExitStatus>> {
        if let Some(status) = read_json(&self.dir.exit())? {
            return Ok(Some(status));
        }
        let gone = !self.state.monitor.is_alive() && !self.state.process.is_alive();
        // Re-read: the monitor may have recorded the status just before exiting.
        Ok(match read_json(&self.dir.exit())? {
            Some(status) => Some(status),
            None => gone.then_some(ExitStatus::Unknown),
        })
    }

    /// Waits until it has ended and returns how.
    pub async fn wait(&self) -> Result<ExitStatus> {
        // The monitor records the status, then exits.
        self.state.monitor.exited().await?;
        if let Some(status) = read_json(&self.dir.exit())? {
            return Ok(status);
        }
        // The monitor was killed: the process dies with it (parent-death signal).
        self.state.process.exited().await?;
        Ok(read_json(&self.dir.exit())?.unwrap_or(ExitStatus::Unknown))
    }

    /// Sends `signal` to the main process; `Ok(false)` when it is already gone.
    pub fn signal(&self, signal: Signal) -> Result<bool> {
        self.state.process.signal(signal)
    }

    /// Graceful stop: `SIGTERM`, then `SIGKILL` if it still runs after `grace`; returns how it
    /// ended.
    pub async fn stop(&self, grace: Duration) -> Result<ExitStatus> {
        self.signal(Signal::SIGTERM)?;
        if let Ok(status) = tokio::time::timeout(grace, self.wait()).await {
            return status;
        }
        tracing::debug!(container = %self.spec.name, ?grace, "grace period over, killing");
        self.signal(Signal::SIGKILL)?;
        self.wait().await
    }

    /// Runs `argv` inside the container (its namespaces, root, environment, working directory
    /// and user) and returns its exit status and output. Dropping the future kills the command.
    pub async fn exec(&self, argv: &[String]) -> Result<ExecOutput> {
        exec::run(self.exec_target(), argv).await
    }

    /// Starts `argv` in the container with its standard input and output given to the caller:
    /// pipes (stdout and stderr apart), or with `terminal` a terminal of that size (one
    /// stream, stdin and output, as a TTY's; no stderr). The command leads a session of its
    /// own: [`ExecSession::terminate`] (and dropping the session) kills it with everything
    /// it started in its process group.
    pub async fn exec_session(
        &self,
        argv: &[String],
        terminal: Option<TerminalSize>,
    ) -> Result<ExecSession> {
        ExecSession::start(self.exec_target(), argv, terminal).await
    }

    fn exec_target(&self) -> ExecTarget<'_> {
        ExecTarget {
            helper: &self.helper,
            container_dir: &self.dir.0,
            what: format!(
                "container {:?} of sandbox {:?}",
                self.spec.name, self.sandbox_id
            ),
        }
    }

    /// Connects to the container's standard input (see [`super::input`]): what is written
    /// to the stream reaches it; shutting the stream down ends the input when the container
    /// has `stdin_once`. `None` when there is no input to attach to: the spec asks for none,
    /// a `stdin_once` client has closed it, or the container has ended.
    pub async fn attach_input(&self) -> Result<Option<tokio::net::UnixStream>> {
        if !self.spec.stdin || !self.is_running() {
            return Ok(None);
        }
        super::input::connect(&self.dir.0).await.map_err(|e| {
            Error::io(
                "connecting to the input socket of",
                self.dir.input_socket(),
                e,
            )
        })
    }

    /// Sets the size of the container's terminal (its processes get `SIGWINCH`); nothing
    /// when it has none.
    pub fn resize_terminal(&self, size: TerminalSize) -> Result<()> {
        let path = self.dir.terminal();
        let terminal = match std::fs::read_to_string(&path) {
            Ok(terminal) => PathBuf::from(terminal.trim()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(Error::io("reading", path, e)),
        };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(nix::libc::O_NOCTTY)
            .open(&terminal)
            .map_err(|e| Error::io("opening the terminal", &terminal, e))?;
        set_size(&file, size).map_err(|e| Error::io("resizing", terminal, e))
    }

    /// The log file: stdout and stderr interleaved, as written.
    pub fn log_path(&self) -> PathBuf {
        self.dir.output_log()
    }

    /// When each line of the log began: (byte offset, Unix time in ns), in order. Empty for a
    /// container whose monitor kept no times (started before they were kept).
    pub fn log_times(&self) -> Vec<(u64, i128)> {
        let Ok(text) = std::fs::read_to_string(self.dir.output_times()) else {
            return Vec::new();
        };
        text.lines()
            .filter_map(|line| {
                let (offset, nanos) = line.split_once(' ')?;
                Some((offset.parse().ok()?, nanos.parse().ok()?))
            })
            .collect()
    }

    /// The log so far (lossily decoded as UTF-8).
    pub fn logs(&self) -> Result<String> {
        let path = self.dir.output_log();
        match std::fs::read(&path) {
            Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
            Err(e) => Err(Error::io("reading", path, e)),
        }
    }
}
