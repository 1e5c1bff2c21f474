//! `init` and `pause`: creating a sandbox and being its PID 1.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::RawFd;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use nix::errno::Errno;
use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use pod_runtime::layout::{SandboxDir, SandboxState, read_required_json, write_json};
use pod_runtime::{ProcessId, SandboxSpec};

use crate::{inherited_fd, rootfs};

/// The line PID 1 prints once the sandbox's root is ready (and it is in it).
const READY: &str = "ready";

/// Creates the sandbox: new UTS and PID namespaces (this process stays in the host's mount
/// namespace, where the sandbox's files are), the hostname, and PID 1, which makes the mount
/// namespace and the root ([`pause`]); records and prints its state once PID 1 is ready.
pub fn init(dir: &Path, lifeline_fd: Option<RawFd>) -> anyhow::Result<()> {
    let dir = SandboxDir(dir.to_path_buf());
    let spec: SandboxSpec = read_required_json(&dir.spec())?;
    unshare(CloneFlags::CLONE_NEWUTS | CloneFlags::CLONE_NEWPID).map_err(|e| match e {
        Errno::EPERM => anyhow::anyhow!(
            "unshare(UTS, PID namespaces) refused (EPERM): root or CAP_SYS_ADMIN is needed; as \
             a normal user run inside `unshare --user --map-root-user --mount`"
        ),
        e => anyhow::anyhow!("unshare(UTS, PID namespaces) failed: {e}"),
    })?;
    nix::unistd::sethostname(&spec.hostname)
        .with_context(|| format!("setting the hostname to {:?}", spec.hostname))?;

    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.log())
        .with_context(|| format!("opening {:?}", dir.log()))?;
    let exe = std::env::current_exe().context("locating the pod-sandbox binary")?;
    let mut pause = Command::new(&exe);
    pause.arg("pause").arg("--dir").arg(&dir.0);
    if let Some(fd) = lifeline_fd {
        pause.arg("--lifeline-fd").arg(fd.to_string());
    }
    // The first child after unshare(CLONE_NEWPID) is PID 1 of the new namespace.
    let mut child = pause
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .context("starting the sandbox's PID 1")?;
    let stdout = child.stdout.take().context("no pipe from PID 1")?;
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .context("reading from PID 1")?;
    if line.trim() != READY {
        let status = child.wait().context("waiting for PID 1")?;
        let log = std::fs::read_to_string(dir.log()).unwrap_or_default();
        bail!(
            "the sandbox's PID 1 did not start ({status}): {}",
            log.trim()
        );
    }
    let pause = ProcessId::including_zombie(child.id() as i32)
        .context("PID 1 vanished right after starting")?;
    let state = SandboxState { pause };
    write_json(&dir.state(), &state)?;
    println!("{}", serde_json::to_string(&state)?);
    // Exiting leaves PID 1 running, re-parented: the sandbox does not depend on this process.
    Ok(())
}

/// PID 1 of a sandbox: makes the sandbox's mount namespace (private: nothing propagates to
/// the host) and its root, pivots into it so the namespace holds none of the host's mounts,
/// then reaps orphans until the lifeline breaks.
pub fn pause(dir: &Path, lifeline_fd: Option<RawFd>) -> anyhow::Result<()> {
    let dir = SandboxDir(dir.to_path_buf());
    let spec: SandboxSpec = read_required_json(&dir.spec())?;
    unshare(CloneFlags::CLONE_NEWNS).map_err(|e| match e {
        Errno::EPERM => anyhow::anyhow!(
            "unshare(mount namespace) refused (EPERM): root or CAP_SYS_ADMIN is needed; as a \
             normal user run inside `unshare --user --map-root-user --mount`"
        ),
        e => anyhow::anyhow!("unshare(mount namespace) failed: {e}"),
    })?;
    // First of all: nothing mounted from now on may propagate back to the host.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .context("making the sandbox's mounts private")?;
    rootfs::build(&dir, &spec)?;
    rootfs::pivot_into(&dir.rootfs())?;
    let mut sigchld = SigSet::empty();
    sigchld.add(Signal::SIGCHLD);
    // Blocked before the lifeline thread starts, so it inherits the mask and sigwait below
    // gets every SIGCHLD.
    sigchld.thread_block().context("blocking SIGCHLD")?;
    if let Some(fd) = lifeline_fd {
        let mut lifeline = inherited_fd(fd)?;
        std::thread::spawn(move || {
            let mut buf = [0u8; 64];
            // Returns 0 (end of file) once every write end is closed: the run owner is gone.
            while matches!(lifeline.read(&mut buf), Ok(n) if n > 0) {}
            // Exiting as PID 1 makes the kernel kill every process of the sandbox.
            std::process::exit(0);
        });
    }
    let mut stdout = std::io::stdout();
    writeln!(stdout, "{READY}").and_then(|()| stdout.flush())?;
    // Let go of the pipe to `init`, which exits now.
    let null = std::fs::File::open("/dev/null").context("opening /dev/null")?;
    nix::unistd::dup2_stdout(null).context("redirecting stdout")?;
    loop {
        sigchld.wait().context("waiting for SIGCHLD")?;
        // Reap every orphan re-parented to us.
        loop {
            match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) | Err(Errno::ECHILD) => break,
                Ok(_) | Err(Errno::EINTR) => {}
                Err(e) => {
                    eprintln!("pod-sandbox pause: waitpid failed: {e}");
                    break;
                }
            }
        }
    }
}
