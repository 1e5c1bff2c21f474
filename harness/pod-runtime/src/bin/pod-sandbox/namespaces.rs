//! `run`, `exec` and `enter`: processes inside a sandbox's namespaces.
//!
//! `run` (the monitor) and `exec` join the sandbox's (or container's) UTS and PID namespaces
//! but stay in the host's mount namespace, where the run directory is; the `enter` child they
//! start joins the mount namespace last, whose root is the sandbox's root (see `pause`), so
//! the command finds itself at that root with none of the host's mounts.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, anyhow};
use nix::fcntl::{FcntlArg, FdFlag, OFlag, fcntl};
use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, setns, unshare};
use nix::sys::signal::Signal;
use nix::unistd::{Gid, Uid};
use pod_runtime::layout::{
    ContainerDir, ContainerState, HelperOutcome, SandboxDir, SandboxState, read_required_json,
    write_json,
};
use pod_runtime::{ContainerSpec, ExitStatus, ProcessId, SandboxSpec};

use crate::{inherited_fd, rootfs};

/// A failure to report as a [`HelperOutcome`].
type Outcome<T> = Result<T, HelperOutcome>;

fn failed(e: anyhow::Error) -> HelperOutcome {
    HelperOutcome::Failed {
        message: format!("{e:#}"),
    }
}

/// What `enter` writes to the status pipe when the command does not run: one of these kinds on
/// the first line, then the message. It writes nothing when the exec succeeds.
const CANNOT_EXECUTE: &str = "cannot-execute";
/// Setting up the container's mount namespace failed (not the command's fault).
const SETUP_FAILED: &str = "setup-failed";

/// Everything needed to start a process in a container.
struct Target {
    spec: ContainerSpec,
    sandbox_spec: SandboxSpec,
    sandbox: SandboxDir,
}

impl Target {
    fn load(dir: &ContainerDir) -> anyhow::Result<Self> {
        let sandbox = dir
            .sandbox()
            .with_context(|| format!("{:?} is not a container directory", dir.0))?;
        Ok(Target {
            spec: read_required_json(&dir.spec())?,
            sandbox_spec: read_required_json(&sandbox.spec())?,
            sandbox,
        })
    }

    /// `pod-sandbox enter …` for `argv`, with the container's environment: it joins
    /// `mount_ns` (and with `mounts_of`, makes a namespace of its own with that container's
    /// mounts); `status` is the write end of the exec-status pipe.
    fn enter_command(
        &self,
        argv: &[String],
        mount_ns: &OwnedFd,
        mounts_of: Option<&ContainerDir>,
        status: &OwnedFd,
        session: Session,
    ) -> anyhow::Result<Command> {
        let exe = std::env::current_exe().context("locating the pod-sandbox binary")?;
        let mut command = Command::new(exe);
        command
            .arg("enter")
            .arg("--mount-ns-fd")
            .arg(mount_ns.as_raw_fd().to_string())
            .arg("--status-fd")
            .arg(status.as_raw_fd().to_string());
        if let Some(dir) = mounts_of {
            command.arg("--mounts-of").arg(&dir.0);
        }
        if let Some(dir) = &self.spec.working_dir {
            command.arg("--workdir").arg(dir);
        }
        if let Some(user) = self.spec.user {
            command
                .arg("--uid")
                .arg(user.uid.to_string())
                .arg("--gid")
                .arg(user.gid.to_string());
        }
        for group in &self.spec.supplementary_groups {
            command.arg("--group").arg(group.to_string());
        }
        match session {
            Session::Inherited => {}
            Session::Own => {
                command.arg("--session");
            }
            Session::Terminal => {
                command.arg("--session").arg("--tty");
            }
        }
        command
            .arg("--")
            .args(argv)
            .env_clear()
            .envs(self.spec.effective_env(&self.sandbox_spec.hostname));
        Ok(command)
    }
}

/// Whether a command gets a session of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Session {
    /// The caller's (a container's main process, a one-off exec).
    Inherited,
    /// Its own, so its whole process group can be killed.
    Own,
    /// Its own, with standard input as its controlling terminal.
    Terminal,
}

