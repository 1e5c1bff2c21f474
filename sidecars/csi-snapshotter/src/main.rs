//! `csi-snapshotter`: the external snapshotter sidecar.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    Ok(sidecar_common::sidecar::main::<csi_snapshotter::ExternalSnapshotter>().await?)
}
