//! `run`, `exec` and `enter`: processes inside a sandbox's namespaces.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, anyhow};
use harness::runtime::layout::{
    ContainerDir, ContainerState, HelperOutcome, SandboxDir, SandboxState, read_required_json,
    write_json,
};
use harness::runtime::{ContainerSpec, ExitStatus, ProcessId, SandboxSpec};
use nix::fcntl::{FcntlArg, FdFlag, OFlag, fcntl};
use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, setns, unshare};
use nix::sys::signal::Signal;
use nix::unistd::{Gid, Uid};

use crate::{inherited_fd, rootfs};

/// A failure to report as a [`HelperOutcome`].
type Outcome<T> = Result<T, HelperOutcome>;

fn failed(e: anyhow::Error) -> HelperOutcome {
    HelperOutcome::Failed {
        message: format!("{e:#}"),
    }
}

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

    /// `pod-sandbox enter …` for `argv`, with the container's environment; `status` is the
    /// write end of the exec-status pipe.
    fn enter_command(&self, argv: &[String], status: &OwnedFd) -> anyhow::Result<Command> {
        let exe = std::env::current_exe().context("locating the pod-sandbox binary")?;
        let mut command = Command::new(exe);
        command
            .arg("enter")
            .arg("--root")
            .arg(self.sandbox.rootfs())
            .arg("--status-fd")
            .arg(status.as_raw_fd().to_string());
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
        command
            .arg("--")
            .args(argv)
            .env_clear()
            .envs(self.spec.effective_env(&self.sandbox_spec.hostname));
        Ok(command)
    }
}

/// Joins the UTS, PID (for children) and mount namespaces of `process`.
fn enter_namespaces(process: ProcessId) -> anyhow::Result<()> {
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
    setns(mnt, CloneFlags::CLONE_NEWNS).context("joining the mount namespace")?;
    Ok(())
}

/// A close-on-exec pipe whose write end is inherited by the next child (and closed by `enter`
/// on exec): end of file means the exec succeeded, otherwise it carries the error.
fn status_pipe() -> anyhow::Result<(File, OwnedFd)> {
    let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC).context("creating a pipe")?;
    fcntl(&write, FcntlArg::F_SETFD(FdFlag::empty())).context("making a pipe inheritable")?;
    Ok((File::from(read), write))
}

/// Spawns `command`, then learns from the status pipe whether its exec succeeded.
fn spawn_checked(mut command: Command, program: &str) -> Outcome<Child> {
    let (mut status_read, status_write) = status_pipe().map_err(failed)?;
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
    Err(HelperOutcome::CannotExecute {
        command: program.to_string(),
        reason: message,
    })
}

/// The monitor of a container: starts it, reports on stdout, records its exit.
pub fn run(container_dir: &Path) -> anyhow::Result<()> {
    let dir = ContainerDir(container_dir.to_path_buf());
    let outcome = start(&dir);
    let reply = match &outcome {
        Ok((state, _)) => HelperOutcome::Started(*state),
        Err(outcome) => outcome.clone(),
    };
    println!("{}", serde_json::to_string(&reply)?);
    let Ok((_, mut child)) = outcome else {
        return Ok(());
    };
    // The node agent stops listening now; never write to that pipe again.
    let null = File::open("/dev/null").context("opening /dev/null")?;
    nix::unistd::dup2_stdout(null).context("redirecting stdout")?;
    let status = child.wait().context("waiting for the container")?;
    write_json(&dir.exit(), &ExitStatus::from_std(status))?;
    Ok(())
}

fn start(dir: &ContainerDir) -> Outcome<(ContainerState, Child)> {
    let target = Target::load(dir).map_err(failed)?;
    let sandbox: SandboxState =
        read_required_json(&target.sandbox.state()).map_err(|e| failed(e.into()))?;
    if !sandbox.pause.is_alive() {
        return Err(HelperOutcome::NotRunning);
    }
    // Still in the host's mount namespace: clone the sources of propagating mounts here.
    let clones = rootfs::clone_propagating_sources(&target.spec.mounts).map_err(failed)?;
    enter_namespaces(sandbox.pause).map_err(|_| HelperOutcome::NotRunning)?;
    if !target.spec.mounts.is_empty() {
        container_mounts(&target, clones).map_err(failed)?;
    }
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.output_log())
        .with_context(|| format!("opening {:?}", dir.output_log()))
        .map_err(failed)?;
    let log2 = log
        .try_clone()
        .context("duplicating the log")
        .map_err(failed)?;
    let (_, status_write) = status_pipe().map_err(failed)?;
    let mut command = target
        .enter_command(&target.spec.argv, &status_write)
        .map_err(failed)?;
    drop(status_write);
    command.stdin(Stdio::null()).stdout(log).stderr(log2);
    let program = target.spec.argv.first().cloned().unwrap_or_default();
    let child = spawn_checked(command, &program)?;
    let process = ProcessId::including_zombie(child.id() as i32)
        .context("the container process vanished")
        .map_err(failed)?;
    let monitor = ProcessId::including_zombie(std::process::id() as i32)
        .context("reading the monitor's own start time")
        .map_err(failed)?;
    let state = ContainerState { monitor, process };
    write_json(&dir.state(), &state).map_err(|e| failed(e.into()))?;
    Ok((state, child))
}

