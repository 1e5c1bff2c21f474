//! The serving end of a CSI plugin: its `--endpoint` flag bound, and its Identity, Controller
//! and Node services served, each behind a [`PanicGuard`] (a bug answers Internal instead of
//! resetting the caller's stream), until shutdown.

use std::future::Future;
use std::time::Duration;

use tokio::sync::Notify;

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

/// Which services a plugin serves: `--provide-controller-service` and
/// `--provide-node-service` (both on unless set to false), as upstream's drivers name them.
#[derive(Clone, Copy, Debug, clap::Args)]
pub struct ServiceFlags {
    /// Serve the Controller service.
    #[arg(long = "provide-controller-service", num_args = 0..=1,
          default_missing_value = "true", default_value_t = true, action = clap::ArgAction::Set)]
    pub provide_controller_service: bool,

    /// Serve the Node service.
    #[arg(long = "provide-node-service", num_args = 0..=1,
          default_missing_value = "true", default_value_t = true, action = clap::ArgAction::Set)]
    pub provide_node_service: bool,
}

impl ServiceFlags {
    /// Refuses turning both services off (a plugin serving only Identity is a mistake).
    pub fn validate(&self) -> Result<(), String> {
        if self.provide_controller_service || self.provide_node_service {
            Ok(())
        } else {
            Err("at least one of --provide-controller-service and --provide-node-service must be true".into())
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

/// A plugin's services, ready to be served on one endpoint: what a driver builds. A driver
/// names its own as a type alias (`type Driver = PluginServices<…>`).
#[derive(Debug)]
pub struct PluginServices<I, C, N> {
    /// The Identity service (always served).
    pub identity: I,
    /// The Controller service, if the plugin provides it.
    pub controller: Option<C>,
    /// The Node service, if the plugin provides it.
    pub node: Option<N>,
}

impl<I, C, N> PluginServices<I, C, N> {
    /// The services from their parts.
    pub fn new(identity: I, controller: Option<C>, node: Option<N>) -> Self {
        PluginServices {
            identity,
            controller,
            node,
        }
    }

    /// Binds `endpoint` (replacing a stale unix socket); see [`bind_endpoint`].
    pub async fn bind(endpoint: &str) -> Result<Listener, PluginServeError> {
        bind_endpoint(endpoint).await
    }
}

impl<I: Identity, C: Controller, N: Node> PluginServices<I, C, N> {
    /// Serves until `shutdown` resolves, each service behind a panic guard.
    pub async fn serve(
        self,
        listener: Listener,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), PluginServeError> {
        serve_plugin(
            self.identity,
            self.controller,
            self.node,
            listener,
            shutdown,
        )
        .await
    }

    /// Serves until `shutdown` resolves, then lets calls in flight finish for at most
    /// `drain`. A CreateVolume waiting on a hung cloud call would otherwise keep the pod until
    /// kubelet kills it at the end of its grace period (30 s), holding up the replacement
    /// controller's leader election; its caller retries, and CSI calls are idempotent.
    pub async fn serve_draining(
        self,
        listener: Listener,
        shutdown: impl Future<Output = ()>,
        drain: Duration,
    ) -> Result<(), PluginServeError> {
        let signalled = Notify::new();
        let serve = self.serve(listener, async {
            shutdown.await;
            signalled.notify_one();
        });
        tokio::select! {
            served = serve => served,
            () = async {
                signalled.notified().await;
                tokio::time::sleep(drain).await;
            } => {
                tracing::warn!(
                    "calls still in flight {drain:?} after the signal (a cloud call hanging?): \
                     exiting without them; their callers retry, and CSI calls are idempotent"
                );
                Ok(())
            }
        }
    }
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
