//! `csi-attacher`: the external attacher sidecar.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    Ok(sidecar_common::sidecar::main::<csi_attacher::ExternalAttacher>().await?)
}