/// Joins the UTS and PID (for children) namespaces of `process` and returns its mount
/// namespace, open and inheritable, for `enter` to join: this process stays in the host's.
fn join_namespaces(process: ProcessId) -> anyhow::Result<OwnedFd> {
    let open = |ns: &str| {
        File::open(format!("/proc/{}/ns/{ns}", process.pid))
            .with_context(|| format!("opening the {ns} namespace of process {}", process.pid))
    };
    let (uts, pid, mnt) = (open("uts")?, open("pid")?, open("mnt")?);
    if !process.is_alive() {
        anyhow::bail!("process {} exited", process.pid);
    }
    setns(uts, CloneFlags::CLONE_NEWUTS).context("joining the UTS namespace")?;
    setns(pid, CloneFlags::CLONE_NEWPID).context("joining the PID namespace")?;
    fcntl(&mnt, FcntlArg::F_SETFD(FdFlag::empty()))
        .context("making the mount namespace inheritable")?;
    Ok(OwnedFd::from(mnt))
}

/// A close-on-exec pipe whose write end is inherited by the next child (and closed by `enter`
/// on exec): end of file means the exec succeeded, otherwise it carries the error.
fn status_pipe() -> anyhow::Result<(File, OwnedFd)> {
    let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC).context("creating a pipe")?;
    fcntl(&write, FcntlArg::F_SETFD(FdFlag::empty())).context("making a pipe inheritable")?;
    Ok((File::from(read), write))
}

/// Spawns the command `build` makes for the write end of a status pipe, then learns from the
/// pipe whether its exec succeeded.
fn spawn_checked(
    build: impl FnOnce(&OwnedFd) -> anyhow::Result<Command>,
    program: &str,
) -> Outcome<Child> {
    let (mut status_read, status_write) = status_pipe().map_err(failed)?;
    let mut command = build(&status_write).map_err(failed)?;
    let spawned = command.spawn();
    drop(status_write);
    let mut child = match spawned {
        Ok(child) => child,
        // fork fails with ENOMEM in a PID namespace whose PID 1 is gone.
        Err(e) if e.raw_os_error() == Some(nix::libc::ENOMEM) => {
            return Err(HelperOutcome::NotRunning);
        }
        Err(e) => return Err(failed(anyhow!(e).context("starting pod-sandbox enter"))),
    };
    let mut message = String::new();
    let _ = status_read.read_to_string(&mut message);
    if message.is_empty() {
        return Ok(child);
    }
    let _ = child.wait();
    Err(match message.split_once('\n') {
        Some((SETUP_FAILED, message)) => HelperOutcome::Failed {
            message: message.to_string(),
        },
        Some((CANNOT_EXECUTE, reason)) => HelperOutcome::CannotExecute {
            command: program.to_string(),
            reason: reason.to_string(),
        },
        _ => HelperOutcome::CannotExecute {
            command: program.to_string(),
            reason: message,
        },
    })
}

/// The monitor of a container: starts it, reports on stdout, serves its input, records
/// its exit.
pub fn run(container_dir: &Path) -> anyhow::Result<()> {
    let dir = ContainerDir(container_dir.to_path_buf());
    let (state, started) = match start(&dir) {
        Ok(started) => started,
        Err(outcome) => {
            println!("{}", serde_json::to_string(&outcome)?);
            return Ok(());
        }
    };
    let Started { mut child, output } = started;
    println!("{}", serde_json::to_string(&HelperOutcome::Started(state))?);
    // The node agent stops listening now; never write to that pipe again.
    let null = File::open("/dev/null").context("opening /dev/null")?;
    nix::unistd::dup2_stdout(null).context("redirecting stdout")?;
    if let Err(e) = pump_output(output, &child, &dir) {
        eprintln!("pod-sandbox: copying the container's output: {e:#}");
    }
    let status = child.wait().context("waiting for the container")?;
    let _ = std::fs::remove_file(dir.input_socket());
    write_json(&dir.exit(), &ExitStatus::from_std(status))?;
    Ok(())
}

/// A container the monitor started: its process and the reading side of its output.
struct Started {
    child: Child,
    output: OwnedFd,
}

