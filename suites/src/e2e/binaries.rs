//! The host binaries the deployment's images map to, found next to the running executable
//! (`target/<profile>/`) and built with one `cargo build` when missing or older than their
//! sources.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::error::{Error, Result};

/// An upstream image (without tag) and the workspace binary that plays it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageBinary {
    /// The image reference without tag, as the fixtures name it.
    pub image: &'static str,
    /// The binary's file name.
    pub binary: &'static str,
    /// The cargo package that builds it.
    pub package: &'static str,
    /// The package's directory, relative to the workspace root.
    pub dir: &'static str,
}

/// Every image the fixtures of `fixtures/manila-csi/` use.
pub const IMAGES: &[ImageBinary] = &[
    ImageBinary {
        image: "registry.k8s.io/provider-os/manila-csi-plugin",
        binary: "manila-csi-plugin",
        package: "manila-csi-plugin",
        dir: "drivers/manila-csi-plugin",
    },
    ImageBinary {
        image: "registry.k8s.io/sig-storage/nfsplugin",
        binary: "nfs-csi-plugin",
        package: "nfs-csi-plugin",
        dir: "drivers/nfs-csi-plugin",
    },
    ImageBinary {
        image: "registry.k8s.io/sig-storage/csi-provisioner",
        binary: "csi-provisioner",
        package: "csi-provisioner",
        dir: "sidecars/csi-provisioner",
    },
    ImageBinary {
        image: "registry.k8s.io/sig-storage/csi-attacher",
        binary: "csi-attacher",
        package: "csi-attacher",
        dir: "sidecars/csi-attacher",
    },
    ImageBinary {
        image: "registry.k8s.io/sig-storage/csi-resizer",
        binary: "csi-resizer",
        package: "csi-resizer",
        dir: "sidecars/csi-resizer",
    },
    ImageBinary {
        image: "registry.k8s.io/sig-storage/csi-snapshotter",
        binary: "csi-snapshotter",
        package: "csi-snapshotter",
        dir: "sidecars/csi-snapshotter",
    },
    ImageBinary {
        image: "registry.k8s.io/sig-storage/snapshot-controller",
        binary: "snapshot-controller",
        package: "snapshot-controller",
        dir: "sidecars/snapshot-controller",
    },
    ImageBinary {
        image: "registry.k8s.io/sig-storage/csi-node-driver-registrar",
        binary: "node-driver-registrar",
        package: "node-driver-registrar",
        dir: "sidecars/node-driver-registrar",
    },
    ImageBinary {
        image: "registry.k8s.io/sig-storage/livenessprobe",
        binary: "livenessprobe",
        package: "livenessprobe",
        dir: "sidecars/livenessprobe",
    },
];

/// The harness binaries a cluster needs (node agents and their pod-sandbox helper).
const HARNESS_BINARIES: &[&str] = &["node-agent", "pod-sandbox"];

/// Sources every binary depends on besides its own package.
const SHARED_SOURCES: &[&str] = &[
    "drivers/csi-proto",
    "sidecars/sidecar-common",
    "harness/src",
    "harness/Cargo.toml",
    "Cargo.lock",
];

/// The located binaries.
#[derive(Debug, Clone)]
pub struct Binaries {
    dir: PathBuf,
}

impl Binaries {
    /// The binaries in `dir`, or (`None`) in the cargo profile directory of the running
    /// executable (`target/<profile>/`, the parent of a test's `deps/`). Missing or stale
    /// ones are built with one `cargo build -p … --bins` for that profile; a binary still
    /// missing afterwards is an [`Error::Binary`] naming it.
    pub async fn locate_or_build(dir: Option<&Path>) -> Result<Self> {
        let dir = match dir {
            Some(dir) => dir.to_path_buf(),
            None => profile_dir()?,
        };
        let binaries = Binaries { dir };
        let root = workspace_root();
        let stale = binaries.stale(&root);
        if !stale.is_empty() {
            tracing::info!(?stale, "building the e2e binaries");
            binaries.build(&root, &stale).await?;
        }
        for name in binaries.names() {
            let path = binaries.dir.join(name);
            if !path.is_file() {
                return Err(Error::Binary {
                    name: name.into(),
                    reason: format!(
                        "missing at {} after building it; build it with `cargo build -p {} --bins`",
                        path.display(),
                        package_of(name)
                    ),
                });
            }
        }
        Ok(binaries)
    }

