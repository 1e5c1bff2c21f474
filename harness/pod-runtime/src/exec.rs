//! Commands run in a running container by the helper (`pod-sandbox exec`): one-shot, output
//! collected ([`run`], behind [`Container::exec`](super::Container::exec)), or streamed
//! ([`ExecSession`], behind [`Container::exec_session`](super::Container::exec_session)):
//! the command's standard streams (pipes, or a terminal) handed to the caller, terminal
//! resizes, and an end that kills the whole command (its process group) when the caller
//! gives up, as the kubelet API's exec and attach need.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;

use nix::sys::signal::Signal;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::process::{Child, Command};

use super::error::{Error, Result};
use super::layout::{HelperOutcome, read_json};
use super::process::ExitStatus;
use super::terminal::{Terminal, TerminalSize, nonblocking, set_size};

/// What an exec returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutput {
    /// How the command ended.
    pub status: ExitStatus,
    /// Its standard output.
    pub stdout: Vec<u8>,
    /// Its standard error.
    pub stderr: Vec<u8>,
}

impl ExecOutput {
    /// The exit code as Kubernetes reports it.
    pub fn code(&self) -> i32 {
        self.status.code()
    }
}

/// The container a command runs in, as the helper needs it.
#[derive(Debug, Clone)]
pub(crate) struct ExecTarget<'a> {
    /// The `pod-sandbox` helper.
    pub helper: &'a Path,
    /// The container's directory (its state, where the result file goes).
    pub container_dir: &'a Path,
    /// The container in messages: `container "c" of sandbox "s"`.
    pub what: String,
}

/// The helper's command for `argv` in `target` up to its options (callers add theirs, then
/// `--` and `argv`), the file it writes its result to, and argv\[0\].
fn helper_command(
    target: &ExecTarget<'_>,
    argv: &[String],
) -> Result<(Command, tempfile::NamedTempFile, String)> {
    let Some(program) = argv.first().cloned() else {
        return Err(Error::invalid(
            format!("exec in {}", target.what),
            "argv is empty",
        ));
    };
    let dir = target.container_dir;
    let result_file = tempfile::Builder::new()
        .prefix("exec-")
        .suffix(".json")
        .tempfile_in(dir)
        .map_err(|e| Error::io("creating a temporary file in", dir, e))?;
    let mut command = Command::new(target.helper);
    command
        .arg("exec")
        .arg("--container-dir")
        .arg(dir)
        .arg("--result-file")
        .arg(result_file.path());
    Ok((command, result_file, program))
}

/// How the command ended, from the helper's result (`None`: none readable); `no_result`
/// makes the error for a missing result from the action (`exec "p" in container …`).
fn exit_status(
    outcome: Option<HelperOutcome>,
    what: &str,
    program: &str,
    no_result: impl FnOnce(String) -> Error,
) -> Result<ExitStatus> {
    let action = || format!("exec {program:?} in {what}");
    match outcome {
        Some(HelperOutcome::Finished(status)) => Ok(status),
        Some(HelperOutcome::CannotExecute { command, reason }) => Err(Error::CannotExecute {
            container: what.to_string(),
            command,
            reason,
        }),
        Some(HelperOutcome::NotRunning) => Err(Error::NotRunning {
            what: what.to_string(),
        }),
        Some(HelperOutcome::Failed { message }) => Err(Error::Helper {
            action: action(),
            message,
        }),
        Some(HelperOutcome::Started(_)) | None => Err(no_result(action())),
    }
}

/// Runs `argv` in `target` and returns its exit status and output. Dropping the future kills
/// the command.
pub(crate) async fn run(target: ExecTarget<'_>, argv: &[String]) -> Result<ExecOutput> {
    let (mut command, result_file, program) = helper_command(&target, argv)?;
    let output = command
        .arg("--")
        .args(argv)
        .env_clear()
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| Error::io("running", target.helper, e))?;
    let result = std::fs::read(result_file.path())
        .map_err(|e| Error::io("reading", result_file.path(), e))?;
    let outcome = serde_json::from_slice::<HelperOutcome>(&result).ok();
    let status = exit_status(outcome, &target.what, &program, |action| {
        Error::helper_failed(action, &output.stderr, output.status)
    })?;
    Ok(ExecOutput {
        status,
        stdout: output.stdout,
        stderr: output.stderr,
    })
}

/// A boxed reader of a command's output.
pub type OutputStream = std::pin::Pin<Box<dyn AsyncRead + Send>>;
/// A boxed writer to a command's input.
pub type InputStream = std::pin::Pin<Box<dyn AsyncWrite + Send>>;

/// A command running in a container with its streams (see
/// [`Container::exec_session`](super::Container::exec_session)). Dropping it kills the
/// command and its process group.
pub struct ExecSession {
    child: Child,
    result_file: tempfile::NamedTempFile,
    what: String,
    program: String,
    terminal: Option<Arc<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>>>,
    stdin: Option<InputStream>,
    stdout: Option<OutputStream>,
    stderr: Option<OutputStream>,
}

