//! Processes identified by pid *and* start time, so a recycled pid is never mistaken for ours;
//! waiting for their exit with a pidfd (also for processes that are not our children) and
//! signalling them without a pid-reuse race.

use std::os::fd::OwnedFd;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use super::error::{Error, Result};

/// A process: its pid (in the runtime's PID namespace) and its start time in clock ticks since
/// boot (field 22 of `/proc/<pid>/stat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessId {
    /// The pid.
    pub pid: i32,
    /// The start time, guarding against pid reuse.
    pub start_time: u64,
}

/// How a container's process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExitStatus {
    /// It exited with this code.
    Exited(i32),
    /// It was killed by this signal number.
    Signaled(i32),
    /// It is gone but its status was lost (its monitor process was killed).
    Unknown,
}

impl ExitStatus {
    /// The exit code as Kubernetes reports it: the code, or 128 + signal number, or 255 when
    /// unknown.
    pub fn code(self) -> i32 {
        match self {
            ExitStatus::Exited(code) => code,
            ExitStatus::Signaled(signal) => 128 + signal,
            ExitStatus::Unknown => 255,
        }
    }

    /// Whether it exited with code 0.
    pub fn success(self) -> bool {
        self == ExitStatus::Exited(0)
    }

    /// From a std wait status.
    pub fn from_std(status: std::process::ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(code), _) => ExitStatus::Exited(code),
            (None, Some(signal)) => ExitStatus::Signaled(signal),
            (None, None) => ExitStatus::Unknown,
        }
    }
}

impl ProcessId {
    /// The process with this pid as it is now, or `None` when there is none (or a zombie).
    pub fn of(pid: i32) -> Option<Self> {
        let (state, start_time) = read_stat(pid)?;
        (state != 'Z').then_some(ProcessId { pid, start_time })
    }

    /// The process with this pid, zombies included (a parent can identify a child that exited
    /// before it looked).
    pub fn including_zombie(pid: i32) -> Option<Self> {
        let (_, start_time) = read_stat(pid)?;
        Some(ProcessId { pid, start_time })
    }

    /// Whether this very process is still running (not exited, not a zombie).
    pub fn is_alive(&self) -> bool {
        ProcessId::of(self.pid).is_some_and(|now| now.start_time == self.start_time)
    }

    /// A pidfd for this process, or `None` when it is gone (or the pid now names another
    /// process).
    fn pidfd(&self) -> Result<Option<OwnedFd>> {
        let Some(pid) = rustix::process::Pid::from_raw(self.pid) else {
            return Ok(None);
        };
        let fd = match rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::SRCH) => return Ok(None),
            Err(e) => {
                return Err(Error::io("opening a pidfd for", self.proc_path(), e.into()));
            }
        };
        // Checked after opening: the fd pins the process, so the pid cannot be reused between
        // this check and its use.
        Ok(read_stat(self.pid)
            .is_some_and(|(_, start)| start == self.start_time)
            .then_some(fd))
    }

    /// Sends `signal`; `Ok(false)` when the process is already gone.
    pub fn signal(&self, signal: nix::sys::signal::Signal) -> Result<bool> {
        let Some(fd) = self.pidfd()? else {
            return Ok(false);
        };
        let Some(signal) = rustix::process::Signal::from_named_raw(signal as i32) else {
            return Err(Error::invalid(
                format!("signal {signal}"),
                "not deliverable by pidfd",
            ));
        };
        match rustix::process::pidfd_send_signal(&fd, signal) {
            Ok(()) => Ok(true),
            Err(rustix::io::Errno::SRCH) => Ok(false),
            Err(e) => Err(Error::io("signalling", self.proc_path(), e.into())),
        }
    }

    /// Waits until the process has exited (returns at once when it already has).
    pub async fn exited(&self) -> Result<()> {
        let Some(fd) = self.pidfd()? else {
            return Ok(());
        };
        let fd = watch(fd).map_err(|e| Error::io("watching", self.proc_path(), e))?;
        // A pidfd turns readable when the process exits (zombies included).
        let _ready = fd
            .readable()
            .await
            .map_err(|e| Error::io("watching", self.proc_path(), e))?;
        Ok(())
    }

    fn proc_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/{}", self.pid))
    }
}

/// Registers a pidfd with tokio's reactor.
#[allow(unsafe_code)]
fn watch(fd: OwnedFd) -> std::io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: the AsyncFd owns the OwnedFd, so the descriptor stays open and names the same
    // pidfd for the AsyncFd's whole lifetime.
    unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }.map_err(|e| e.into())
}

/// State letter and start time of a pid, from `/proc/<pid>/stat`.
fn read_stat(pid: i32) -> Option<(char, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces and parentheses: parse after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    // After the state (field 3), the start time is field 22: 19 fields further.
    let start_time = fields.nth(18)?.parse().ok()?;
    Some((state, start_time))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn own_process_is_alive_and_a_changed_start_time_is_not() {
        let me = ProcessId::of(std::process::id() as i32).unwrap();
        assert!(me.is_alive());
        let impostor = ProcessId {
            start_time: me.start_time + 1,
            ..me
        };
        assert!(!impostor.is_alive());
    }

    #[test]
    fn kubernetes_exit_codes() {
        assert_eq!(ExitStatus::Exited(3).code(), 3);
        assert_eq!(ExitStatus::Signaled(9).code(), 137);
    }
}
