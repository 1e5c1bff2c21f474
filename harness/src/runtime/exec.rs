//! Streamed exec into a running container ([`Container::exec_session`]): the command's
//! standard streams (pipes, or a terminal) handed to the caller, terminal resizes, and an end
//! that kills the whole command (its process group) when the caller gives up, as the kubelet
//! API's exec and attach need.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::process::Stdio;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use nix::sys::signal::Signal;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::process::{Child, Command};

use super::container::Container;
use super::error::{Error, Result};
use super::layout::{HelperOutcome, read_json};
use super::process::ExitStatus;

/// A terminal's size in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
pub struct TerminalSize {
    /// Columns.
    #[serde(rename = "Width")]
    pub width: u16,
    /// Rows.
    #[serde(rename = "Height")]
    pub height: u16,
}

/// A boxed reader of a command's output.
pub type OutputStream = Pin<Box<dyn AsyncRead + Send>>;
/// A boxed writer to a command's input.
pub type InputStream = Pin<Box<dyn AsyncWrite + Send>>;

/// A command running in a container with its streams (see [`Container::exec_session`]).
/// Dropping it kills the command and its process group.
pub struct ExecSession {
    child: Child,
    result_file: tempfile::NamedTempFile,
    what: String,
    program: String,
    terminal: Option<Arc<AsyncFd<OwnedFd>>>,
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

impl Container {
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
        let what = format!(
            "container {:?} of sandbox {:?}",
            self.name(),
            self.sandbox_id()
        );
        let Some(program) = argv.first().cloned() else {
            return Err(Error::invalid(format!("exec in {what}"), "argv is empty"));
        };
        let dir = self.dir().to_path_buf();
        let result_file = tempfile::Builder::new()
            .prefix("exec-")
            .suffix(".json")
            .tempfile_in(&dir)
            .map_err(|e| Error::io("creating a temporary file in", &dir, e))?;
        let helper = self.helper().to_path_buf();
        let mut command = Command::new(&helper);
        command
            .arg("exec")
            .arg("--container-dir")
            .arg(&dir)
            .arg("--result-file")
            .arg(result_file.path())
            .arg("--session");
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
        let mut session = ExecSession {
            child: match terminal {
                Some(size) => {
                    let pty = nix::pty::openpty(None, None)
                        .map_err(|e| Error::io("opening a terminal for", &dir, e.into()))?;
                    set_size(&pty.master, size)
                        .map_err(|e| Error::io("sizing the terminal of", &dir, e))?;
                    let slave = |what| {
                        pty.slave
                            .try_clone()
                            .map(Stdio::from)
                            .map_err(|e| Error::io(what, &dir, e))
                    };
                    command
                        .stdin(slave("sharing the terminal with")?)
                        .stdout(slave("sharing the terminal with")?)
                        .stderr(slave("sharing the terminal with")?);
                    let child = command
                        .spawn()
                        .map_err(|e| Error::io("running", &helper, e))?;
                    drop(pty.slave);
                    let master = nonblocking(pty.master)
                        .map_err(|e| Error::io("watching the terminal of", &dir, e))?;
                    let master = Arc::new(master);
                    let session_terminal = master.clone();
                    return Ok(ExecSession {
                        child,
                        result_file,
                        what,
                        program,
                        stdin: Some(Box::pin(Terminal(master.clone()))),
                        stdout: Some(Box::pin(Terminal(master))),
                        stderr: None,
                        terminal: Some(session_terminal),
                    });
                }
                None => command
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .map_err(|e| Error::io("running", &helper, e))?,
            },
            result_file,
            what,
            program,
            terminal: None,
            stdin: None,
            stdout: None,
            stderr: None,
        };
        session.stdin = session
            .child
            .stdin
            .take()
            .map(|s| Box::pin(s) as InputStream);
        session.stdout = session
            .child
            .stdout
            .take()
            .map(|s| Box::pin(s) as OutputStream);
        session.stderr = session
            .child
            .stderr
            .take()
            .map(|s| Box::pin(s) as OutputStream);
        Ok(session)
    }
}

impl ExecSession {
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
        let action = || format!("exec {:?} in {}", self.program, self.what);
        match read_json::<HelperOutcome>(self.result_file.path()) {
            Ok(Some(HelperOutcome::Finished(status))) => Ok(status),
            Ok(Some(HelperOutcome::CannotExecute { command, reason })) => {
                Err(Error::CannotExecute {
                    container: self.what.clone(),
                    command,
                    reason,
                })
            }
            Ok(Some(HelperOutcome::NotRunning)) => Err(Error::NotRunning {
                what: self.what.clone(),
            }),
            Ok(Some(HelperOutcome::Failed { message })) => Err(Error::Helper {
                action: action(),
                message,
            }),
            Ok(Some(HelperOutcome::Started(_)) | None) | Err(_) => Err(Error::Helper {
                action: action(),
                message: format!("the helper ended ({status}) without a result"),
            }),
        }
    }
}

impl Drop for ExecSession {
    fn drop(&mut self) {
        if self.child.id().is_some() {
            self.terminate();
        }
    }
}

pub(crate) fn set_size(fd: impl AsFd, size: TerminalSize) -> io::Result<()> {
    let winsize = rustix::termios::Winsize {
        ws_row: size.height,
        ws_col: size.width,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    rustix::termios::tcsetwinsize(fd, winsize).map_err(io::Error::from)
}

fn nonblocking(fd: OwnedFd) -> io::Result<AsyncFd<OwnedFd>> {
    let flags = rustix::fs::fcntl_getfl(&fd)?;
    rustix::fs::fcntl_setfl(&fd, flags | rustix::fs::OFlags::NONBLOCK)?;
    #[allow(unsafe_code)]
    // SAFETY: the AsyncFd owns the OwnedFd, so the descriptor stays open and names the same
    // terminal for the AsyncFd's whole lifetime.
    unsafe {
        AsyncFd::register_with_interest(
            fd,
            tokio::io::Interest::READABLE | tokio::io::Interest::WRITABLE,
        )
    }
    .map_err(|e| e.into())
}

/// A terminal's master side as a stream: what the command writes is read, what is written
/// is its input. Once every process closed the terminal, reads end (the kernel's `EIO`).
struct Terminal(Arc<AsyncFd<OwnedFd>>);

impl AsyncRead for Terminal {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut guard = ready!(self.0.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            match guard.try_io(|fd| {
                rustix::io::read(fd.get_ref(), &mut *unfilled).map_err(io::Error::from)
            }) {
                Ok(Ok(n)) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                // The other side is closed: the end of the output.
                Ok(Err(e)) if e.raw_os_error() == Some(nix::libc::EIO) => {
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                Err(_would_block) => continue,
            }
        }
    }
}

impl AsyncWrite for Terminal {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            let mut guard = ready!(self.0.poll_write_ready(cx))?;
            match guard.try_io(|fd| rustix::io::write(fd.get_ref(), data).map_err(io::Error::from))
            {
                Ok(result) => return Poll::Ready(result),
                Err(_would_block) => continue,
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