/// A mount namespace of the container's own (a copy of the sandbox's) with its mounts;
/// `clones` holds the host clones of the propagating ones (see
/// [`rootfs::clone_propagating_sources`]).
fn container_mounts(target: &Target, clones: Vec<Option<OwnedFd>>) -> anyhow::Result<()> {
    unshare(CloneFlags::CLONE_NEWNS).context("creating the container's mount namespace")?;
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .context("making the container's mounts private")?;
    let root = target.sandbox.rootfs();
    for (m, clone) in target.spec.mounts.iter().zip(clones) {
        match clone {
            Some(clone) => rootfs::attach_into_root(&root, m, clone)?,
            None => rootfs::bind_into_root(&root, m)?,
        }
    }
    Ok(())
}

/// Runs `argv` in a running container with this process's stdout/stderr; the outcome goes to
/// `result_file`.
pub fn exec(container_dir: &Path, result_file: &Path, argv: &[String]) -> anyhow::Result<()> {
    let outcome = match exec_command(&ContainerDir(container_dir.to_path_buf()), argv) {
        Ok(status) => HelperOutcome::Finished(status),
        Err(outcome) => outcome,
    };
    write_json(result_file, &outcome)?;
    Ok(())
}

fn exec_command(dir: &ContainerDir, argv: &[String]) -> Outcome<ExitStatus> {
    let target = Target::load(dir).map_err(failed)?;
    let state: ContainerState = read_required_json(&dir.state()).map_err(|e| failed(e.into()))?;
    if !state.process.is_alive() {
        return Err(HelperOutcome::NotRunning);
    }
    enter_namespaces(state.process).map_err(|_| HelperOutcome::NotRunning)?;
    let (_, status_write) = status_pipe().map_err(failed)?;
    let command = target.enter_command(argv, &status_write).map_err(failed)?;
    drop(status_write);
    let program = argv.first().cloned().unwrap_or_default();
    let mut child = spawn_checked(command, &program)?;
    let status = child
        .wait()
        .context("waiting for the command")
        .map_err(failed)?;
    Ok(ExitStatus::from_std(status))
}

/// The last step: chroot into the sandbox root, set the working directory and user, exec.
pub fn enter(
    root: &Path,
    status_fd: RawFd,
    workdir: Option<&Path>,
    user: Option<(u32, u32)>,
    argv: &[String],
) -> anyhow::Result<()> {
    let mut status = inherited_fd(status_fd)?;
    fcntl(&status, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)).context("marking the status pipe")?;
    let error = match prepare(root, workdir, user) {
        Ok(()) => {
            let (program, args) = argv.split_first().context("no command")?;
            // Only returns on failure.
            let e = Command::new(program).args(args).exec();
            e.to_string()
        }
        Err(e) => format!("{e:#}"),
    };
    let _ = status.write_all(error.as_bytes());
    std::process::exit(127)
}

fn prepare(root: &Path, workdir: Option<&Path>, user: Option<(u32, u32)>) -> anyhow::Result<()> {
    nix::unistd::chroot(root).with_context(|| format!("chroot into {root:?}"))?;
    let workdir = workdir.map_or_else(|| PathBuf::from("/"), Path::to_path_buf);
    std::fs::create_dir_all(&workdir)
        .with_context(|| format!("creating the working directory {workdir:?}"))?;
    std::env::set_current_dir(&workdir)
        .with_context(|| format!("entering the working directory {workdir:?}"))?;
    if let Some((uid, gid)) = user {
        let gid = Gid::from_raw(gid);
        nix::unistd::setgroups(&[gid]).context("setting supplementary groups")?;
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
