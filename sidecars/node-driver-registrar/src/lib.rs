//! `node-driver-registrar`: registers a CSI driver with kubelet, as the upstream sidecar of
//! the same name does.
//!
//! It asks the driver for its name (Probe until ready, then GetPluginInfo), serves kubelet's
//! plugin-registration API ([`csi_proto::registration::v1`]) on
//! `<--plugin-registration-path>/<driver>-reg.sock` and answers GetInfo with
//! `{type: "CSIPlugin", name: <driver>, endpoint: <--kubelet-registration-path>,
//! supported_versions: ["1.0.0"]}`. kubelet (here: the node agent's plugin watcher) then
//! registers the driver and reports back with NotifyRegistrationStatus: a refusal ends the
//! process with the error (exit 1), so that the container restarts, as upstream. SIGTERM
//! removes the socket, which makes kubelet deregister the driver.
//!
//! See [`config::Config`] for the flags and [`run`] for the whole flow.

pub mod config;
pub mod health;
pub mod registration;

use std::time::Duration;

use anyhow::Context as _;
use csi_proto::Endpoint;
use csi_proto::registration::v1::registration_server::RegistrationServer;
use csi_proto::v1::GetPluginInfoRequest;
use csi_proto::v1::identity_client::IdentityClient;
use sidecar_common::run::stopped;
use tonic::transport::Channel;

use crate::config::{Config, Mode};
use crate::registration::{RegistrationService, Verdict};

/// Runs the mode the flags select until `shutdown` (registration mode) and returns how it
/// ended: `Ok` after a clean shutdown or a passing probe.
pub async fn run(
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    config.validate()?;
    match config.mode {
        Mode::KubeletRegistrationProbe => probe(&config),
        Mode::Registration => register(config, shutdown).await,
    }
}

fn probe(config: &Config) -> anyhow::Result<()> {
    let marker = config.registration_marker();
    if marker.exists() {
        println!(
            "kubelet registered the plugin ({} exists)",
            marker.display()
        );
        Ok(())
    } else {
        anyhow::bail!(
            "kubelet has not registered the plugin: {} does not exist",
            marker.display()
        )
    }
}

async fn register(
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let endpoint = Endpoint::parse(&config.csi_address)
        .with_context(|| format!("--csi-address {:?}", config.csi_address))?;
    let channel = csi_proto::connect_lazy(&endpoint)?;
    wait_for_driver(&channel, &endpoint, config.timeout).await;
    let driver = driver_name(&channel, config.timeout).await?;
    tracing::info!(%driver, %endpoint, "CSI driver name read");

    let marker = config.registration_marker();
    // A marker left by an earlier run would make the probe pass before kubelet answers.
    let _ = std::fs::remove_file(&marker);

    let socket = config.registration_socket(&driver);
    let listener = csi_proto::Listener::bind(&Endpoint::Unix(socket.clone()))
        .await
        .context("registration socket")?;
    let (service, mut verdict) = RegistrationService::new(
        driver.clone(),
        config.kubelet_registration_path.display().to_string(),
    );
    tracing::info!(socket = %socket.display(), "serving the registration socket");

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let health = match &config.http_endpoint {
        Some(address) => Some(
            health::serve(
                address,
                socket.clone(),
                verdict.clone(),
                stopped(stop_rx.clone()),
            )
            .await?,
        ),
        None => None,
    };
    let router = tonic::transport::Server::builder().add_service(RegistrationServer::new(service));
    let server = tokio::spawn(csi_proto::serve(router, listener, stopped(stop_rx)));

    tokio::pin!(shutdown);
    let outcome = loop {
        tokio::select! {
            () = &mut shutdown => break Ok(()),
            changed = verdict.changed() => {
                if changed.is_err() {
                    break Ok(());
                }
                let now = verdict.borrow_and_update().clone();
                match now {
                    Verdict::Registered => {
                        if let Err(error) = std::fs::write(&marker, b"") {
                            tracing::debug!(marker = %marker.display(), %error, "cannot write the registration marker");
                        }
                    }
                    Verdict::Refused(error) => break Err(anyhow::anyhow!(
                        "registration process failed with error: {error}; restarting the registration container"
                    )),
                    Verdict::Pending => {}
                }
            }
        }
    };
    let _ = stop_tx.send(true);
    // `serve` removes the socket when it stops.
    match server.await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::warn!(%error, "registration server failed"),
        Err(error) => tracing::warn!(%error, "registration server task failed"),
    }
    if let Some(health) = health {
        let _ = health.await;
    }
    let _ = std::fs::remove_file(&socket);
    outcome
}

/// Probes until the driver is ready, as upstream's "probe forever": each failed round of
/// `timeout` is logged and another begins.
async fn wait_for_driver(channel: &Channel, endpoint: &Endpoint, timeout: Duration) {
    loop {
        match sidecar_common::driver::wait_ready(channel, endpoint, timeout).await {
            Ok(()) => return,
            Err(error) => tracing::warn!(%error, "CSI driver not ready yet; still waiting"),
        }
    }
}

async fn driver_name(channel: &Channel, timeout: Duration) -> anyhow::Result<String> {
    let mut identity = IdentityClient::new(channel.clone());
    let info = sidecar_common::driver::with_timeout(
        "GetPluginInfo",
        timeout,
        identity.get_plugin_info(GetPluginInfoRequest {}),
    )
    .await?;
    if info.name.is_empty() {
        anyhow::bail!("the CSI driver's GetPluginInfo returned an empty name");
    }
    Ok(info.name)
}
