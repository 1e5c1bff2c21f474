//! One component's process: started with its output in a log file, recorded in the run
//! directory, tied to the harness's life, and stopped with SIGTERM then SIGKILL
//! ([`LoggedChild`], also used for the cluster's node agents).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use kube_support::error::IoContext;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

use super::error::{Error, Result};
use super::run_dir::RunDir;

/// A started child process: stdin closed, stdout and stderr appended to a log file,
/// recorded in the run directory, killed on drop and when the harness dies (see
/// [`die_with_parent`]), stopped with SIGTERM then SIGKILL. The control-plane components and
/// the cluster's node agents are both run this way; each maps failures into its own error.
#[derive(Debug)]
pub struct LoggedChild {
    name: String,
    child: Child,
    pid: u32,
    log: PathBuf,
}

impl LoggedChild {
    /// Starts `command` with its output appended to `log`, and records it in `run_dir` as
    /// `name`. `spawn_error` maps the failure to start the binary.
    pub fn spawn<E>(
        name: impl Into<String>,
        mut command: Command,
        log: PathBuf,
        run_dir: &RunDir,
        spawn_error: impl FnOnce(std::io::Error) -> E,
    ) -> std::result::Result<Self, E>
    where
        E: IoContext + From<Error>,
    {
        let name = name.into();
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(E::io("opening", &log))?;
        let err = out.try_clone().map_err(E::io("duplicating", &log))?;
        command
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true);
        die_with_parent(&mut command);
        let child = command.spawn().map_err(spawn_error)?;
        let pid = child.id().unwrap_or_default();
        run_dir.record_process(&name, pid)?;
        tracing::debug!(process = %name, pid, log = %log.display(), "started");
        Ok(Self {
            name,
            child,
            pid,
            log,
        })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The log file its output goes to.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// How the process ended, or `None` while it runs.
    pub fn exit_status(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(None) => None,
            Ok(Some(status)) => Some(status.to_string()),
            Err(e) => Some(format!("unknown: {e}")),
        }
    }

    /// SIGKILLs the process and reaps it, waiting at most `limit` (for drop paths, where
    /// nothing can be awaited). Returns whether it has ended.
    pub fn kill_and_reap(&mut self, limit: Duration) -> bool {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return true;
        }
        let _ = self.child.start_kill();
        let deadline = std::time::Instant::now() + limit;
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) | Err(_) => return true,
                Ok(None) if std::time::Instant::now() >= deadline => return false,
                // SIGKILL was sent: the kernel ends the process within moments; poll its exit.
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    }

    /// Sends SIGTERM, waits up to `grace` for the process to end, then SIGKILLs it.
    /// `signal_error` maps a failure to send SIGTERM.
    pub async fn stop<E: IoContext>(
        &mut self,
        grace: Duration,
        signal_error: impl FnOnce(nix::Error) -> E,
    ) -> std::result::Result<(), E> {
        if self.child.try_wait().ok().flatten().is_some() {
            return Ok(());
        }
        match kill(Pid::from_raw(self.pid as i32), Signal::SIGTERM) {
            Ok(()) | Err(nix::errno::Errno::ESRCH) => {}
            Err(source) => return Err(signal_error(source)),
        }
        if tokio::time::timeout(grace, self.child.wait()).await.is_ok() {
            return Ok(());
        }
        tracing::warn!(
            process = %self.name,
            ?grace,
            "did not stop after SIGTERM; sending SIGKILL"
        );
        self.child.kill().await.map_err(E::io("killing", &self.log))
    }
}

/// A running component.
#[derive(Debug)]
pub(crate) struct ComponentProcess {
    name: &'static str,
    process: LoggedChild,
}

impl ComponentProcess {
    /// Starts `binary` with `args` in the run directory, its output in `<logs>/<name>.log`.
    ///
    /// The child gets SIGKILL when the thread that started it ends (`PR_SET_PDEATHSIG`;
    /// for the harness that is when its runtime or process ends), so a dead harness leaves
    /// no component behind.
    pub(crate) fn spawn(
        name: &'static str,
        binary: &Path,
        args: Vec<OsString>,
        run_dir: &RunDir,
        logs: &Path,
    ) -> Result<Self> {
        let mut command = Command::new(binary);
        command.args(args).current_dir(run_dir.path());
        let log = logs.join(format!("{name}.log"));
        let process = LoggedChild::spawn(name, command, log, run_dir, |source| Error::Spawn {
            component: name,
            binary: binary.to_path_buf(),
            source,
        })?;
        Ok(Self { name, process })
    }

    pub(crate) fn name(&self) -> &'static str {
        self.name
    }

    pub(crate) fn pid(&self) -> u32 {
        self.process.pid()
    }

    pub(crate) fn log(&self) -> &Path {
        self.process.log()
    }

    /// `Err(Exited)` if the process has ended.
    pub(crate) fn check_running(&mut self) -> Result<()> {
        match self.process.exit_status() {
            None => Ok(()),
            Some(status) => Err(Error::Exited {
                component: self.name,
                status,
                log: self.log().to_path_buf(),
                log_tail: log_tail(self.log()),
            }),
        }
    }

    /// SIGKILLs the process and reaps it (see [`LoggedChild::kill_and_reap`]).
    pub(crate) fn kill_and_reap(&mut self, limit: Duration) -> bool {
        self.process.kill_and_reap(limit)
    }

    /// Sends SIGTERM, waits up to `grace` for the process to end, then SIGKILLs it.
    pub(crate) async fn stop(&mut self, grace: Duration) -> Result<()> {
        let (component, pid) = (self.name, self.pid());
        self.process
            .stop(grace, |source| Error::Signal {
                component: component.to_string(),
                pid: pid as i32,
                source,
            })
            .await
    }
}

/// Sets `PR_SET_PDEATHSIG` in the child, and makes the child give up if the harness is
/// already gone by the time it runs (the signal is only delivered for deaths after `prctl`).
pub(crate) fn die_with_parent(command: &mut Command) {
    let parent = nix::unistd::getpid();
    #[allow(unsafe_code)]
    // SAFETY: the closure runs in the forked child before exec. It only makes the
    // async-signal-safe system calls prctl(2) and getppid(2), takes no locks and does not
    // allocate (errors are raw OS errors).
    unsafe {
        command.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
            if nix::unistd::getppid() != parent {
                return Err(nix::errno::Errno::ESRCH.into());
            }
            Ok(())
        });
    }
}

/// The last lines of a log, for error messages.
pub fn log_tail(log: &Path) -> String {
    const LINES: usize = 25;
    match std::fs::read(log) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(LINES)..].join("\n")
        }
        Err(e) => format!("<log unreadable: {e}>"),
    }
}
