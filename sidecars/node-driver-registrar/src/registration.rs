//! The `pluginregistration.Registration` service kubelet's plugin watcher calls.

use std::sync::Arc;

use csi_proto::registration::CSI_PLUGIN_TYPE;
use csi_proto::registration::v1::registration_server::Registration;
use csi_proto::registration::v1::{
    InfoRequest, PluginInfo, RegistrationStatus, RegistrationStatusResponse,
};
use tokio::sync::watch;
use tonic::{Request, Response, Status};

/// The CSI versions the registrar announces (as upstream does).
pub const SUPPORTED_VERSIONS: &[&str] = &["1.0.0"];

/// What kubelet said last.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Verdict {
    /// kubelet has not answered yet.
    #[default]
    Pending,
    /// kubelet registered the plugin.
    Registered,
    /// kubelet refused it, with its reason.
    Refused(String),
}

/// Serves GetInfo from fixed facts and publishes kubelet's verdicts.
#[derive(Debug, Clone)]
pub struct RegistrationService {
    driver: String,
    endpoint: String,
    verdict: Arc<watch::Sender<Verdict>>,
}

impl RegistrationService {
    /// A service announcing `driver` reachable (by kubelet) at `endpoint`; kubelet's
    /// verdicts are published on the returned receiver.
    pub fn new(driver: String, endpoint: String) -> (Self, watch::Receiver<Verdict>) {
        let (verdict, receiver) = watch::channel(Verdict::Pending);
        let service = RegistrationService {
            driver,
            endpoint,
            verdict: Arc::new(verdict),
        };
        (service, receiver)
    }
}

#[tonic::async_trait]
impl Registration for RegistrationService {
    async fn get_info(&self, _: Request<InfoRequest>) -> Result<Response<PluginInfo>, Status> {
        tracing::info!(driver = %self.driver, "received GetInfo call");
        Ok(Response::new(PluginInfo {
            r#type: CSI_PLUGIN_TYPE.to_owned(),
            name: self.driver.clone(),
            endpoint: self.endpoint.clone(),
            supported_versions: SUPPORTED_VERSIONS.iter().map(|v| (*v).to_owned()).collect(),
        }))
    }

    async fn notify_registration_status(
        &self,
        request: Request<RegistrationStatus>,
    ) -> Result<Response<RegistrationStatusResponse>, Status> {
        let status = request.into_inner();
        let verdict = if status.plugin_registered {
            tracing::info!(driver = %self.driver, "kubelet registered the plugin");
            Verdict::Registered
        } else {
            tracing::error!(driver = %self.driver, error = %status.error, "kubelet refused the plugin");
            Verdict::Refused(status.error)
        };
        self.verdict.send_replace(verdict);
        Ok(Response::new(RegistrationStatusResponse {}))
    }
}
