//! Sandboxes: one per pod, created by the `pod-sandbox init` helper.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::process::Command;

use super::Runtime;
use super::container::Container;
use super::error::{Error, Result};
use super::layout::{SandboxDir, SandboxState, read_json, read_required_json, write_json};
use super::process::ProcessId;
use super::spec::{ContainerSpec, SandboxSpec};

/// How long stopping a sandbox waits for its processes to vanish once PID 1 is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(20);

/// A pod's sandbox (running or not). Cheap to clone; all state lives in its directory.
#[derive(Debug, Clone)]
pub struct Sandbox {
    runtime: Runtime,
    spec: SandboxSpec,
    dir: SandboxDir,
    state: SandboxState,
}

impl Sandbox {
    pub(crate) async fn create(runtime: Runtime, spec: SandboxSpec) -> Result<Sandbox> {
        spec.validate()?;
        let dir = SandboxDir::new(runtime.run_dir(), &spec.id);
        let what = format!("sandbox {:?} ({})", spec.id, spec.hostname);
        match std::fs::create_dir(&dir.0) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(Error::AlreadyExists { what });
            }
            Err(e) => return Err(Error::io("creating", &dir.0, e)),
        }
        for sub in [dir.rootfs(), dir.layers(), dir.containers()] {
            std::fs::create_dir(&sub).map_err(|e| Error::io("creating", &sub, e))?;
        }
        write_json(&dir.spec(), &spec)?;

        let config = runtime.config();
        let mut command = Command::new(&config.helper);
        command.arg("init").arg("--dir").arg(&dir.0);
        if let Some(lifeline) = &config.lifeline {
            command
                .arg("--lifeline-fd")
                .arg(lifeline.raw_fd().to_string());
        }
        let output = command
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|e| Error::io("running", &config.helper, e))?;
        let action = format!("creating {what}");
        if !output.status.success() {
            return Err(Error::helper_failed(action, &output.stderr, output.status));
        }
        let state: SandboxState =
            serde_json::from_slice(&output.stdout).map_err(|e| Error::Helper {
                action,
                message: format!("unreadable reply from the helper: {e}"),
            })?;
        tracing::debug!(sandbox = %spec.id, pid = state.pause.pid, "sandbox started");
        Ok(Sandbox {
            runtime,
            spec,
            dir,
            state,
        })
    }

    /// Loads a sandbox from its directory; `None` when it has no recorded state (never started).
    pub(crate) fn load(runtime: Runtime, dir: SandboxDir) -> Result<Option<Sandbox>> {
        let Some(state) = read_json::<SandboxState>(&dir.state())? else {
            return Ok(None);
        };
        let spec = read_required_json(&dir.spec())?;
        Ok(Some(Sandbox {
            runtime,
            spec,
            dir,
            state,
        }))
    }

    /// The sandbox id (e.g. the pod UID).
    pub fn id(&self) -> &str {
        &self.spec.id
    }

    /// The hostname (the pod name).
    pub fn hostname(&self) -> &str {
        &self.spec.hostname
    }

    /// The specification it was created with.
    pub fn spec(&self) -> &SandboxSpec {
        &self.spec
    }

    /// Its directory under the run directory.
    pub fn dir(&self) -> &Path {
        &self.dir.0
    }

    /// Its PID 1.
    pub fn pause_process(&self) -> ProcessId {
        self.state.pause
    }

    /// Whether its PID 1 (hence the sandbox) is running.
    pub fn is_running(&self) -> bool {
        self.state.pause.is_alive()
    }

    /// Starts a container; [`Error::CannotExecute`] names the command when it cannot run.
    pub async fn run_container(&self, spec: ContainerSpec) -> Result<Container> {
        spec.validate()?;
        if !self.is_running() {
            return Err(Error::NotRunning {
                what: format!("sandbox {:?}", self.id()),
            });
        }
        let dir = self.dir.container(&spec.dir_name());
        Container::start(self.id(), &self.runtime.config().helper, dir, spec).await
    }

    /// Every container attempt recorded in the sandbox (running or exited), ordered by name
    /// then attempt.
    pub fn containers(&self) -> Result<Vec<Container>> {
        let dir = self.dir.containers();
        let entries = std::fs::read_dir(&dir).map_err(|e| Error::io("listing", &dir, e))?;
        let mut containers = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| Error::io("listing", &dir, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(container) = self.load_container(&name)? {
                containers.push(container);
            }
        }
        containers.sort_by(|a, b| (a.name(), a.attempt()).cmp(&(b.name(), b.attempt())));
        Ok(containers)
    }

    /// The container `name`'s attempt `attempt`, if it was started.
    pub fn container(&self, name: &str, attempt: u32) -> Result<Option<Container>> {
        self.load_container(&format!("{name}.{attempt}"))
    }

    /// The container attempt in directory `dir_name` of `containers/`, if it was started.
    fn load_container(&self, dir_name: &str) -> Result<Option<Container>> {
        let dir = self.dir.container(dir_name);
        Container::load(self.id(), &self.runtime.config().helper, dir)
    }

    /// Kills the sandbox (PID 1 and so every process in it, without grace: stop containers
    /// gracefully first) and waits until its processes and their monitors are gone.
    pub async fn stop(&self) -> Result<()> {
        let containers = self.containers()?;
        self.state.pause.signal(Signal::SIGKILL)?;
        let all_gone = async {
            self.state.pause.exited().await?;
            for container in &containers {
                container.monitor_process().exited().await?;
            }
            Ok::<_, Error>(())
        };
        match tokio::time::timeout(STOP_TIMEOUT, all_gone).await {
            Ok(result) => result,
            Err(_) => {
                let left: Vec<String> = containers
                    .iter()
                    .filter(|c| c.monitor_process().is_alive())
                    .map(|c| format!("{}.{}", c.name(), c.attempt()))
                    .collect();
                Err(Error::Helper {
                    action: format!("stopping sandbox {:?}", self.id()),
                    message: format!(
                        "still running after {STOP_TIMEOUT:?}: pause alive={}, container monitors {left:?}",
                        self.state.pause.is_alive()
                    ),
                })
            }
        }
    }

    /// Stops the sandbox and deletes its directory (logs included), after unmounting anything
    /// the host has mounted below it (nothing, normally: the sandbox's mounts live in its own
    /// namespace), so no mounted data is ever deleted.
    pub async fn remove(&self) -> Result<()> {
        self.stop().await?;
        super::host_mounts::unmount_all_under(&self.dir.0)?;
        std::fs::remove_dir_all(&self.dir.0).map_err(|e| Error::io("removing", &self.dir.0, e))
    }
}
