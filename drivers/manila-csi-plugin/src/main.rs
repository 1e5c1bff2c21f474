//! The `manila-csi-plugin` binary: parses flags and serves the CSI services.

fn main() -> anyhow::Result<()> {
    use clap::Parser;
    let config = manila_csi_plugin::config::Config::parse();
    config.validate()?;
    anyhow::bail!("serving is not wired yet")
}
