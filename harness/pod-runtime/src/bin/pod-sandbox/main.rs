//! `pod-sandbox`: the single-threaded helper that does the namespace work of the pod runtime
//! (`pod_runtime`), which calls it; not meant to be run by hand.
//!
//! - `init`: unshares UTS/PID namespaces, starts PID 1, records the sandbox's state.
//! - `pause`: PID 1 of a sandbox: unshares the mount namespace, builds the sandbox root and
//!   pivots into it (detaching the host's mounts, as runc does), reaps orphans, exits when the
//!   lifeline breaks.
//! - `run`: a container's monitor: starts the process in the sandbox, copies its output to
//!   the log, serves its input to attached clients (the one place with threads, started
//!   before it joins the sandbox's PID namespace, see `input`), records its exit.
//! - `exec`: runs a command in a running container and records how it ended.
//! - `enter`: the last step before the command: the container's mount namespace (joined, or
//!   made with the container's own mounts), working directory, user, exec.
//!
//! `init`, `run` and `exec` stay in the host's mount namespace, where the run directory is;
//! only `pause` and `enter` go into the sandbox's, whose root is the sandbox's root.

mod input;
mod namespaces;
mod rootfs;
mod sandbox;

use std::fs::File;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(about = "Namespace helper of the harness's pod runtime")]
struct Cli {
    #[command(subcommand)]
    command: Step,
}

#[derive(Debug, Subcommand)]
enum Step {
    /// Creates the sandbox described by `<dir>/spec.json`; prints its state as JSON.
    Init {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long)]
        lifeline_fd: Option<RawFd>,
    },
    /// PID 1 of a sandbox described by `<dir>/spec.json`.
    Pause {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long)]
        lifeline_fd: Option<RawFd>,
    },
    /// Starts and monitors the container described by `<container-dir>/spec.json`.
    Run {
        #[arg(long)]
        container_dir: PathBuf,
    },
    /// Runs a command in a running container; its outcome goes to `--result-file`.
    Exec {
        #[arg(long)]
        container_dir: PathBuf,
        #[arg(long)]
        result_file: PathBuf,
        /// Streamed exec: the command leads a session of its own, killed whole (its process
        /// group) when this process gets SIGTERM, SIGHUP or SIGINT.
        #[arg(long)]
        session: bool,
        /// Standard input is a terminal: it becomes the command's controlling terminal.
        #[arg(long, requires = "session")]
        tty: bool,
        #[arg(last = true, required = true)]
        argv: Vec<String>,
    },
    /// Enters the container's mount namespace, sets the working directory and user, and
    /// executes the command.
    Enter {
        /// The mount namespace to join (the container's, or the sandbox's with `--mounts-of`).
        #[arg(long)]
        mount_ns_fd: RawFd,
        /// A container directory: make a mount namespace of its own with the mounts of its
        /// `spec.json` (cloned from the current, host's, namespace first).
        #[arg(long)]
        mounts_of: Option<PathBuf>,
        /// Write end of a close-on-exec pipe: gets the error when the exec fails.
        #[arg(long)]
        status_fd: RawFd,
        #[arg(long)]
        workdir: Option<PathBuf>,
        #[arg(long, requires = "gid")]
        uid: Option<u32>,
        #[arg(long, requires = "uid")]
        gid: Option<u32>,
        /// A supplementary group besides the gid (repeated).
        #[arg(long = "group")]
        groups: Vec<u32>,
        /// Start a session of its own (with `--tty`, standard input as its terminal).
        #[arg(long)]
        session: bool,
        #[arg(long, requires = "session")]
        tty: bool,
        #[arg(last = true, required = true)]
        argv: Vec<String>,
    },
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Step::Init { dir, lifeline_fd } => sandbox::init(&dir, lifeline_fd),
        Step::Pause { dir, lifeline_fd } => sandbox::pause(&dir, lifeline_fd),
        Step::Run { container_dir } => namespaces::run(&container_dir),
        Step::Exec {
            container_dir,
            result_file,
            session,
            tty,
            argv,
        } => namespaces::exec(&container_dir, &result_file, &argv, session, tty),
        Step::Enter {
            mount_ns_fd,
            mounts_of,
            status_fd,
            workdir,
            uid,
            gid,
            groups,
            session,
            tty,
            argv,
        } => namespaces::enter(
            &namespaces::Entry {
                mount_ns_fd,
                mounts_of,
                workdir,
                user: uid.zip(gid),
                groups,
                session,
                tty,
            },
            status_fd,
            &argv,
        ),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pod-sandbox: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Takes ownership of a descriptor this process inherited from its parent for its own use.
fn inherited_fd(fd: RawFd) -> anyhow::Result<File> {
    // Refuse numbers that are not open, so no unrelated descriptor is ever taken over.
    std::fs::read_link(format!("/proc/self/fd/{fd}"))
        .with_context(|| format!("inherited file descriptor {fd} is not open"))?;
    #[allow(unsafe_code)]
    // SAFETY: the parent helper opened `fd` for this process alone and passed its number on the
    // command line; it is open (checked above) and nothing else in this process owns it.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    Ok(File::from(owned))
}
