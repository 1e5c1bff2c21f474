//! Pods as sandboxed local processes: the container runtime of the simulated nodes.
//!
//! A node agent (kubelet's stand-in) calls this plain Rust API; no Kubernetes objects here.
//!
//! - A **sandbox** ([`Sandbox`], one per pod) is a PID 1 ("pause") process in its own mount, UTS
//!   and PID namespaces, hostname = pod name, with a root file system of its own: a tmpfs whose
//!   top-level directories are overlays of the host's (`/usr`, `/etc`, `/var`, `/work`, …; lower =
//!   host directory, upper = a tmpfs of the sandbox), so the host is visible read-only yet
//!   everything is writable inside and nothing written reaches the host; fresh `/proc`, the
//!   host's `/dev` and `/sys`, private `/tmp` and `/run`, `/etc/hostname` and `/etc/hosts`
//!   naming the pod, and the pod's volumes bind-mounted at their mount paths (created inside the
//!   overlay when missing, e.g. under `/etc`). As with runc, the sandbox's mount namespace
//!   holds only those mounts: its PID 1 pivots into the root (`pivot_root`) and detaches the
//!   host's mounts, so the sandbox keeps no copy of a mount the host had when it was created
//!   (the copy would keep that mount point busy: removing the directory, e.g. when a volume is
//!   unpublished, would fail with `EBUSY` in the sandbox and in its containers).
//! - A **container** ([`Container`]) is a process started inside the sandbox's namespaces (at
//!   the sandbox's root) with its command, environment, working directory, user and
//!   supplementary groups; its stdout and stderr go through one pipe (order kept) that its
//!   monitor copies to the log file, noting when each line began (`output.times`); its exit
//!   status (code or signal) is awaited from tokio. Containers may add mounts of their own (a mount namespace
//!   per container), with Kubernetes' mount propagation ([`Propagation`]), and devices
//!   ([`Device`], Kubernetes' `volumeDevices`): a host device node bind-mounted at the
//!   container's path; for a path under `/dev` the container gets a `/dev` of its own (a tmpfs
//!   with the sandbox's entries bind-mounted in it) so the node is never created in the host's.
//!   [`Container::exec`] runs a command the same way and returns its output and exit code.
//!   A container with `stdin` has an input its monitor serves for attaching
//!   ([`Container::attach_input`], see [`input`]); with `tty`, a terminal for all three
//!   streams ([`Container::resize_terminal`]).
//! - [`ImageMap`] turns an image + command + args into the argv to run: the project's images
//!   run the binaries cargo built (bind-mounted read-only at their host path:
//!   [`ImageMap::binary_mount`], as the sandbox's `/tmp` and `/run` are private), generic
//!   images (busybox-like) use the host's tools.
//!
//! # How it works
//!
//! The namespace work happens in the single-threaded `pod-sandbox` helper binary (this crate's
//! `src/bin/pod-sandbox`), never in the multi-threaded tokio process: `setns` into a mount
//! namespace is refused to multi-threaded processes, and `fork` in one is fragile.
//! `pod-sandbox init` unshares the UTS and PID namespaces and starts PID 1 (`pause`), which
//! unshares the mount namespace, makes every mount private (so nothing propagates to the
//! host), builds the root, then pivots into it and lazily unmounts the old root;
//! `pod-sandbox run` (the container's *monitor*) joins the sandbox's UTS and PID namespaces,
//! starts the process, records its pid and, when it ends, its exit status; `pod-sandbox exec`
//! does the same for a one-off command. The monitor stays in the host's mount namespace, where
//! the run directory is: the process it starts (`pod-sandbox enter`) joins the sandbox's mount
//! namespace last, which puts it at the sandbox's root. Mounts exist only inside the sandbox's
//! (or container's) mount namespace and vanish with it, so the host's mount table does not
//! change, with one exception by design: see *Mount propagation*. The separate root is an
//! isolation of convenience for tests, not a security boundary.
//!
//! Everything lives under one run directory (layout in [`layout`]); volume sources are host
//! paths that must be ready (mounted) when the sandbox is created, as kubelet mounts volumes
//! before it creates the pod sandbox: later mounts on the host do not propagate into it, unless
//! a container mounts them with propagation.
//!
//! # Mount propagation
//!
//! A CSI node plugin runs as a pod and publishes volumes by mounting them at kubelet's target
//! paths, which the node agent and later pods must see: Kubernetes' `mountPropagation`. As the
//! sandbox's namespace does not reach the host's paths, every container [`Mount`] is cloned
//! where they are: `pod-sandbox enter`, still in the host's mount namespace, clones the
//! source's mount tree (`open_tree(OPEN_TREE_CLONE | AT_RECURSIVE)`), joins the sandbox's
//! namespace, makes a private copy of it for the container and attaches the clone
//! (`move_mount`) at the target there. The clone of a shared mount stays in its peer group, so
//! with [`Propagation::Bidirectional`] mounts made below the target in the container appear on
//! the host below the source, and the other way round; [`Propagation::HostToContainer`] makes
//! the clone a slave (receives, never sends), [`Propagation::Private`] takes it out of the
//! group. So a `Bidirectional` mount **may change the host's
//! mount table**, by design; the source must be on a shared mount
//! ([`host_mounts::make_shared`]) or the container fails to start. Before removing a directory
//! that may hold such mounts, call [`host_mounts::unmount_all_under`]. Sandbox-level mounts
//! are always private.
//!
//! # Lifetime: surviving the node agent, not the run
//!
//! Sandboxes and monitors are *not* tied to the process that created them (no
//! `PR_SET_PDEATHSIG`, their own process groups), so a node agent can restart and re-adopt its
//! pods: [`Runtime::adopt`] reads the state files (pids with start times, guarding against pid
//! reuse) and returns the live sandboxes; [`Sandbox::containers`] returns their containers,
//! whose exit is observed through a pidfd (no need to be their parent) and the exit status
//! their monitor records.
//!
//! They must still not outlive the harness run. That is the job of the [`Lifeline`]: a pipe
//! whose write end only the run owner holds (close-on-exec, so no child inherits it); every
//! sandbox's PID 1 blocks reading the other end, and when the owner dies — even by `SIGKILL` —
//! the kernel closes the write end, PID 1 exits, and the kernel kills every process of the PID
//! namespace. Use [`Lifeline::this_process`] when the node agents run inside the harness process,
//! or hand the lifeline to node-agent processes through [`Lifeline::env`] /
//! [`Lifeline::from_env`]. [`Runtime::teardown`] stops every recorded sandbox explicitly.
//!
//! # Privileges
//!
//! Creating namespaces and mounts needs root. [`Runtime::new`] fails with
//! [`Error::NotPrivileged`] otherwise, and the helper names the failing step when the kernel
//! refuses. A normal user runs it inside a user namespace where they are root:
//!
//! ```text
//! unshare --user --map-root-user --mount cargo nextest run -p pod-runtime
//! ```
//!
//! There, overlayfs needs Linux ≥ 5.11, only the mapped user exists (containers with a
//! [`User`] other than root, or with supplementary groups, fail: `setgroups` is denied), and
//! the host's files owned by other users appear as `nobody`. Everywhere, pivoting into the sandbox's root needs the current root to be a mount
//! point with a parent mount, as it is except in an initramfs (the helper says so otherwise).
//!
//! # Example
//!
//! ```no_run
//! # async fn demo() -> pod_runtime::Result<()> {
//! use std::time::Duration;
//! use pod_runtime::{ContainerSpec, Lifeline, Mount, Runtime, RuntimeConfig, SandboxSpec};
//!
//! let mut config = RuntimeConfig::new("/var/tmp/run-1/node-a");
//! config.lifeline = Some(Lifeline::this_process()?);
//! let runtime = Runtime::new(config)?;
//! let mut pod = SandboxSpec::new("0b6c…-uid", "web-0");
//! pod.mounts.push(Mount::bind("/var/tmp/run-1/volumes/data", "/data"));
//! let sandbox = runtime.create_sandbox(pod).await?;
//! let app = sandbox
//!     .run_container(ContainerSpec::new("app", ["sh", "-c", "echo hi > /data/x; sleep 60"]))
//!     .await?;
//! let out = app.exec(&["cat".into(), "/data/x".into()]).await?;
//! assert_eq!(out.stdout, b"hi\n");
//! let status = app.stop(Duration::from_secs(30)).await?;
//! sandbox.remove().await?;
//! # let _ = status; Ok(()) }
//! ```

