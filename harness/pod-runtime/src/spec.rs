//! What a node agent asks for: sandboxes (pods) and containers, validated before anything runs.

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::{Error, Result};

/// The `PATH` a container gets when its environment sets none (the usual image default).
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// A pod sandbox: the namespaces and root file system its containers share.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxSpec {
    /// Unique id of the sandbox in the run directory (e.g. the pod UID); names its directory.
    pub id: String,
    /// The hostname inside the sandbox (the pod name).
    pub hostname: String,
    /// Bind mounts every container of the sandbox sees (pod-level volumes).
    pub mounts: Vec<Mount>,
}

/// A bind mount of a host path (directory or file) into the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mount {
    /// The host path; it must exist (and be fully mounted) when the sandbox is created.
    pub source: PathBuf,
    /// The absolute path inside the sandbox; created (invisibly to the host) when missing.
    pub target: PathBuf,
    /// Whether the mount is read-only inside the sandbox.
    pub read_only: bool,
    /// Whether mounts made later below it propagate, and which way (container mounts only).
    #[serde(default)]
    pub propagation: Propagation,
}

/// Mount propagation of a container's bind mount (Kubernetes' `mountPropagation`).
///
/// Non-private propagation needs the host side of the mount to be a shared mount (see
/// [`host_mounts::make_shared`](super::host_mounts::make_shared)): the container's mount is a
/// clone of the host's in the host's peer group.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Propagation {
    /// Nothing propagates either way (`None`): later mounts on the host stay invisible, the
    /// container's mounts never reach the host.
    #[default]
    Private,
    /// Mounts the host makes below the source later appear in the container (`rslave`); the
    /// container's own mounts never reach the host.
    HostToContainer,
    /// Mounts propagate both ways (`rshared`): what the container mounts below the target
    /// appears on the host below the source (and in every later pod that mounts it). The
    /// source must be on a shared mount, or the container fails to start.
    Bidirectional,
}

/// The user a container's processes run as (`runAsUser`/`runAsGroup`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    /// The user id.
    pub uid: u32,
    /// The group id (also the first supplementary group, before
    /// [`ContainerSpec::supplementary_groups`]).
    pub gid: u32,
}

/// A container: a process started in a sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerSpec {
    /// The container name, unique in its pod.
    pub name: String,
    /// Which start of this container this is (0 for the first, then the restart count); several
    /// attempts of one name are kept side by side so earlier logs stay readable.
    pub attempt: u32,
    /// The program and its arguments (see [`ImageMap::resolve`](super::ImageMap::resolve)).
    pub argv: Vec<String>,
    /// Environment variables, in order; `PATH` and `HOSTNAME` get defaults when absent.
    pub env: Vec<(String, String)>,
    /// The working directory inside the sandbox (created when missing); `/` by default.
    pub working_dir: Option<PathBuf>,
    /// The user to run as; the runtime's own user (root) by default.
    pub user: Option<User>,
    /// Groups the processes get besides their group id (a pod's `supplementalGroups` and
    /// `fsGroup`): the supplementary groups are the group id followed by these. Empty, the
    /// runtime's own groups are kept when no [`user`](Self::user) is set.
    #[serde(default)]
    pub supplementary_groups: Vec<u32>,
    /// Bind mounts only this container sees (in a mount namespace of its own).
    pub mounts: Vec<Mount>,
    /// Block (or character) devices the container sees at their paths (Kubernetes'
    /// `volumeDevices`), attached after [`mounts`](Self::mounts).
    #[serde(default)]
    pub devices: Vec<Device>,
    /// Standard input is open for [attaching](super::Container::attach_input) (Kubernetes'
    /// `stdin`); otherwise it is `/dev/null`.
    #[serde(default)]
    pub stdin: bool,
    /// Standard input is closed when the first attached client closes its input
    /// (`stdinOnce`).
    #[serde(default)]
    pub stdin_once: bool,
    /// The process gets a terminal for its standard streams (`tty`): its output is the
    /// terminal's, written to the log as one stream.
    #[serde(default)]
    pub tty: bool,
}

impl ContainerSpec {
    /// A container running `argv` with no environment, mounts or user.
    pub fn new(name: impl Into<String>, argv: impl IntoIterator<Item = impl Into<String>>) -> Self {
        ContainerSpec {
            name: name.into(),
            attempt: 0,
            argv: argv.into_iter().map(Into::into).collect(),
            env: Vec::new(),
            working_dir: None,
            user: None,
            supplementary_groups: Vec::new(),
            mounts: Vec::new(),
            devices: Vec::new(),
            stdin: false,
            stdin_once: false,
            tty: false,
        }
    }

    /// The directory name of this container attempt in its sandbox: `<name>.<attempt>`.
    pub fn dir_name(&self) -> String {
        format!("{}.{}", self.name, self.attempt)
    }

    /// The environment the process gets: the spec's, plus `PATH` and `HOSTNAME` defaults.
    pub fn effective_env(&self, hostname: &str) -> Vec<(String, String)> {
        let mut env = self.env.clone();
        if !env.iter().any(|(k, _)| k == "PATH") {
            env.push(("PATH".into(), DEFAULT_PATH.into()));
        }
        if !env.iter().any(|(k, _)| k == "HOSTNAME") {
            env.push(("HOSTNAME".into(), hostname.into()));
        }
        env
    }

