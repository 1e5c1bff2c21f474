//! `csi-provisioner`: the external provisioner sidecar.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    Ok(sidecar_common::sidecar::main::<csi_provisioner::ExternalProvisioner>().await?)
}
