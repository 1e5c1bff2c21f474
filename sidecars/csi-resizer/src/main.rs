//! `csi-resizer`: the external resizer sidecar.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    Ok(sidecar_common::sidecar::main::<csi_resizer::ExternalResizer>().await?)
}
