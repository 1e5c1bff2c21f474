//! The image of the control-plane and node containers: a Debian bookworm root filesystem
//! built without any registry by `ci/node-image/build.sh container-node` (debootstrap from
//! Debian's packages, `docker import`), cached under `~/.cache/openstack-csi-conformance` and
//! tagged with a hash of its recipe. The project's binaries are not in it: they are
//! bind-mounted, so a rebuild of the code needs no new image.

use std::path::PathBuf;
use std::process::Stdio;

use tokio::sync::OnceCell;

use super::super::error::{Error, Result};

/// The environment variable naming an image to use instead of building one.
pub const NODE_IMAGE_ENV: &str = "HARNESS_CONTAINER_NODE_IMAGE";

/// The image once found or built in this process.
static IMAGE: OnceCell<String> = OnceCell::const_new();

/// The image (`repository:tag`): `$HARNESS_CONTAINER_NODE_IMAGE`, else the output of the
/// build script (instant when the image of the current recipe exists; minutes the first time,
/// with the script's progress on stderr).
pub async fn node_image() -> Result<String> {
    IMAGE
        .get_or_try_init(|| async {
            if let Ok(image) = std::env::var(NODE_IMAGE_ENV) {
                return Ok(image);
            }
            build().await
        })
        .await
        .cloned()
}

pub(crate) fn build_script() -> PathBuf {
    workspace_binaries::root().join("ci/node-image/build.sh")
}

async fn build() -> Result<String> {
    build_image(
        "container-node",
        "openstack-csi-conformance/container-node:",
    )
    .await
}

/// Runs `ci/node-image/build.sh TARGET` (progress on stderr) and returns the image it printed,
/// the last line of its output starting with `prefix`.
pub(crate) async fn build_image(target: &str, prefix: &str) -> Result<String> {
    let script = build_script();
    tracing::info!(script = %script.display(), target, "building (or finding) a node image");
    let output = tokio::process::Command::new(&script)
        .arg(target)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .await
        .map_err(|e| Error::NodeImage(format!("running {}: {e}", script.display())))?;
    if !output.status.success() {
        return Err(Error::NodeImage(format!(
            "{} {target} failed ({}); its progress and error are above",
            script.display(),
            output.status
        )));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    stdout
        .lines()
        .rev()
        .map(str::trim)
        .find(|line| line.starts_with(prefix))
        .map(str::to_string)
        .ok_or_else(|| {
            Error::NodeImage(format!(
                "{} {target} printed no image name (stdout: {stdout:?})",
                script.display()
            ))
        })
}