mod container;
mod error;
mod exec;
pub mod host_mounts;
mod image;
pub mod input;
pub mod layout;
mod lifeline;
mod process;
mod sandbox;
mod spec;
mod terminal;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use container::Container;
pub use error::{Error, Result};
pub use exec::{ExecOutput, ExecSession, InputStream, OutputStream};
pub use image::ImageMap;
pub use lifeline::{LIFELINE_FD_ENV, Lifeline, LifelineHolder};
pub use process::{ExitStatus, ProcessId};
pub use sandbox::Sandbox;
pub use spec::{ContainerSpec, DEFAULT_PATH, Device, Mount, Propagation, SandboxSpec, User};
pub use terminal::TerminalSize;

use layout::{SandboxDir, sandboxes_dir};

/// The environment variable naming the `pod-sandbox` helper binary (see
/// [`RuntimeConfig::new`]).
pub const HELPER_ENV: &str = "POD_SANDBOX_BIN";

/// How a [`Runtime`] is set up.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// The run directory holding every sandbox (created when missing).
    pub run_dir: PathBuf,
    /// The `pod-sandbox` helper binary.
    pub helper: PathBuf,
    /// Ends the sandboxes when its holder dies; `None`: they live until stopped.
    pub lifeline: Option<Lifeline>,
}

