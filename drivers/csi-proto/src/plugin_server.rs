//! The serving end of a CSI plugin: its `--endpoint` flag bound, and its Identity, Controller
//! and Node services served, each behind a [`PanicGuard`] (a bug answers Internal instead of
//! resetting the caller's stream), until shutdown.

use std::future::Future;

use tonic::transport::Server;

use crate::panic_guard::PanicGuard;
use crate::v1::controller_server::{Controller, ControllerServer};
use crate::v1::identity_server::{Identity, IdentityServer};
use crate::v1::node_server::{Node, NodeServer};
use crate::{Endpoint, Listener};

/// Why a plugin could not bind or serve; each message names the flag or the endpoint.
#[derive(Clone, Debug, thiserror::Error)]
pub enum PluginServeError {
    /// `--endpoint` is not an endpoint (a driver's InvalidArgument).
    #[error("--endpoint {endpoint:?}: {reason}")]
    BadEndpoint {
        /// The flag's value.
        endpoint: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The endpoint cannot be bound (a driver's FailedPrecondition).
    #[error("--endpoint {endpoint}: {reason}")]
    Bind {
        /// The endpoint.
        endpoint: String,
        /// Why.
        reason: String,
    },
    /// Serving failed (a driver's Internal).
    #[error("serving {endpoint}: {reason}")]
    Serve {
        /// The endpoint.
        endpoint: String,
        /// Why.
        reason: String,
    },
}

impl PluginServeError {
    /// The gRPC code a driver reports it with: a bad flag is InvalidArgument, an endpoint
    /// that cannot be bound FailedPrecondition, a failed server Internal.
    pub fn code(&self) -> tonic::Code {
        match self {
            PluginServeError::BadEndpoint { .. } => tonic::Code::InvalidArgument,
            PluginServeError::Bind { .. } => tonic::Code::FailedPrecondition,
            PluginServeError::Serve { .. } => tonic::Code::Internal,
        }
    }
}

/// Binds the `--endpoint` flag's value (replacing a stale unix socket).
pub async fn bind_endpoint(endpoint: &str) -> Result<Listener, PluginServeError> {
    let parsed: Endpoint =
        endpoint
            .parse()
            .map_err(|e: crate::Error| PluginServeError::BadEndpoint {
                endpoint: endpoint.to_string(),
                reason: e.to_string(),
            })?;
    Listener::bind(&parsed)
        .await
        .map_err(|e| PluginServeError::Bind {
            endpoint: parsed.to_string(),
            reason: e.to_string(),
        })
}

/// Serves `identity` and the `controller` and `node` services a plugin has on `listener`
/// until `shutdown` resolves.
pub async fn serve_plugin<I, C, N>(
    identity: I,
    controller: Option<C>,
    node: Option<N>,
    listener: Listener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), PluginServeError>
where
    I: Identity,
    C: Controller,
    N: Node,
{
    let endpoint = listener.local_endpoint();
    tracing::info!(%endpoint, controller = controller.is_some(), node = node.is_some(), "serving CSI");
    let router = Server::builder()
        .add_service(PanicGuard::new(IdentityServer::new(identity)))
        .add_optional_service(controller.map(|c| PanicGuard::new(ControllerServer::new(c))))
        .add_optional_service(node.map(|n| PanicGuard::new(NodeServer::new(n))));
    crate::serve(router, listener, shutdown)
        .await
        .map_err(|e| PluginServeError::Serve {
            endpoint: endpoint.to_string(),
            reason: e.to_string(),
        })
}