/// Copies the container's output (stdout and stderr, one pipe, in the order written) to
/// `output.log`, noting in `output.times` when each line began, until the container's main
/// process exits (what it wrote by then is still copied; a process it left behind that
/// writes later finds the pipe closed, as in a container that has ended).
fn pump_output(output: OwnedFd, child: &Child, dir: &ContainerDir) -> anyhow::Result<()> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let pid = rustix::process::Pid::from_raw(child.id() as i32)
        .context("the container process has no pid")?;
    let exited = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())
        .context("watching the container process")?;
    let open = |path: PathBuf| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("opening {path:?}"))
    };
    let mut log = open(dir.output_log())?;
    let mut times = std::io::BufWriter::new(open(dir.output_times())?);
    let mut offset = log.metadata().map(|m| m.len()).unwrap_or(0);
    let mut line_start = true;
    let mut buf = vec![0u8; 64 * 1024];
    let mut copy = |data: &[u8], line_start: &mut bool, offset: &mut u64| -> anyhow::Result<()> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        for (i, byte) in data.iter().enumerate() {
            if *line_start {
                writeln!(times, "{} {now}", *offset + i as u64).context("writing output.times")?;
            }
            *line_start = *byte == b'\n';
        }
        log.write_all(data).context("writing output.log")?;
        times.flush().context("writing output.times")?;
        *offset += data.len() as u64;
        Ok(())
    };
    loop {
        let mut fds = [
            PollFd::new(output.as_fd(), PollFlags::POLLIN),
            PollFd::new(exited.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e).context("waiting for output"),
        }
        let readable = fds[0].revents().unwrap_or(PollFlags::empty());
        let ended = fds[1]
            .revents()
            .is_some_and(|r| r.contains(PollFlags::POLLIN));
        if readable.intersects(PollFlags::POLLIN | PollFlags::POLLHUP) {
            match nix::unistd::read(&output, &mut buf) {
                Ok(0) => return Ok(()),
                Ok(n) => copy(&buf[..n], &mut line_start, &mut offset)?,
                Err(nix::errno::Errno::EINTR) => {}
                // A terminal whose every user closed it.
                Err(nix::errno::Errno::EIO) => return Ok(()),
                Err(e) => return Err(e).context("reading the output"),
            }
            continue;
        }
        if ended {
            // Whatever is still in the pipe, without waiting for writers it left behind.
            let flags = rustix::fs::fcntl_getfl(&output)?;
            rustix::fs::fcntl_setfl(&output, flags | rustix::fs::OFlags::NONBLOCK)?;
            loop {
                match nix::unistd::read(&output, &mut buf) {
                    Ok(0) | Err(_) => return Ok(()),
                    Ok(n) => copy(&buf[..n], &mut line_start, &mut offset)?,
                }
            }
        }
    }
}

fn start(dir: &ContainerDir) -> Outcome<(ContainerState, Started)> {
    let target = Target::load(dir).map_err(failed)?;
    let sandbox: SandboxState =
        read_required_json(&target.sandbox.state()).map_err(|e| failed(e.into()))?;
    if !sandbox.pause.is_alive() {
        return Err(HelperOutcome::NotRunning);
    }
    let mut streams = Streams::new(dir, &target.spec).map_err(failed)?;
    // Served before the start is reported, so a client can attach at once, and before the
    // PID namespace is joined: no thread can be started after that (clone refuses
    // CLONE_THREAD once the namespace for children differs from the process's own).
    if let Some(writer) = streams.input.take() {
        crate::input::serve(dir, writer, target.spec.stdin_once, target.spec.tty)
            .context("serving the container's input")
            .map_err(failed)?;
    }
    let mount_ns = join_namespaces(sandbox.pause).map_err(|_| HelperOutcome::NotRunning)?;
    let own_namespace = !target.spec.mounts.is_empty() || !target.spec.devices.is_empty();
    let mounts_of = own_namespace.then_some(dir);
    let program = target.spec.argv.first().cloned().unwrap_or_default();
    let session = if target.spec.tty {
        Session::Terminal
    } else {
        Session::Inherited
    };
    let Streams {
        stdin,
        stdout,
        stderr,
        output,
        ..
    } = streams;
    let child = spawn_checked(
        |status| {
            let mut command =
                target.enter_command(&target.spec.argv, &mount_ns, mounts_of, status, session)?;
            command.stdin(stdin).stdout(stdout).stderr(stderr);
            Ok(command)
        },
        &program,
    )?;
    drop(mount_ns);
    let process = ProcessId::including_zombie(child.id() as i32)
        .context("the container process vanished")
        .map_err(failed)?;
    let monitor = ProcessId::including_zombie(std::process::id() as i32)
        .context("reading the monitor's own start time")
        .map_err(failed)?;
    let state = ContainerState { monitor, process };
    write_json(&dir.state(), &state).map_err(|e| failed(e.into()))?;
    let started = Started { child, output };
    Ok((state, started))
}

