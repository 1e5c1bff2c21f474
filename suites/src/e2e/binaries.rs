//! The host binaries the deployment's images map to: this workspace's, found and (when
//! missing or stale) built by [`workspace_binaries`].

use std::path::{Path, PathBuf};

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
}

/// Every image the fixtures of `fixtures/manila-csi/`, `fixtures/manila-operator/`,
/// `fixtures/cinder-csi/` and `fixtures/cinder-operator/` use.
pub const IMAGES: &[ImageBinary] = &[
    ImageBinary {
        image: "quay.io/openstack-csi-conformance/manila-csi-driver-operator",
        binary: "manila-csi-driver-operator",
        package: "manila-operator",
    },
    ImageBinary {
        image: "quay.io/openstack-csi-conformance/cinder-csi-driver-operator",
        binary: "cinder-csi-driver-operator",
        package: "cinder-operator",
    },
    ImageBinary {
        image: "registry.k8s.io/provider-os/manila-csi-plugin",
        binary: "manila-csi-plugin",
        package: "manila-csi-plugin",
    },
    ImageBinary {
        image: "registry.k8s.io/provider-os/cinder-csi-plugin",
        binary: "cinder-csi-plugin",
        package: "cinder-csi-plugin",
    },
    ImageBinary {
        image: "registry.k8s.io/sig-storage/nfsplugin",
        binary: "nfs-csi-plugin",
        package: "nfs-csi-plugin",
    },
    ImageBinary {
        image: "registry.k8s.io/sig-storage/csi-provisioner",
        binary: "csi-provisioner",
        package: "csi-provisioner",
    },
    ImageBinary {
        image: "registry.k8s.io/sig-storage/csi-attacher",
        binary: "csi-attacher",
        package: "csi-attacher",
    },
    ImageBinary {
        image: "registry.k8s.io/sig-storage/csi-resizer",
        binary: "csi-resizer",
        package: "csi-resizer",
    },
    ImageBinary {
        image: "registry.k8s.io/sig-storage/csi-snapshotter",
        binary: "csi-snapshotter",
        package: "csi-snapshotter",
    },
    ImageBinary {
        image: "registry.k8s.io/sig-storage/snapshot-controller",
        binary: "snapshot-controller",
        package: "snapshot-controller",
    },
    ImageBinary {
        image: "registry.k8s.io/sig-storage/csi-node-driver-registrar",
        binary: "node-driver-registrar",
        package: "node-driver-registrar",
    },
    ImageBinary {
        image: "registry.k8s.io/sig-storage/livenessprobe",
        binary: "livenessprobe",
        package: "livenessprobe",
    },
];

/// The binaries a cluster needs, as `(package, binary)`: the node agent and its pod-sandbox
/// helper.
const CLUSTER_BINARIES: &[(&str, &str)] =
    &[("node-agent", "node-agent"), ("pod-runtime", "pod-sandbox")];

/// The located binaries.
#[derive(Debug, Clone)]
pub struct Binaries {
    dir: PathBuf,
}

impl Binaries {
    /// The binaries in `dir`, or (`None`) this workspace's, built when missing or stale
    /// ([`workspace_binaries::binaries`]: one `cargo build -p … --bins` for the running
    /// executable's profile); a binary still missing is an [`Error::Binary`] naming it.
    pub async fn locate_or_build(dir: Option<&Path>) -> Result<Self> {
        let dir = match dir {
            Some(dir) => dir.to_path_buf(),
            None => {
                let wanted: Vec<(&'static str, &'static str)> = IMAGES
                    .iter()
                    .map(|i| (i.package, i.binary))
                    .chain(CLUSTER_BINARIES.iter().copied())
                    .collect();
                let built =
                    tokio::task::spawn_blocking(move || workspace_binaries::binaries(&wanted))
                        .await
                        .map_err(|e| Error::Binary {
                            name: "the e2e binaries".into(),
                            reason: e.to_string(),
                        })?
                        .map_err(|e| Error::Binary {
                            name: "the e2e binaries".into(),
                            reason: e.to_string(),
                        })?;
                built
                    .first()
                    .and_then(|p| p.parent())
                    .map(Path::to_path_buf)
                    .unwrap_or_default()
            }
        };
        let binaries = Binaries { dir };
        for name in binaries.names() {
            let path = binaries.dir.join(name);
            if !path.is_file() {
                return Err(Error::Binary {
                    name: name.into(),
                    reason: format!("missing at {}", path.display()),
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
            .chain(CLUSTER_BINARIES.iter().map(|(_, binary)| *binary))
    }
}

/// The workspace root (this crate's parent directory).
pub fn workspace_root() -> PathBuf {
    workspace_binaries::root()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn every_fixture_image_is_mapped() {
        let mut images = Vec::new();
        for dir in [
            "manila-csi",
            "manila-operator",
            "cinder-csi",
            "cinder-operator",
        ] {
            let root = workspace_root().join("fixtures").join(dir);
            for entry in std::fs::read_dir(&root).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_none_or(|e| e != "yaml") {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                for line in text.lines() {
                    if let Some(image) = line.trim().strip_prefix("image: ") {
                        images.push((dir, image.trim_matches('"').to_string()));
                    }
                }
            }
        }
        for dir in ["manila-operator", "cinder-operator"] {
            assert!(
                images.iter().any(|(d, _)| *d == dir),
                "no image in fixtures/{dir}: {images:?}"
            );
        }
        assert!(images.len() >= 12, "{images:?}");
        for (dir, image) in images {
            let name = image.rsplit_once(':').map_or(image.as_str(), |(n, _)| n);
            assert!(
                IMAGES.iter().any(|i| i.image == name),
                "{image} of fixtures/{dir} is not mapped to a binary"
            );
        }
    }
}
