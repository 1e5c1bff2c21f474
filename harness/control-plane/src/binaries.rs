//! Finding the control-plane binaries: `$KUBEBUILDER_ASSETS` (envtest's convention), else
//! the cache that `ci/install-control-plane.sh` fills, else that script is run.

use std::path::{Path, PathBuf};
use std::process::Command;

use kube_support::error::IoContext;

use super::error::{Error, Result};

/// The Kubernetes version `ci/install-control-plane.sh` builds.
pub const DEFAULT_KUBERNETES_VERSION: &str = "v1.20.2";

/// The four binaries a control plane runs, as found on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binaries {
    /// `etcd`.
    pub etcd: PathBuf,
    /// `kube-apiserver`.
    pub kube_apiserver: PathBuf,
    /// `kube-controller-manager`.
    pub kube_controller_manager: PathBuf,
    /// `kube-scheduler`.
    pub kube_scheduler: PathBuf,
}

const NAMES: [&str; 4] = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
];

impl Binaries {
    /// The binaries in `dir`, if all four are there and executable.
    pub fn in_dir(dir: &Path) -> Result<Self> {
        let missing: Vec<&str> = NAMES
            .iter()
            .copied()
            .filter(|name| !is_executable(&dir.join(name)))
            .collect();
        if !missing.is_empty() {
            return Err(Error::Binaries(format!(
                "{} lacks {}",
                dir.display(),
                missing.join(", ")
            )));
        }
        Ok(Self {
            etcd: dir.join("etcd"),
            kube_apiserver: dir.join("kube-apiserver"),
            kube_controller_manager: dir.join("kube-controller-manager"),
            kube_scheduler: dir.join("kube-scheduler"),
        })
    }

    /// Finds the binaries: in `$KUBEBUILDER_ASSETS` if set (an incomplete directory there is
    /// an error, not silently ignored), else in the install cache, else by running the
    /// install script (its progress goes to stderr; a cold build takes several minutes).
    pub fn locate() -> Result<Self> {
        if let Some(dir) = std::env::var_os("KUBEBUILDER_ASSETS").filter(|d| !d.is_empty()) {
            return Self::in_dir(Path::new(&dir))
                .map_err(|e| Error::Binaries(format!("KUBEBUILDER_ASSETS: {}", e_message(&e))));
        }
        let cached = cache_bin_dir();
        let stamped = cached
            .parent()
            .is_some_and(|d| d.join(".complete").is_file());
        if let (true, Ok(binaries)) = (stamped, Self::in_dir(&cached)) {
            return Ok(binaries);
        }
        let dir = run_install_script()?;
        Self::in_dir(&dir)
    }
}

/// A Kubernetes release as `kube-apiserver --version` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct KubernetesVersion {
    /// The major version (1).
    pub major: u32,
    /// The minor version, e.g. 20.
    pub minor: u32,
}

impl Binaries {
    /// The version of these binaries (from `kube-apiserver --version`). The command-line
    /// flags of the components depend on it, so that newer binaries work too.
    pub fn kubernetes_version(&self) -> Result<KubernetesVersion> {
        let output = Command::new(&self.kube_apiserver)
            .arg("--version")
            .output()
            .map_err(Error::io("running", &self.kube_apiserver))?;
        let text = String::from_utf8_lossy(&output.stdout);
        parse_version(&text).ok_or_else(|| {
            Error::Binaries(format!(
                "{} --version printed {:?}, not \"Kubernetes v<major>.<minor>.<patch>\"",
                self.kube_apiserver.display(),
                text.trim()
            ))
        })
    }
}

fn parse_version(text: &str) -> Option<KubernetesVersion> {
    let version = text
        .split_whitespace()
        .find_map(|word| word.strip_prefix('v'))?;
    let mut parts = version.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some(KubernetesVersion { major, minor })
}

fn e_message(e: &Error) -> String {
    match e {
        Error::Binaries(message) => message.clone(),
        other => other.to_string(),
    }
}

/// `$CACHE_DIR/control-plane/<version>/bin`, with `CACHE_DIR` defaulting as in `ci/lib.sh`.
pub fn cache_bin_dir() -> PathBuf {
    cache_dir()
        .join("control-plane")
        .join(DEFAULT_KUBERNETES_VERSION)
        .join("bin")
}

fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CACHE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let cache_home = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache")
        });
    cache_home.join("openstack-csi-conformance")
}

/// The install script of this checkout.
pub fn install_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ci/install-control-plane.sh")
}

fn run_install_script() -> Result<PathBuf> {
    let script = install_script();
    if !script.is_file() {
        return Err(Error::Binaries(format!(
            "not in KUBEBUILDER_ASSETS nor in {}, and the install script {} is missing",
            cache_bin_dir().display(),
            script.display()
        )));
    }
    eprintln!(
        "control-plane binaries not cached: running {}",
        script.display()
    );
    let output = Command::new(&script)
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(Error::io("running", &script))?;
    if !output.status.success() {
        return Err(Error::InstallScript {
            script,
            status: output.status,
        });
    }
    // The script prints the bin directory as its last line.
    let stdout = String::from_utf8_lossy(&output.stdout);
    let dir = stdout.lines().last().unwrap_or_default().trim();
    if dir.is_empty() {
        return Err(Error::Binaries(format!(
            "{} printed no bin directory",
            script.display()
        )));
    }
    Ok(PathBuf::from(dir))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn versions_are_parsed_from_the_version_line() {
        assert_eq!(
            parse_version("Kubernetes v1.20.2\n"),
            Some(KubernetesVersion {
                major: 1,
                minor: 20
            })
        );
        assert_eq!(
            parse_version("Kubernetes v1.31.0-rc.1"),
            Some(KubernetesVersion {
                major: 1,
                minor: 31
            })
        );
        assert_eq!(
            parse_version("Kubernetes v0.0.0-master+$Format"),
            Some(KubernetesVersion { major: 0, minor: 0 })
        );
        assert_eq!(parse_version("garbage"), None);
    }

    #[test]
    fn an_incomplete_directory_names_what_is_missing() {
        let dir = tempfile::Builder::new()
            .prefix("binaries-")
            .tempdir()
            .unwrap();
        std::fs::write(dir.path().join("etcd"), "").unwrap();
        let message = Binaries::in_dir(dir.path()).unwrap_err().to_string();
        for name in NAMES {
            assert!(message.contains(name), "{message}");
        }
    }
}