    pub(crate) fn validate(&self) -> Result<()> {
        let what = format!("container {:?}", self.name);
        check_name(&what, &self.name)?;
        if self.argv.first().is_none_or(|p| p.is_empty()) {
            return Err(Error::invalid(what, "no command to run (argv is empty)"));
        }
        for (key, _) in &self.env {
            if key.is_empty() || key.contains('=') || key.contains('\0') {
                return Err(Error::invalid(
                    format!("environment variable {key:?} of {what}"),
                    "names must be non-empty and contain no '=' or NUL",
                ));
            }
        }
        if let Some(dir) = &self.working_dir {
            check_inner_path(&format!("working directory of {what}"), dir)?;
        }
        for mount in &self.mounts {
            mount.validate(&what)?;
        }
        for device in &self.devices {
            device.validate(&what)?;
        }
        Ok(())
    }
}

/// A device node of the host a container sees at a path of its own: the node (or a file
/// a device node is bind-mounted on, such as a CSI driver's published block volume) is
/// bind-mounted there, in the container's mount namespace.
///
/// A device under `/dev` gives the container a `/dev` of its own (a tmpfs with the
/// sandbox's `/dev` entries bind-mounted in it, as they were when the container started),
/// so the device's node is never created in the host's `/dev`. Unlike runc, the runtime has
/// no device cgroup: the container may open the device read-write whatever the pod asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Device {
    /// The host path: a block or character device once symbolic links are followed.
    pub source: PathBuf,
    /// The absolute path inside the container (e.g. `/dev/xvda`).
    pub target: PathBuf,
}

impl Device {
    /// The device at `source` seen at `target`.
    pub fn new(source: impl Into<PathBuf>, target: impl Into<PathBuf>) -> Self {
        Device {
            source: source.into(),
            target: target.into(),
        }
    }

    fn validate(&self, owner: &str) -> Result<()> {
        use std::os::unix::fs::FileTypeExt;
        check_inner_path(
            &format!("device path {:?} of {owner}", self.target),
            &self.target,
        )?;
        if self.target == Path::new("/") {
            return Err(Error::invalid(
                format!("device path \"/\" of {owner}"),
                "the root cannot be replaced",
            ));
        }
        let what = || format!("device {:?} (at {:?}) of {owner}", self.source, self.target);
        if !self.source.is_absolute() {
            return Err(Error::invalid(what(), "must be an absolute host path"));
        }
        match std::fs::metadata(&self.source) {
            Ok(meta) if meta.file_type().is_block_device() || meta.file_type().is_char_device() => {
                Ok(())
            }
            Ok(_) => Err(Error::invalid(what(), "is not a device node")),
            Err(e) => Err(Error::invalid(what(), format!("cannot be read: {e}"))),
        }
    }
}

impl SandboxSpec {
    /// A sandbox with the given id and hostname and no mounts.
    pub fn new(id: impl Into<String>, hostname: impl Into<String>) -> Self {
        SandboxSpec {
            id: id.into(),
            hostname: hostname.into(),
            mounts: Vec::new(),
        }
    }