impl RuntimeConfig {
    /// A configuration for `run_dir`, without lifeline, with the helper found at
    /// `$POD_SANDBOX_BIN`, else next to the current executable (or one directory up, where
    /// cargo puts binaries relative to test executables in `deps/`).
    pub fn new(run_dir: impl Into<PathBuf>) -> Self {
        RuntimeConfig {
            run_dir: run_dir.into(),
            helper: locate_helper(),
            lifeline: None,
        }
    }
}

fn locate_helper() -> PathBuf {
    if let Some(path) = std::env::var_os(HELPER_ENV) {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().unwrap_or_default();
    let dir = exe.parent().unwrap_or(Path::new("."));
    let beside = dir.join("pod-sandbox");
    match dir.parent() {
        Some(up) if !beside.exists() && up.join("pod-sandbox").exists() => up.join("pod-sandbox"),
        _ => beside,
    }
}

/// The container runtime of one node: creates, lists and tears down sandboxes under its run
/// directory. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Runtime {
    config: Arc<RuntimeConfig>,
}

impl Runtime {
    /// Checks privileges and the helper, creates the run directory.
    pub fn new(mut config: RuntimeConfig) -> Result<Self> {
        let euid = nix::unistd::geteuid();
        if !euid.is_root() {
            return Err(Error::NotPrivileged {
                euid: euid.as_raw(),
            });
        }
        if !config.helper.is_file() {
            return Err(Error::HelperMissing {
                path: config.helper,
            });
        }
        let sandboxes = sandboxes_dir(&config.run_dir);
        std::fs::create_dir_all(&sandboxes).map_err(|e| Error::io("creating", &sandboxes, e))?;
        // Absolute paths: the helpers change directories and mount namespaces.
        config.run_dir = std::fs::canonicalize(&config.run_dir)
            .map_err(|e| Error::io("resolving", &config.run_dir, e))?;
        Ok(Runtime {
            config: Arc::new(config),
        })
    }

    /// Opens an existing run directory after a restart and returns the sandboxes still
    /// running there (their containers: [`Sandbox::containers`]).
    pub fn adopt(config: RuntimeConfig) -> Result<(Self, Vec<Sandbox>)> {
        let runtime = Runtime::new(config)?;
        let live = runtime
            .sandboxes()?
            .into_iter()
            .filter(Sandbox::is_running)
            .collect();
        Ok((runtime, live))
    }

    /// The run directory (absolute).
    pub fn run_dir(&self) -> &Path {
        &self.config.run_dir
    }

    pub(crate) fn config(&self) -> &RuntimeConfig {
        &self.config
    }

    /// Creates and starts a sandbox; fails with [`Error::AlreadyExists`] when its id is taken.
    pub async fn create_sandbox(&self, spec: SandboxSpec) -> Result<Sandbox> {
        Sandbox::create(self.clone(), spec).await
    }

    /// Every sandbox recorded in the run directory, running or not, ordered by id.
    pub fn sandboxes(&self) -> Result<Vec<Sandbox>> {
        let dir = sandboxes_dir(self.run_dir());
        let entries = std::fs::read_dir(&dir).map_err(|e| Error::io("listing", &dir, e))?;
        let mut ids = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| Error::io("listing", &dir, e))?;
            ids.push(entry.file_name().to_string_lossy().into_owned());
        }
        ids.sort();
        let mut sandboxes = Vec::new();
        for id in ids {
            if let Some(sandbox) = self.sandbox(&id)? {
                sandboxes.push(sandbox);
            }
        }
        Ok(sandboxes)
    }

    /// The sandbox with this id, if it was created (and started) in the run directory.
    pub fn sandbox(&self, id: &str) -> Result<Option<Sandbox>> {
        Sandbox::load(self.clone(), SandboxDir::new(self.run_dir(), id))
    }

    /// Stops every sandbox recorded in the run directory (their files stay for inspection).
    pub async fn teardown(&self) -> Result<()> {
        for sandbox in self.sandboxes()? {
            sandbox.stop().await?;
        }
        Ok(())
    }
}