/// The standard streams of a container's process, and the monitor's sides of them.
struct Streams {
    stdin: Stdio,
    stdout: Stdio,
    stderr: Stdio,
    /// Where the monitor reads the output (stdout and stderr together).
    output: OwnedFd,
    /// Where the monitor writes the input, when the container has one.
    input: Option<OwnedFd>,
}

impl Streams {
    /// With a terminal: all three streams are the terminal (its path recorded for resizes),
    /// the monitor holds its master. Without: stdout and stderr share one pipe, so their
    /// order is kept (the monitor copies it to the log, see `pump_output`), and stdin is a
    /// pipe when asked for, else `/dev/null`.
    fn new(dir: &ContainerDir, spec: &ContainerSpec) -> anyhow::Result<Self> {
        if spec.tty {
            let size = nix::pty::Winsize {
                ws_row: 24,
                ws_col: 80,
                ws_xpixel: 0,
                ws_ypixel: 0,
            };
            let pty = nix::pty::openpty(Some(&size), None).context("opening a terminal")?;
            let path = std::fs::read_link(format!("/proc/self/fd/{}", pty.slave.as_raw_fd()))
                .context("naming the terminal")?;
            std::fs::write(dir.terminal(), path.as_os_str().as_encoded_bytes())
                .with_context(|| format!("writing {:?}", dir.terminal()))?;
            let slave = |pty: &nix::pty::OpenptyResult| -> anyhow::Result<Stdio> {
                Ok(Stdio::from(
                    pty.slave.try_clone().context("sharing the terminal")?,
                ))
            };
            let (stdin, stdout, stderr) = (slave(&pty)?, slave(&pty)?, slave(&pty)?);
            fcntl(&pty.master, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))
                .context("marking the terminal close-on-exec")?;
            let input = spec
                .stdin
                .then(|| pty.master.try_clone())
                .transpose()
                .context("sharing the terminal")?;
            return Ok(Streams {
                stdin,
                stdout,
                stderr,
                output: pty.master,
                input,
            });
        }
        let (output, log) =
            nix::unistd::pipe2(OFlag::O_CLOEXEC).context("creating the output pipe")?;
        let log2 = log.try_clone().context("duplicating the output pipe")?;
        let (stdin, input) = if spec.stdin {
            let (read, write) =
                nix::unistd::pipe2(OFlag::O_CLOEXEC).context("creating the input pipe")?;
            (Stdio::from(read), Some(write))
        } else {
            (Stdio::null(), None)
        };
        Ok(Streams {
            stdin,
            stdout: Stdio::from(log),
            stderr: Stdio::from(log2),
            output,
            input,
        })
    }
}

/// Runs `argv` in a running container with this process's stdin/stdout/stderr; the outcome
/// goes to `result_file`. With `session`, the command leads a session (and process group) of
/// its own, which SIGTERM, SIGHUP or SIGINT to this process kill whole; with `tty`, its
/// standard input (a terminal) becomes its controlling terminal.
pub fn exec(
    container_dir: &Path,
    result_file: &Path,
    argv: &[String],
    session: bool,
    tty: bool,
) -> anyhow::Result<()> {
    let session = match (session, tty) {
        (false, _) => Session::Inherited,
        (true, false) => Session::Own,
        (true, true) => Session::Terminal,
    };
    let outcome = match exec_command(&ContainerDir(container_dir.to_path_buf()), argv, session) {
        Ok(status) => HelperOutcome::Finished(status),
        Err(outcome) => outcome,
    };
    write_json(result_file, &outcome)?;
    Ok(())
}

