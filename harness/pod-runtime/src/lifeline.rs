//! The run's lifeline: a pipe whose write end only the run owner holds. Every sandbox's PID 1
//! keeps a read end and waits on it; when the owner process dies (however it dies), the kernel
//! closes the write end, the read returns end-of-file, PID 1 exits and the kernel kills every
//! process of the sandbox.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::{Arc, OnceLock};

use nix::fcntl::{FcntlArg, FdFlag, OFlag, fcntl};

use super::error::{Error, Result};

/// The environment variable that hands a lifeline's read end to a child process (e.g. a node
/// agent run as its own process), see [`Lifeline::from_env`].
pub const LIFELINE_FD_ENV: &str = "HARNESS_LIFELINE_FD";

/// The read end of a lifeline, passed to every sandbox this runtime creates.
#[derive(Debug, Clone)]
pub struct Lifeline {
    fd: RawFd,
    // Keeps the read end open when this process created it (absent when inherited).
    _read: Option<Arc<OwnedFd>>,
}

/// The write end: while it (and every copy) is open, the sandboxes live.
#[derive(Debug)]
pub struct LifelineHolder {
    _write: OwnedFd,
}

impl Lifeline {
    /// A new lifeline and its holder: dropping the holder ends every sandbox created with the
    /// lifeline. The write end is close-on-exec, so no child process keeps it alive; the read
    /// end is inherited by children (that is how sandboxes get it).
    pub fn pair() -> Result<(Lifeline, LifelineHolder)> {
        let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)
            .map_err(|e| Error::io("creating", "lifeline pipe", e.into()))?;
        fcntl(&read, FcntlArg::F_SETFD(FdFlag::empty()))
            .map_err(|e| Error::io("making inheritable", "lifeline pipe", e.into()))?;
        let lifeline = Lifeline {
            fd: read.as_raw_fd(),
            _read: Some(Arc::new(read)),
        };
        Ok((lifeline, LifelineHolder { _write: write }))
    }

    /// The lifeline of this process: sandboxes live as long as this process does. Created once;
    /// its holder lives until the process exits.
    pub fn this_process() -> Result<Lifeline> {
        static THIS_PROCESS: OnceLock<(Lifeline, LifelineHolder)> = OnceLock::new();
        if let Some((lifeline, _)) = THIS_PROCESS.get() {
            return Ok(lifeline.clone());
        }
        let pair = Lifeline::pair()?;
        Ok(THIS_PROCESS.get_or_init(|| pair).0.clone())
    }

    /// The lifeline a parent process handed down through [`LIFELINE_FD_ENV`] (see
    /// [`Lifeline::env`]); `Ok(None)` when the variable is not set.
    pub fn from_env() -> Result<Option<Lifeline>> {
        let Ok(value) = std::env::var(LIFELINE_FD_ENV) else {
            return Ok(None);
        };
        let fd: RawFd = value.parse().map_err(|_| {
            Error::invalid(
                format!("{LIFELINE_FD_ENV}={value:?}"),
                "not a file descriptor number",
            )
        })?;
        // The inherited descriptor must be an open pipe.
        let link = std::fs::read_link(format!("/proc/self/fd/{fd}")).map_err(|e| {
            Error::invalid(
                format!("{LIFELINE_FD_ENV}={value:?}"),
                format!("no such open file descriptor: {e}"),
            )
        })?;
        if !link.to_string_lossy().starts_with("pipe:") {
            return Err(Error::invalid(
                format!("{LIFELINE_FD_ENV}={value:?}"),
                format!("descriptor is {link:?}, not a pipe"),
            ));
        }
        Ok(Some(Lifeline { fd, _read: None }))
    }

    /// The environment variable that hands this lifeline to a child process (the read end is
    /// inherited across exec).
    pub fn env(&self) -> (&'static str, String) {
        (LIFELINE_FD_ENV, self.fd.to_string())
    }

    /// The descriptor number of the read end.
    pub fn raw_fd(&self) -> RawFd {
        self.fd
    }
}
