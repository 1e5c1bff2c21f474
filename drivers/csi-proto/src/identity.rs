//! The CSI Identity service both drivers serve: plugin info, capabilities following the
//! services served and topology, and a Probe that asks a [`Readiness`] (the Manila driver's
//! forwarding partner; nothing for the Cinder driver).

use std::fmt::Debug;
use std::future::Future;

use tonic::{Request, Response, Status};

use crate::rpc_log::handle;
use crate::v1::identity_server::Identity;
use crate::v1::plugin_capability::{self, service, volume_expansion};
use crate::v1::{self, PluginCapability};

/// What Probe asks before answering ready. An error is Probe's answer, as is.
pub trait Readiness: Debug + Send + Sync + 'static {
    /// `Ok` when the plugin can serve.
    fn ready(&self) -> impl Future<Output = Result<(), Status>> + Send;
}

/// Always ready: Probe answers `ready: true`.
#[derive(Clone, Copy, Debug, Default)]
pub struct AlwaysReady;

impl Readiness for AlwaysReady {
    async fn ready(&self) -> Result<(), Status> {
        Ok(())
    }
}

/// `None` is always ready.
impl<R: Readiness> Readiness for Option<R> {
    async fn ready(&self) -> Result<(), Status> {
        match self {
            Some(readiness) => readiness.ready().await,
            None => Ok(()),
        }
    }
}

/// Identity: `GetPluginInfo` (name and version), `GetPluginCapabilities` (Controller service
/// when served, online volume expansion, accessibility constraints with topology) and
/// `Probe` (see [`Readiness`]). Calls are logged through [`crate::rpc_log::handle`].
#[derive(Clone, Debug)]
pub struct IdentityService<R = AlwaysReady> {
    driver_name: String,
    vendor_version: String,
    controller: bool,
    with_topology: bool,
    readiness: R,
}

impl<R> IdentityService<R> {
    /// `controller`: the Controller service is served; `with_topology`: volumes carry
    /// accessibility constraints.
    pub fn new(
        driver_name: impl Into<String>,
        vendor_version: impl Into<String>,
        controller: bool,
        with_topology: bool,
        readiness: R,
    ) -> Self {
        IdentityService {
            driver_name: driver_name.into(),
            vendor_version: vendor_version.into(),
            controller,
            with_topology,
            readiness,
        }
    }
}

fn service_capability(kind: service::Type) -> PluginCapability {
    PluginCapability {
        r#type: Some(plugin_capability::Type::Service(
            plugin_capability::Service {
                r#type: kind as i32,
            },
        )),
    }
}

#[tonic::async_trait]
impl<R: Readiness> Identity for IdentityService<R> {
    async fn get_plugin_info(
        &self,
        request: Request<v1::GetPluginInfoRequest>,
    ) -> Result<Response<v1::GetPluginInfoResponse>, Status> {
        handle("GetPluginInfo", request.into_inner(), |_| async {
            Ok::<_, Status>(v1::GetPluginInfoResponse {
                name: self.driver_name.clone(),
                vendor_version: self.vendor_version.clone(),
                manifest: Default::default(),
            })
        })
        .await
    }

    async fn get_plugin_capabilities(
        &self,
        request: Request<v1::GetPluginCapabilitiesRequest>,
    ) -> Result<Response<v1::GetPluginCapabilitiesResponse>, Status> {
        handle("GetPluginCapabilities", request.into_inner(), |_| async {
            let mut capabilities = Vec::new();
            if self.controller {
                capabilities.push(service_capability(service::Type::ControllerService));
            }
            capabilities.push(PluginCapability {
                r#type: Some(plugin_capability::Type::VolumeExpansion(
                    plugin_capability::VolumeExpansion {
                        r#type: volume_expansion::Type::Online as i32,
                    },
                )),
            });
            if self.with_topology {
                capabilities.push(service_capability(
                    service::Type::VolumeAccessibilityConstraints,
                ));
            }
            Ok::<_, Status>(v1::GetPluginCapabilitiesResponse { capabilities })
        })
        .await
    }

    async fn probe(
        &self,
        request: Request<v1::ProbeRequest>,
    ) -> Result<Response<v1::ProbeResponse>, Status> {
        handle("Probe", request.into_inner(), |_| async {
            self.readiness.ready().await?;
            Ok::<_, Status>(v1::ProbeResponse { ready: Some(true) })
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct NotReady;

    impl Readiness for NotReady {
        async fn ready(&self) -> Result<(), Status> {
            Err(Status::failed_precondition("the partner is down"))
        }
    }

    fn kinds(response: &v1::GetPluginCapabilitiesResponse) -> Vec<String> {
        response
            .capabilities
            .iter()
            .map(|c| format!("{:?}", c.r#type))
            .collect()
    }

    #[tokio::test]
    async fn info_and_capabilities_follow_the_parameters() -> Result<(), Status> {
        let full = IdentityService::new("x.csi.example.org", "1.2.3", true, true, AlwaysReady);
        let info = full
            .get_plugin_info(Request::new(v1::GetPluginInfoRequest {}))
            .await?
            .into_inner();
        assert_eq!(
            (info.name.as_str(), info.vendor_version.as_str()),
            ("x.csi.example.org", "1.2.3")
        );
        let all = full
            .get_plugin_capabilities(Request::new(v1::GetPluginCapabilitiesRequest {}))
            .await?
            .into_inner();
        assert_eq!(all.capabilities.len(), 3, "{:?}", kinds(&all));
        let node_only = IdentityService::new("x", "1", false, false, AlwaysReady)
            .get_plugin_capabilities(Request::new(v1::GetPluginCapabilitiesRequest {}))
            .await?
            .into_inner();
        let only = kinds(&node_only);
        assert_eq!(only.len(), 1);
        assert!(only[0].contains("VolumeExpansion"), "{only:?}");
        Ok(())
    }

    #[tokio::test]
    async fn probe_answers_what_readiness_says() -> Result<(), Status> {
        let ready = IdentityService::new("x", "1", true, true, None::<NotReady>)
            .probe(Request::new(v1::ProbeRequest {}))
            .await?
            .into_inner();
        assert_eq!(ready.ready, Some(true));
        let refused = IdentityService::new("x", "1", true, true, Some(NotReady))
            .probe(Request::new(v1::ProbeRequest {}))
            .await
            .err()
            .ok_or_else(|| Status::internal("a partner that is down was ready"))?;
        assert_eq!(refused.code(), tonic::Code::FailedPrecondition);
        assert_eq!(refused.message(), "the partner is down");
        Ok(())
    }
}