/// The process group an exec's termination signals kill (0: none yet).
static SESSION_GROUP: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn kill_session(_signal: nix::libc::c_int) {
    let group = SESSION_GROUP.load(std::sync::atomic::Ordering::SeqCst);
    if group > 0 {
        #[allow(unsafe_code)]
        // SAFETY: kill(2) is async-signal-safe; a negative pid names the process group the
        // command leads (its pid, as it called setsid).
        unsafe {
            nix::libc::kill(-group, nix::libc::SIGKILL);
        }
    }
}

/// SIGTERM, SIGHUP and SIGINT kill the command's process group (this process then records how
/// the command ended, as usual).
fn kill_session_on_signals(group: i32) -> anyhow::Result<()> {
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, sigaction};
    SESSION_GROUP.store(group, std::sync::atomic::Ordering::SeqCst);
    let action = SigAction::new(
        SigHandler::Handler(kill_session),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for signal in [Signal::SIGTERM, Signal::SIGHUP, Signal::SIGINT] {
        #[allow(unsafe_code)]
        // SAFETY: the handler only reads an atomic and calls kill(2), both async-signal-safe.
        unsafe { sigaction(signal, &action) }.with_context(|| format!("handling {signal}"))?;
    }
    Ok(())
}

fn exec_command(dir: &ContainerDir, argv: &[String], session: Session) -> Outcome<ExitStatus> {
    let target = Target::load(dir).map_err(failed)?;
    let state: ContainerState = read_required_json(&dir.state()).map_err(|e| failed(e.into()))?;
    if !state.process.is_alive() {
        return Err(HelperOutcome::NotRunning);
    }
    let mount_ns = join_namespaces(state.process).map_err(|_| HelperOutcome::NotRunning)?;
    let program = argv.first().cloned().unwrap_or_default();
    let mut child = spawn_checked(
        |status| target.enter_command(argv, &mount_ns, None, status, session),
        &program,
    )?;
    drop(mount_ns);
    if session != Session::Inherited {
        kill_session_on_signals(child.id() as i32).map_err(failed)?;
    }
    let status = child
        .wait()
        .context("waiting for the command")
        .map_err(failed)?;
    Ok(ExitStatus::from_std(status))
}

/// How `enter` gets into the container.
#[derive(Debug)]
pub struct Entry {
    /// The inherited mount namespace to join: the container's, or the sandbox's when
    /// `mounts_of` is set.
    pub mount_ns_fd: RawFd,
    /// The container directory whose mounts get a mount namespace of their own.
    pub mounts_of: Option<PathBuf>,
    /// The working directory (created when missing); `/` when unset.
    pub workdir: Option<PathBuf>,
    /// The uid and gid to run as.
    pub user: Option<(u32, u32)>,
    /// Supplementary groups besides the gid.
    pub groups: Vec<u32>,
    /// A session of its own.
    pub session: bool,
    /// Standard input as the session's controlling terminal.
    pub tty: bool,
}

/// The last step: into the container's mount namespace (whose root is the sandbox's root),
/// working directory, user, exec. Why the command does not run goes to the status pipe.
pub fn enter(entry: &Entry, status_fd: RawFd, argv: &[String]) -> anyhow::Result<()> {
    let mut status = inherited_fd(status_fd)?;
    fcntl(&status, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)).context("marking the status pipe")?;
    let report = match enter_session(entry).and_then(|()| enter_mount_namespace(entry)) {
        Err(e) => format!("{SETUP_FAILED}\n{e:#}"),
        Ok(()) => match prepare(entry.workdir.as_deref(), entry.user, &entry.groups) {
            Ok(()) => {
                let (program, args) = argv.split_first().context("no command")?;
                // Only returns on failure.
                let e = Command::new(program).args(args).exec();
                format!("{CANNOT_EXECUTE}\n{e}")
            }
            Err(e) => format!("{CANNOT_EXECUTE}\n{e:#}"),
        },
    };
    let _ = status.write_all(report.as_bytes());
    std::process::exit(127)
}