impl std::fmt::Debug for ExecSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecSession")
            .field("what", &self.what)
            .field("program", &self.program)
            .field("terminal", &self.terminal.is_some())
            .finish_non_exhaustive()
    }
}

impl ExecSession {
    /// Starts `argv` in `target` with its standard input and output given to the caller:
    /// pipes (stdout and stderr apart), or with `terminal` a terminal of that size (one
    /// stream, stdin and output, as a TTY's; no stderr). The command leads a session of its
    /// own: [`ExecSession::terminate`] (and dropping the session) kills it with everything
    /// it started in its process group.
    pub(crate) async fn start(
        target: ExecTarget<'_>,
        argv: &[String],
        terminal: Option<TerminalSize>,
    ) -> Result<ExecSession> {
        let (mut command, result_file, program) = helper_command(&target, argv)?;
        let (dir, helper) = (target.container_dir, target.helper);
        command.arg("--session");
        if terminal.is_some() {
            command.arg("--tty");
        }
        command
            .arg("--")
            .args(argv)
            .env_clear()
            // Not killed on drop: SIGTERM lets the helper kill the command's process group
            // (see `Drop`), which SIGKILL would leave running.
            .process_group(0);
        let Some(size) = terminal else {
            let mut child = command
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| Error::io("running", helper, e))?;
            return Ok(ExecSession {
                stdin: child.stdin.take().map(|s| Box::pin(s) as InputStream),
                stdout: child.stdout.take().map(|s| Box::pin(s) as OutputStream),
                stderr: child.stderr.take().map(|s| Box::pin(s) as OutputStream),
                child,
                result_file,
                what: target.what,
                program,
                terminal: None,
            });
        };
        let pty = nix::pty::openpty(None, None)
            .map_err(|e| Error::io("opening a terminal for", dir, e.into()))?;
        set_size(&pty.master, size).map_err(|e| Error::io("sizing the terminal of", dir, e))?;
        let slave = |what| {
            pty.slave
                .try_clone()
                .map(Stdio::from)
                .map_err(|e| Error::io(what, dir, e))
        };
        command
            .stdin(slave("sharing the terminal with")?)
            .stdout(slave("sharing the terminal with")?)
            .stderr(slave("sharing the terminal with")?);
        let child = command
            .spawn()
            .map_err(|e| Error::io("running", helper, e))?;
        drop(pty.slave);
        let master =
            nonblocking(pty.master).map_err(|e| Error::io("watching the terminal of", dir, e))?;
        let master = Arc::new(master);
        Ok(ExecSession {
            child,
            result_file,
            what: target.what,
            program,
            stdin: Some(Box::pin(Terminal(master.clone()))),
            stdout: Some(Box::pin(Terminal(master.clone()))),
            stderr: None,
            terminal: Some(master),
        })
    }

    /// The command's standard input (once; the terminal with a TTY). Dropping it closes the
    /// input (for pipes).
    pub fn take_stdin(&mut self) -> Option<InputStream> {
        self.stdin.take()
    }

    /// Its standard output (once; the terminal with a TTY, which reports an error instead
    /// of the end once every process left it).
    pub fn take_stdout(&mut self) -> Option<OutputStream> {
        self.stdout.take()
    }

    /// Its standard error (once; none with a TTY).
    pub fn take_stderr(&mut self) -> Option<OutputStream> {
        self.stderr.take()
    }

    /// Whether it runs on a terminal.
    pub fn has_terminal(&self) -> bool {
        self.terminal.is_some()
    }

    /// Resizes the terminal (nothing without one).
    pub fn resize(&self, size: TerminalSize) -> Result<()> {
        match &self.terminal {
            Some(terminal) => set_size(terminal.get_ref(), size)
                .map_err(|e| Error::io("resizing the terminal of", self.what.clone(), e)),
            None => Ok(()),
        }
    }

    /// Kills the command and its process group (it then ends: see [`ExecSession::wait`]).
    pub fn terminate(&self) {
        if let Some(pid) = self.child.id() {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), Signal::SIGTERM);
        }
    }

    /// Waits until the command has ended and returns how; an error when it could not start
    /// ([`Error::CannotExecute`], [`Error::NotRunning`]).
    pub async fn wait(&mut self) -> Result<ExitStatus> {
        let status = self
            .child
            .wait()
            .await
            .map_err(|e| Error::io("waiting for", self.what.clone(), e))?;
        let outcome = read_json::<HelperOutcome>(self.result_file.path())
            .ok()
            .flatten();
        exit_status(outcome, &self.what, &self.program, |action| Error::Helper {
            action,
            message: format!("the helper ended ({status}) without a result"),
        })
    }
}

impl Drop for ExecSession {
    fn drop(&mut self) {
        if self.child.id().is_some() {
            self.terminate();
        }
    }
}