    /// The directory holding them.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The `node-agent` binary.
    pub fn node_agent(&self) -> PathBuf {
        self.dir.join("node-agent")
    }

    /// The image map of the cluster: each image of [`IMAGES`] (without tag, so every tag
    /// matches) → its binary.
    pub fn image_map(&self) -> Vec<(String, PathBuf)> {
        IMAGES
            .iter()
            .map(|i| (i.image.to_string(), self.dir.join(i.binary)))
            .collect()
    }

    fn names(&self) -> impl Iterator<Item = &'static str> {
        IMAGES
            .iter()
            .map(|i| i.binary)
            .chain(HARNESS_BINARIES.iter().copied())
    }

    /// The binaries that are missing or older than their sources.
    fn stale(&self, root: &Path) -> Vec<&'static str> {
        let shared = newest(SHARED_SOURCES.iter().map(|s| root.join(s)));
        self.names()
            .filter(|name| {
                let sources = match IMAGES.iter().find(|i| i.binary == *name) {
                    Some(image) => newest([root.join(image.dir)]),
                    None => newest([root.join("harness")]),
                };
                let built = std::fs::metadata(self.dir.join(name))
                    .and_then(|m| m.modified())
                    .ok();
                built.is_none_or(|built| built < sources.max(shared))
            })
            .collect()
    }

    async fn build(&self, root: &Path, stale: &[&'static str]) -> Result<()> {
        let profile = match self.dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") | None => "dev".to_owned(),
            Some(other) => other.to_owned(),
        };
        let mut packages: Vec<&str> = stale.iter().map(|name| package_of(name)).collect();
        packages.sort_unstable();
        packages.dedup();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut command = tokio::process::Command::new(&cargo);
        command.args(["build", "--profile", &profile]);
        if let Some(target) = self.dir.parent() {
            command.arg("--target-dir").arg(target);
        }
        for package in &packages {
            command.args(["-p", package]);
        }
        command.arg("--bins").current_dir(root);
        let status = command.status().await.map_err(|e| Error::Binary {
            name: stale.join(", "),
            reason: format!("cannot run {cargo}: {e}"),
        })?;
        if status.success() {
            Ok(())
        } else {
            Err(Error::Binary {
                name: stale.join(", "),
                reason: format!(
                    "`cargo build --profile {profile} -p {} --bins` failed ({status})",
                    packages.join(" -p ")
                ),
            })
        }
    }
}

fn package_of(binary: &str) -> &'static str {
    IMAGES
        .iter()
        .find(|i| i.binary == binary)
        .map_or("harness", |i| i.package)
}

/// The workspace root (this crate's parent directory).
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// `target/<profile>` for the running executable (`target/<profile>/deps/<exe>`, or
/// `target/<profile>/<exe>`).
fn profile_dir() -> Result<PathBuf> {
    let exe = std::env::current_exe().map_err(|e| Error::Binary {
        name: "the current executable".into(),
        reason: e.to_string(),
    })?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    Ok(if dir.file_name().is_some_and(|n| n == "deps") {
        dir.parent().unwrap_or(dir).to_path_buf()
    } else {
        dir.to_path_buf()
    })
}

/// The newest modification time of the files under `paths` (skipping `target/`).
fn newest(paths: impl IntoIterator<Item = PathBuf>) -> SystemTime {
    let mut newest = SystemTime::UNIX_EPOCH;
    let mut stack: Vec<PathBuf> = paths.into_iter().collect();
    while let Some(path) = stack.pop() {
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            if path.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            for entry in std::fs::read_dir(&path).into_iter().flatten().flatten() {
                stack.push(entry.path());
            }
        } else if let Ok(modified) = meta.modified() {
            newest = newest.max(modified);
        }
    }
    newest
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn every_fixture_image_is_mapped() {
        let root = workspace_root().join("fixtures/manila-csi");
        let mut images = Vec::new();
        for entry in std::fs::read_dir(&root).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            for line in text.lines() {
                if let Some(image) = line.trim().strip_prefix("image: ") {
                    images.push(image.to_string());
                }
            }
        }
        assert!(images.len() >= 9, "{images:?}");
        for image in images {
            let (name, _tag) = image.rsplit_once(':').unwrap();
            assert!(
                IMAGES.iter().any(|i| i.image == name),
                "{image} is not mapped to a binary"
            );
        }
    }
}