    pub(crate) fn validate(&self) -> Result<()> {
        let what = format!("sandbox {:?}", self.id);
        check_name(&what, &self.id)?;
        let hostname_ok = !self.hostname.is_empty()
            && self.hostname.len() <= 64
            && self
                .hostname
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
        if !hostname_ok {
            return Err(Error::invalid(
                format!("hostname {:?} of {what}", self.hostname),
                "a hostname has 1 to 64 characters among [A-Za-z0-9-.]",
            ));
        }
        for mount in &self.mounts {
            mount.validate(&what)?;
            if mount.propagation != Propagation::Private {
                return Err(Error::invalid(
                    format!("mount {:?} of {what}", mount.target),
                    format!(
                        "{:?} propagation is only supported for container mounts (sandbox \
                         mounts are private)",
                        mount.propagation
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl Mount {
    /// A read-write bind mount.
    pub fn bind(source: impl Into<PathBuf>, target: impl Into<PathBuf>) -> Self {
        Mount {
            source: source.into(),
            target: target.into(),
            read_only: false,
            propagation: Propagation::Private,
        }
    }

    /// A read-only bind mount.
    pub fn read_only(source: impl Into<PathBuf>, target: impl Into<PathBuf>) -> Self {
        Mount {
            read_only: true,
            ..Mount::bind(source, target)
        }
    }

    /// The same mount with the given propagation.
    pub fn with_propagation(self, propagation: Propagation) -> Self {
        Mount {
            propagation,
            ..self
        }
    }

    fn validate(&self, owner: &str) -> Result<()> {
        check_inner_path(
            &format!("mount target {:?} of {owner}", self.target),
            &self.target,
        )?;
        if self.target == Path::new("/") {
            return Err(Error::invalid(
                format!("mount target \"/\" of {owner}"),
                "the root cannot be replaced",
            ));
        }
        if !self.source.is_absolute() {
            return Err(Error::invalid(
                format!("mount source {:?} of {owner}", self.source),
                "must be an absolute host path",
            ));
        }
        if let Err(e) = std::fs::metadata(&self.source) {
            return Err(Error::invalid(
                format!("mount source {:?} of {owner}", self.source),
                format!("cannot be read: {e}"),
            ));
        }
        Ok(())
    }
}

/// Names that become directory names: no separators, no dot-only names.
fn check_name(what: &str, name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(
            what,
            format!("name {name:?} must have 1 to 253 characters among [A-Za-z0-9-_.]"),
        ))
    }
}

/// Paths inside the sandbox: absolute, without `..`.
fn check_inner_path(what: &str, path: &Path) -> Result<()> {
    if !path.is_absolute() {
        return Err(Error::invalid(what, "must be an absolute path"));
    }
    if path.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(Error::invalid(what, "must not contain \"..\""));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn devices_must_be_device_nodes_at_absolute_paths() {
        let mut spec = ContainerSpec::new("app", ["true"]);
        spec.devices.push(Device::new("/dev/null", "/dev/xvda"));
        spec.validate().unwrap();
        for (source, target, expected) in [
            ("/etc/hostname", "/dev/xvda", "is not a device node"),
            ("/does/not/exist", "/dev/xvda", "cannot be read"),
            ("dev/null", "/dev/xvda", "absolute host path"),
            ("/dev/null", "xvda", "absolute path"),
            ("/dev/null", "/", "the root cannot be replaced"),
        ] {
            spec.devices = vec![Device::new(source, target)];
            let err = spec.validate().unwrap_err().to_string();
            assert!(err.contains(expected), "{source} at {target}: {err}");
        }
        // Specs written before devices existed still read.
        let old: ContainerSpec = serde_json::from_str(
            r#"{"name":"a","attempt":0,"argv":["true"],"env":[],"working_dir":null,
            "user":null,"mounts":[]}"#,
        )
        .unwrap();
        assert!(old.devices.is_empty());
    }

    #[test]
    fn relative_mount_target_is_rejected_naming_it() {
        let mut spec = SandboxSpec::new("pod-1", "web-0");
        spec.mounts.push(Mount::bind("/tmp", "data"));
        let err = spec.validate().unwrap_err().to_string();
        assert!(
            err.contains("\"data\"") && err.contains("absolute"),
            "{err}"
        );
    }

    #[test]
    fn bad_hostname_is_rejected_naming_it() {
        let err = SandboxSpec::new("pod-1", "web_0!")
            .validate()
            .unwrap_err()
            .to_string();
        assert!(err.contains("web_0!"), "{err}");
    }

    #[test]
    fn missing_mount_source_is_rejected_naming_it() {
        let mut spec = ContainerSpec::new("app", ["true"]);
        spec.mounts.push(Mount::bind("/does/not/exist", "/data"));
        let err = spec.validate().unwrap_err().to_string();
        assert!(err.contains("/does/not/exist"), "{err}");
    }

    #[test]
    fn propagation_defaults_to_private_in_old_state_files() {
        let old = r#"{"source":"/a","target":"/b","read_only":true}"#;
        let mount: Mount = serde_json::from_str(old).unwrap();
        assert_eq!(mount, Mount::read_only("/a", "/b"));
        assert_eq!(mount.propagation, Propagation::Private);
    }

    #[test]
    fn sandbox_mounts_with_propagation_are_rejected_naming_them() {
        let mut spec = SandboxSpec::new("pod-1", "web-0");
        spec.mounts
            .push(Mount::bind("/tmp", "/data").with_propagation(Propagation::Bidirectional));
        let err = spec.validate().unwrap_err().to_string();
        assert!(
            err.contains("/data") && err.contains("Bidirectional"),
            "{err}"
        );
    }

    #[test]
    fn supplementary_groups_default_to_none_in_old_state_files() {
        let old = r#"{"name":"app","attempt":0,"argv":["true"],"env":[],"working_dir":null,
            "user":{"uid":1,"gid":2},"mounts":[]}"#;
        let spec: ContainerSpec = serde_json::from_str(old).unwrap();
        assert!(spec.supplementary_groups.is_empty());
        assert_eq!(spec.user, Some(User { uid: 1, gid: 2 }));
    }

    #[test]
    fn empty_command_is_rejected() {
        let spec = ContainerSpec::new("app", Vec::<String>::new());
        assert!(
            spec.validate()
                .unwrap_err()
                .to_string()
                .contains("no command")
        );
    }

    #[test]
    fn env_defaults_path_and_hostname_but_keeps_given_ones() {
        let mut spec = ContainerSpec::new("app", ["true"]);
        spec.env.push(("PATH".into(), "/bin".into()));
        let env = spec.effective_env("web-0");
        assert!(env.contains(&("PATH".into(), "/bin".into())));
        assert!(env.contains(&("HOSTNAME".into(), "web-0".into())));
        assert_eq!(env.len(), 2);
    }
}
