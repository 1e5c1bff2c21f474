//! The images of the kind backend: the node image, `kindest/node` when this machine has it
//! or can pull it, otherwise the image `ci/node-image/build.sh kind` builds from Debian's
//! packages (no registry needed), cached and tagged with a hash of its recipe; and the
//! project's binaries as image archives for the nodes ([`project_image_archive`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::StreamExt;
use testcontainers::bollard::query_parameters::CreateImageOptionsBuilder;
use tokio::sync::OnceCell;

use super::super::containers::docker::engine;
use super::super::containers::image::{build_image, build_script};
use super::super::error::{Error, Result};

/// The environment variable naming a node image to use instead of looking for one.
pub const KIND_NODE_IMAGE_ENV: &str = "HARNESS_KIND_NODE_IMAGE";

/// kind's node image of the Kubernetes version this project builds.
pub const KINDEST_NODE_IMAGE: &str = "kindest/node:v1.20.2";

/// How long a pull of [`KINDEST_NODE_IMAGE`] may take before the local image is used.
const PULL_TIMEOUT: Duration = Duration::from_secs(120);

/// Which kind of node image a cluster runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KindNodeImage {
    /// kind's own image (systemd, kubelet and containerd with kubeadm's images preloaded):
    /// its containers must be privileged, as kind runs them.
    Kindest(String),
    /// The image of `ci/node-image/build.sh kind`: runs without privileges (every capability
    /// but `SYS_RESOURCE`), kubelet supervised by its entrypoint instead of systemd.
    Local(String),
}

impl KindNodeImage {
    /// The image reference.
    pub fn reference(&self) -> &str {
        match self {
            KindNodeImage::Kindest(image) | KindNodeImage::Local(image) => image,
        }
    }

    fn classify(image: String) -> Self {
        if image.starts_with("kindest/node") || image.contains("/kindest/node") {
            KindNodeImage::Kindest(image)
        } else {
            KindNodeImage::Local(image)
        }
    }
}

static IMAGE: OnceCell<KindNodeImage> = OnceCell::const_new();

/// The node image: `$HARNESS_KIND_NODE_IMAGE`; else [`KINDEST_NODE_IMAGE`] when present or
/// pullable; else the local build (instant when cached; minutes the first time, progress on
/// stderr). Why `kindest/node` was not used is logged.
pub async fn kind_node_image() -> Result<KindNodeImage> {
    IMAGE
        .get_or_try_init(|| async {
            if let Ok(image) = std::env::var(KIND_NODE_IMAGE_ENV) {
                return Ok(KindNodeImage::classify(image));
            }
            match kindest().await {
                Ok(()) => Ok(KindNodeImage::Kindest(KINDEST_NODE_IMAGE.to_string())),
                Err(reason) => {
                    tracing::info!(image = KINDEST_NODE_IMAGE, %reason, "kind's node image is not available; using the node image built from Debian's packages");
                    build().await.map(KindNodeImage::Local)
                }
            }
        })
        .await
        .cloned()
}

/// Whether kind's own image is here, pulling it if it can be.
async fn kindest() -> std::result::Result<(), String> {
    let docker = engine().map_err(|e| e.to_string())?;
    if docker.inspect_image(KINDEST_NODE_IMAGE).await.is_ok() {
        return Ok(());
    }
    let (from, tag) = KINDEST_NODE_IMAGE
        .rsplit_once(':')
        .unwrap_or((KINDEST_NODE_IMAGE, "latest"));
    let options = CreateImageOptionsBuilder::new()
        .from_image(from)
        .tag(tag)
        .build();
    let pull = async {
        let mut progress = docker.create_image(Some(options), None, None);
        while let Some(step) = progress.next().await {
            step.map_err(|e| format!("pulling it failed: {e}"))?;
        }
        Ok(())
    };
    tokio::time::timeout(PULL_TIMEOUT, pull)
        .await
        .map_err(|_| format!("pulling it took over {PULL_TIMEOUT:?}"))?
}

/// The node image `ci/node-image/build.sh kind` builds from Debian's packages (built when
/// missing), whatever else this machine has.
pub async fn local_kind_node_image() -> Result<KindNodeImage> {
    build().await.map(KindNodeImage::Local)
}

async fn build() -> Result<String> {
    build_image("kind", "openstack-csi-conformance/node:").await
}

/// Writes to `out` an image archive named `reference` (e.g.
/// `registry.k8s.io/provider-os/manila-csi-plugin:v1.20.0`) holding `binaries` in
/// `/usr/local/bin` with the shared libraries they load, its command the first binary: how
/// the project's binaries become images for [`KindOptions::image_archives`] without a
/// registry (`ci/node-image/build.sh image`).
pub async fn project_image_archive(
    reference: &str,
    binaries: &[PathBuf],
    out: &Path,
) -> Result<()> {
    if binaries.is_empty() {
        return Err(Error::InvalidOption {
            option: "binaries",
            reason: format!("the image {reference} needs at least one binary"),
        });
    }
    let script = build_script();
    let output = tokio::process::Command::new(&script)
        .arg("image")
        .arg(reference)
        .arg(out)
        .args(binaries)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .map_err(|e| Error::NodeImage(format!("running {}: {e}", script.display())))?;
    if !output.status.success() {
        return Err(Error::NodeImage(format!(
            "{} image {reference} failed ({}): {}",
            script.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_images_are_told_from_local_ones() {
        assert_eq!(
            KindNodeImage::classify("kindest/node:v1.20.2".into()),
            KindNodeImage::Kindest("kindest/node:v1.20.2".into())
        );
        assert_eq!(
            KindNodeImage::classify("mirror.example/kindest/node:v1.20.2".into()).reference(),
            "mirror.example/kindest/node:v1.20.2"
        );
        assert!(matches!(
            KindNodeImage::classify("openstack-csi-conformance/node:v1.20.2-abc".into()),
            KindNodeImage::Local(_)
        ));
    }
}