/// A session of its own (process group included), with standard input as its controlling
/// terminal when asked.
fn enter_session(entry: &Entry) -> anyhow::Result<()> {
    if !entry.session {
        return Ok(());
    }
    rustix::process::setsid().context("starting a session")?;
    if entry.tty {
        rustix::process::ioctl_tiocsctty(std::io::stdin())
            .context("making standard input the controlling terminal")?;
    }
    Ok(())
}

/// Joins the inherited mount namespace; with `mounts_of`, first clones the container's mount
/// and device sources here (the host's namespace, where their paths are), then makes a
/// namespace of the container's own (a private copy of the sandbox's) and attaches them in
/// it, devices last.
fn enter_mount_namespace(entry: &Entry) -> anyhow::Result<()> {
    let namespace = inherited_fd(entry.mount_ns_fd)?;
    let (mounts, devices) = match &entry.mounts_of {
        Some(dir) => {
            let spec: ContainerSpec = read_required_json(&ContainerDir(dir.clone()).spec())?;
            let clones = rootfs::clone_sources(&spec.mounts)?;
            let device_clones = rootfs::clone_devices(&spec.devices)?;
            (
                spec.mounts.into_iter().zip(clones).collect::<Vec<_>>(),
                spec.devices
                    .into_iter()
                    .zip(device_clones)
                    .collect::<Vec<_>>(),
            )
        }
        None => (Vec::new(), Vec::new()),
    };
    // Closes the descriptor, so the command does not inherit it.
    setns(namespace, CloneFlags::CLONE_NEWNS).context("joining the sandbox's mount namespace")?;
    if mounts.is_empty() && devices.is_empty() {
        return Ok(());
    }
    unshare(CloneFlags::CLONE_NEWNS).context("creating the container's mount namespace")?;
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .context("making the container's mounts private")?;
    for (m, clone) in mounts {
        rootfs::attach_into_root(Path::new("/"), &m, clone)?;
    }
    rootfs::attach_devices(Path::new("/"), devices)?;
    Ok(())
}

/// Working directory, user (supplementary groups: the gid, then `groups`) and parent-death
/// signal, in the container's mount namespace. Without a user, the groups are set only when
/// `groups` is not empty (a user namespace may refuse `setgroups`).
fn prepare(workdir: Option<&Path>, user: Option<(u32, u32)>, groups: &[u32]) -> anyhow::Result<()> {
    let workdir = workdir.map_or_else(|| PathBuf::from("/"), Path::to_path_buf);
    std::fs::create_dir_all(&workdir)
        .with_context(|| format!("creating the working directory {workdir:?}"))?;
    std::env::set_current_dir(&workdir)
        .with_context(|| format!("entering the working directory {workdir:?}"))?;
    let supplementary = |gid: Gid| {
        let mut all = vec![gid];
        for group in groups.iter().copied().map(Gid::from_raw) {
            if !all.contains(&group) {
                all.push(group);
            }
        }
        all
    };
    if user.is_none() && !groups.is_empty() {
        let all = supplementary(nix::unistd::getgid());
        nix::unistd::setgroups(&all)
            .with_context(|| format!("setting supplementary groups {all:?}"))?;
    }
    if let Some((uid, gid)) = user {
        let gid = Gid::from_raw(gid);
        let all = supplementary(gid);
        nix::unistd::setgroups(&all)
            .with_context(|| format!("setting supplementary groups {all:?}"))?;
        nix::unistd::setgid(gid).with_context(|| format!("setting gid {gid}"))?;
        nix::unistd::setuid(Uid::from_raw(uid)).with_context(|| format!("setting uid {uid}"))?;
    }
    // The process dies with its monitor, so it never runs unobserved (set after the user
    // change, which would clear it).
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).context("setting the parent-death signal")?;
    // The monitor is outside this PID namespace, so it appears as parent 0; anything else means
    // it died already and we were re-parented to PID 1.
    if nix::unistd::getppid().as_raw() != 0 {
        anyhow::bail!("the monitor exited before the command started");
    }
    Ok(())
}
